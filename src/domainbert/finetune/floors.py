"""Floor baselines: what a task scores without any pretrained encoder, as one result dict per task.

- Classification: TF-IDF over word 1-2-grams (fitted on train) + logistic regression; multi-label tasks fit one
  binary logistic regression per label (one-vs-rest, a label is predicted when its probability exceeds 0.5, as
  the models' sigmoid heads do). A text pair is joined to its text with a separator word, so that the pair's
  words are features too.
- NER: a linear-chain CRF (CRFsuite, L-BFGS with L1+L2 penalties) over the classic word features: the lowercased
  word, its 2- and 3-letter suffixes and 3-letter prefix, case and digit flags, its shape, and the words at
  +-1 and +-2, with sentence start/end markers.

The hyperparameters (C and class weighting; the CRF's c1/c2) are chosen on the validation split by the task's
primary metric from a small fixed grid, ties going to the earlier grid point; the test split is predicted
once, by the chosen model, which was fitted on the training split only. Both learners are deterministic, so a
floor is one run (stored as seed 0). The splits are taken from ``TaskData`` as they are, i.e. already
subsampled exactly as the models see them, and scored with the models' own metric functions
(``runner.score``). Predicted NER tags are not repaired, as the models' are not: seqeval's strict IOB2 mode
drops an ill-formed span in either case.

This module writes nothing and knows nothing of result folders or reports; the fine-tuning stage stores its
result next to the models'.
"""

from __future__ import annotations

import logging
import re
import time
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np
import sklearn_crfsuite
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from threadpoolctl import threadpool_limits

from domainbert.finetune.runner import PRIMARY, gold_of, score
from domainbert.task_data.splits import ClsExample, TaskData

logger = logging.getLogger(__name__)

CLS_GRID = [{"C": c, "class_weight": w} for c in (0.1, 1.0, 10.0, 100.0) for w in (None, "balanced")]
CRF_GRID = [{"c1": c1, "c2": c2} for c1 in (0.0, 0.1) for c2 in (0.01, 0.1)]
CRF_MAX_ITERATIONS = 100
PAIR_SEPARATOR = " xxpairsep "  # one word token_pattern keeps, and one that no ordinary text contains
CLS_METHOD = "TF-IDF word 1-2-grams + logistic regression (C, class weight chosen on validation)"
CRF_METHOD = "CRF over word, affix, shape and +-2 context features (c1, c2 chosen on validation)"


# ---- classification ------------------------------------------------------------------------------------------


def _cls_text(ex: ClsExample) -> str:
    return ex.text if ex.text_pair is None else ex.text + PAIR_SEPARATOR + ex.text_pair


def _cls_fit(data: TaskData, params: dict[str, Any]) -> tuple[Callable[[str], list[Any]], int]:
    """Fit vectorizer and classifier on train; return a predictor (split -> answers) and the weight count."""
    train = data.splits["train"]
    vec = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, min_df=1)
    x = vec.fit_transform([_cls_text(ex) for ex in train])
    labels = data.label_list

    def make() -> LogisticRegression:
        # newton-cg: deterministic, multinomial for several classes, and at large C it needs far fewer (if
        # costlier) iterations than lbfgs, which makes it the quicker of the two over the grid.
        return LogisticRegression(solver="newton-cg", max_iter=1000, **params)

    if data.config.multi_label:
        y = np.array([[label in ex.labels for label in labels] for ex in train], dtype=int)
        # One binary model per label; a label that is constant in train is predicted constant (no weights).
        models: list[Any] = [
            make().fit(x, y[:, j]) if 0 < y[:, j].sum() < len(train) else bool(y[0, j]) for j in range(len(labels))
        ]

        def predict(split: str) -> list[Any]:
            xe = vec.transform([_cls_text(ex) for ex in data.splits[split]])
            cols = [np.full(xe.shape[0], m) if isinstance(m, bool) else m.predict(xe).astype(bool) for m in models]
            return [
                sorted(label for label, col in zip(labels, cols, strict=True) if col[i]) for i in range(xe.shape[0])
            ]

        weights = sum(m.coef_.size + m.intercept_.size for m in models if not isinstance(m, bool))
        return predict, int(weights)

    y1 = [ex.labels[0] for ex in train]
    if len(set(y1)) == 1:  # logistic regression needs two classes; one class seen means predicting it
        only = y1[0]
        return (lambda split: [only] * len(data.splits[split])), 0
    model = make().fit(x, y1)

    def predict1(split: str) -> list[Any]:
        return [str(p) for p in model.predict(vec.transform([_cls_text(ex) for ex in data.splits[split]]))]

    return predict1, int(model.coef_.size + model.intercept_.size)


# ---- NER -----------------------------------------------------------------------------------------------------


def word_shape(word: str) -> str:
    """``Linux2.6`` -> ``Xxd.d``: upper/lower/digit classes, runs collapsed to one character."""
    shape = "".join("X" if c.isupper() else "x" if c.islower() else "d" if c.isdigit() else c for c in word)
    return re.sub(r"(.)\1+", r"\1", shape)


def word_features(tokens: list[str], i: int) -> dict[str, Any]:
    """CRFsuite features of word ``i``: strings become one-hot ``name=value`` features, booleans 0/1 weights."""
    w = tokens[i]
    low = w.lower()
    f: dict[str, Any] = {
        "bias": 1.0,
        "w": low,
        "suf3": low[-3:],
        "suf2": low[-2:],
        "pre3": low[:3],
        "upper": w.isupper(),
        "title": w.istitle(),
        "digit": w.isdigit(),
        "shape": word_shape(w),
    }
    for off in (-2, -1, 1, 2):
        j = i + off
        if 0 <= j < len(tokens):
            f[f"{off}:w"] = tokens[j].lower()
            if abs(off) == 1:
                f[f"{off}:title"] = tokens[j].istitle()
                f[f"{off}:upper"] = tokens[j].isupper()
    if i == 0:
        f["BOS"] = True
    if i == len(tokens) - 1:
        f["EOS"] = True
    return f


def sentence_features(tokens: list[str]) -> list[dict[str, Any]]:
    return [word_features(tokens, i) for i in range(len(tokens))]


def _ner_fit(
    data: TaskData, params: dict[str, Any], feats: dict[str, list[list[dict[str, Any]]]]
) -> tuple[Callable[[str], list[Any]], int]:
    # all_possible_transitions: transitions never seen in train (O -> I-X) get weights too, learnt negative.
    crf = sklearn_crfsuite.CRF(
        algorithm="lbfgs", max_iterations=CRF_MAX_ITERATIONS, all_possible_transitions=True, **params
    )
    crf.fit(feats["train"], [ex.tags for ex in data.splits["train"]])

    def predict(split: str) -> list[Any]:
        return [list(map(str, tags)) for tags in crf.predict(feats[split])]

    # CRFsuite keeps only the nonzero weights (L1 prunes many); that is the size of the fitted model.
    return predict, len(crf.state_features_) + len(crf.transition_features_)


# ---- both ----------------------------------------------------------------------------------------------------


def _search(
    data: TaskData, grid: list[dict[str, Any]], fit: Callable[[dict[str, Any]], tuple[Callable, int]], primary: str
) -> tuple[tuple[float, dict[str, Any], dict[str, Any], Callable, int], list[dict[str, Any]], float, float]:
    """Fit every grid point and keep the best on validation: (best, each point's score, fit seconds, CPU)."""
    val_gold = gold_of(data, "validation")
    best: tuple[float, dict[str, Any], dict[str, Any], Callable, int] | None = None
    search = []
    seconds = cpu = 0.0
    for params in grid:
        t1, c1 = time.perf_counter(), time.process_time()
        # One BLAS/OpenMP thread: on these small sparse problems more threads only add contention (the
        # machine is shared with the models' runs) and could reorder floating-point sums.
        with warnings.catch_warnings(), threadpool_limits(1):
            # Constant label columns and slow convergence at large C only warn; the grid covers both.
            warnings.simplefilter("ignore")
            predict, n_weights = fit(params)
        seconds += time.perf_counter() - t1
        cpu += time.process_time() - c1
        metrics = score(data, val_gold, predict("validation"))
        search.append({"params": params, primary: metrics[primary]})
        logger.info("floor %s %s: validation %s %.4f", data.config.name, params, primary, metrics[primary])
        if best is None or metrics[primary] > best[0]:
            best = (metrics[primary], params, metrics, predict, n_weights)
    assert best is not None  # the grids are never empty
    return best, search, seconds, cpu


def run_floor(data: TaskData) -> dict[str, Any]:
    """Fit and score the task's floor baseline.

    Args:
        data: the loaded task (``tasks.load_task``), subsampled exactly as the models see it.

    Returns:
        ``validation`` and ``test`` metrics (the models' metric functions), ``gold``/``pred`` (test answers in
        test-file order, as ``runner.gold_of``), ``train_seconds`` and ``train_cpu_seconds`` (every grid
        point's fit plus feature extraction; validation scoring excluded), ``train_examples``,
        ``num_parameters`` (= ``trainable_parameters``: the logistic weights and intercepts, or the CRF's
        nonzero feature weights), ``history`` (empty), ``best_step``/``steps`` (0), ``stopped_early`` (False),
        ``floor_method``, ``floor_params`` (the chosen grid point) and ``floor_search`` (each grid point's
        validation primary metric).
    """
    ner = data.config.type == "ner"
    primary = PRIMARY[data.config.type]
    t0, c0 = time.perf_counter(), time.process_time()
    grid: list[dict[str, Any]]
    if ner:
        feats = {split: [sentence_features(ex.tokens) for ex in data.splits[split]] for split in data.splits}
        grid, fit = CRF_GRID, (lambda p: _ner_fit(data, p, feats))
    else:
        grid, fit = CLS_GRID, (lambda p: _cls_fit(data, p))
    train_seconds, train_cpu = time.perf_counter() - t0, time.process_time() - c0
    best, search, grid_seconds, grid_cpu = _search(data, grid, fit, primary)
    train_seconds, train_cpu = train_seconds + grid_seconds, train_cpu + grid_cpu
    _, params, val_metrics, predict, n_weights = best
    gold = gold_of(data, "test")
    pred = predict("test")
    test = score(data, gold, pred)
    n_train = len(data.splits["train"])
    logger.info(
        "floor %s: chose %s, test %s %.4f (%.1f s)", data.config.name, params, primary, test[primary], train_seconds
    )
    return {
        "validation": val_metrics,
        "test": test,
        "gold": gold,
        "pred": pred,
        "history": [],
        "best_step": 0,
        "steps": 0,
        "stopped_early": False,
        "train_seconds": train_seconds,
        "train_cpu_seconds": train_cpu,
        "train_examples": n_train,
        "num_parameters": n_weights,
        "trainable_parameters": n_weights,
        "floor_method": CRF_METHOD if ner else CLS_METHOD,
        "floor_params": params,
        "floor_search": search,
    }
