"""Statistics for comparing fine-tuned models: mean/std over seeds and paired bootstrap intervals.

What is resampled: the TEST EXAMPLES (sentences for NER, texts for classification). One bootstrap sample
draws ``n`` example indices with replacement from the ``n`` test examples; the SAME indices are applied to
the gold answers and to both models' predictions (paired), and, in ``compare_models``, to every seed's
predictions. The statistic of one sample is the metric difference (model A minus model B) averaged over the
paired seeds. The interval is the percentile interval of that statistic over ``n_samples`` draws; the
two-sided p-value is ``2 * min(P(d <= 0), P(d >= 0))`` over the draws (capped at 1). The seeds themselves
are not resampled: seed variation shows in ``std_a``/``std_b``, and averaging over seeds inside each draw
makes the interval about the models, not about one lucky seed. When the interval contains 0 the verdict
is "no significant difference".

Metrics: NER micro F1 (seqeval strict IOB2) and classification accuracy, macro-F1 and multi-label micro-F1
are sums of per-example counts, so ``compare_models`` computes them from count matrices (one matrix product
per model and seed for all draws); ``paired_bootstrap`` takes any ``metric_fn`` and is the reference the
fast path is tested against (same seed -> same draws -> same numbers).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

NO_DIFFERENCE = "no significant difference"


def mean_std(values: Sequence[float]) -> dict[str, float]:
    """Mean and sample standard deviation (ddof=1; 0.0 for a single value) and the count."""
    arr = np.asarray(list(values), dtype=float)
    if arr.size == 0:
        raise ValueError("mean_std of no values")
    return {"mean": float(arr.mean()), "std": float(arr.std(ddof=1)) if arr.size > 1 else 0.0, "n": int(arr.size)}


def bootstrap_indices(n: int, n_samples: int, seed: int) -> np.ndarray:
    """``[n_samples, n]`` example indices drawn with replacement (the draws every function here uses)."""
    if n < 1:
        raise ValueError("cannot bootstrap an empty test set")
    return np.random.default_rng(seed).integers(0, n, size=(n_samples, n))


def _interval(diffs: np.ndarray, point: float, confidence: float) -> dict[str, Any]:
    alpha = 1.0 - confidence
    low, high = np.quantile(diffs, [alpha / 2, 1 - alpha / 2])
    p = min(1.0, 2.0 * min(float(np.mean(diffs <= 0)), float(np.mean(diffs >= 0))))
    significant = not (low <= 0.0 <= high)
    if significant:
        verdict = "A better" if point > 0 else "B better"
    else:
        verdict = NO_DIFFERENCE
    return {"diff": float(point), "low": float(low), "high": float(high), "p_value": p,
            "significant": significant, "verdict": verdict, "confidence": confidence}


def paired_bootstrap(metric_fn: Callable[[list[Any], list[Any]], float], gold: Sequence[Any], pred_a: Sequence[Any],
                     pred_b: Sequence[Any], n_samples: int = 1000, confidence: float = 0.95,
                     seed: int = 0) -> dict[str, Any]:
    """Paired bootstrap of ``metric_fn(gold, pred_a) - metric_fn(gold, pred_b)`` over test examples.

    Args:
        metric_fn: ``(gold, pred) -> float`` on lists of per-example answers (e.g. seqeval's f1_score).
        gold: per-example gold answers.
        pred_a: model A's predictions, aligned with ``gold``.
        pred_b: model B's predictions, aligned with ``gold``.
        n_samples: bootstrap draws.
        confidence: interval level (0.95 -> 2.5th and 97.5th percentiles).
        seed: seed of the draws.

    Returns:
        ``diff`` (on the full test set), ``low``/``high`` (percentile interval), ``p_value`` (two-sided),
        ``significant``, ``verdict`` ("A better", "B better" or "no significant difference"), ``confidence``.
    """
    gold, pred_a, pred_b = list(gold), list(pred_a), list(pred_b)
    if not (len(gold) == len(pred_a) == len(pred_b)):
        raise ValueError("gold and predictions must have the same length")
    point = metric_fn(gold, pred_a) - metric_fn(gold, pred_b)
    draws = bootstrap_indices(len(gold), n_samples, seed)
    diffs = np.empty(n_samples)
    for k, idx in enumerate(draws):
        g = [gold[i] for i in idx]
        diffs[k] = metric_fn(g, [pred_a[i] for i in idx]) - metric_fn(g, [pred_b[i] for i in idx])
    return _interval(diffs, point, confidence)


# ---- per-example counts: metrics that are sums over examples ------------------------------------------------

def _ner_counts(gold: list[list[str]], pred: list[list[str]]) -> np.ndarray:
    """Per sentence: [true positives, predicted entities, gold entities] under seqeval strict IOB2."""
    from seqeval.scheme import IOB2, Entities

    out = np.zeros((len(gold), 3))
    for i, (g, p) in enumerate(zip(gold, pred, strict=True)):
        eg = set(Entities([g], IOB2).entities[0])
        ep = set(Entities([p], IOB2).entities[0])
        out[i] = (len(eg & ep), len(ep), len(eg))
    return out


def _f1_from(tp: np.ndarray, n_pred: np.ndarray, n_true: np.ndarray) -> np.ndarray:
    denom = n_pred + n_true
    return np.divide(2 * tp, denom, out=np.zeros_like(tp, dtype=float), where=denom > 0)


def _class_counts(gold: list[Any], pred: list[Any], labels: list[str], multi_label: bool) -> np.ndarray:
    """Per example and label: [tp, fp, fn] flattened to 3*L columns."""
    index = {label: j for j, label in enumerate(labels)}
    out = np.zeros((len(gold), 3, len(labels)))
    for i, (g, p) in enumerate(zip(gold, pred, strict=True)):
        gs = set(g) if multi_label else {g}
        ps = set(p) if multi_label else {p}
        for label in gs & ps:
            out[i, 0, index[label]] += 1
        for label in ps - gs:
            out[i, 1, index[label]] += 1
        for label in gs - ps:
            out[i, 2, index[label]] += 1
    return out.reshape(len(gold), -1)


def count_metric(task_type: str, metric: str, gold: list[Any], pred: list[Any], labels: list[str] | None = None,
                 multi_label: bool = False) -> tuple[np.ndarray, Callable[[np.ndarray], np.ndarray]]:
    """Per-example count matrix ``[n, k]`` and a function from summed counts ``[..., k]`` to the metric.

    Supported: NER ``f1`` (micro, strict IOB2); classification ``accuracy``, ``macro_f1`` (single-label:
    over labels present in gold or predictions, as scikit-learn; multi-label: over all labels) and
    ``micro_f1``.
    """
    if task_type == "ner":
        if metric != "f1":
            raise ValueError(f"bootstrap of NER metric {metric!r} is not supported (use 'f1')")
        return _ner_counts(gold, pred), lambda s: _f1_from(s[..., 0], s[..., 1], s[..., 2])
    if metric == "accuracy":
        same = [float((sorted(g) if multi_label else g) == (sorted(p) if multi_label else p)) for g, p in zip(gold, pred, strict=True)]
        return np.asarray(same)[:, None], lambda s: s[..., 0] / len(gold)
    if labels is None:
        seen = {x for rows in (gold, pred) for r in rows for x in (r if multi_label else [r])}
        labels = sorted(seen)
    counts = _class_counts(gold, pred, labels, multi_label)
    L = len(labels)

    def per_label(s: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        s = s.reshape(s.shape[:-1] + (3, L))
        return s[..., 0, :], s[..., 1, :], s[..., 2, :]

    if metric == "micro_f1":
        def micro(s: np.ndarray) -> np.ndarray:
            tp, fp, fn = per_label(s)
            return _f1_from(tp.sum(-1), (tp + fp).sum(-1), (tp + fn).sum(-1))
        return counts, micro
    if metric == "macro_f1":
        def macro(s: np.ndarray) -> np.ndarray:
            tp, fp, fn = per_label(s)
            f1 = _f1_from(tp, tp + fp, tp + fn)
            if multi_label:
                return f1.mean(-1)
            present = (tp + fp + fn) > 0  # scikit-learn's default labels: those in gold or predictions
            return np.where(present, f1, 0).sum(-1) / np.maximum(present.sum(-1), 1)
        return counts, macro
    raise ValueError(f"bootstrap of classification metric {metric!r} is not supported")


def compare_models(results_a: list[dict[str, Any]], results_b: list[dict[str, Any]], n_samples: int = 1000,
                   confidence: float = 0.95, seed: int = 0, metric: str | None = None) -> dict[str, Any]:
    """Compare two models on one task from their ``result.json`` dicts (one per seed).

    Seeds are paired by their ``seed`` value (only seeds both models have are used); each bootstrap draw
    resamples test example indices once and applies them to every seed of both models; the statistic is
    the mean over seeds of (A - B). See the module docstring for details.

    Args:
        results_a: model A's results for one task (several seeds).
        results_b: model B's results for the same task.
        n_samples: bootstrap draws.
        confidence: interval level.
        seed: seed of the draws.
        metric: the metric to compare; defaults to the results' ``primary_metric``.

    Returns:
        ``model_a``, ``model_b``, ``task``, ``metric``, ``seeds``, ``n_examples``, ``n_samples``,
        ``a``/``b`` (``mean_std`` of the per-seed test metric), ``per_seed`` ([seed, a, b]),
        ``diff`` (mean over seeds of A - B on the full test set), ``low``, ``high``, ``p_value``,
        ``significant``, ``verdict``, ``confidence`` and ``resampled`` (a sentence saying what was resampled).

    Raises:
        ValueError: no common seed, different tasks, or different test sets.
    """
    by_a = {r["seed"]: r for r in results_a}
    by_b = {r["seed"]: r for r in results_b}
    seeds = sorted(set(by_a) & set(by_b))
    if not seeds:
        raise ValueError("the two models share no seed")
    first = by_a[seeds[0]]
    tasks = {r["task"] for r in list(by_a.values()) + list(by_b.values())}
    if len(tasks) != 1:
        raise ValueError(f"results of different tasks: {sorted(tasks)}")
    gold = first["gold"]
    for r in [by_a[s] for s in seeds] + [by_b[s] for s in seeds]:
        if r["gold"] != gold:
            raise ValueError(f"{r['model']} seed {r['seed']} was tested on different gold answers")
    metric = metric or first.get("primary_metric") or ("f1" if first["task_type"] == "ner" else "macro_f1")
    multi = bool(first.get("multi_label", False))
    labels = None
    if first["task_type"] != "ner":
        seen = {x for r in [by_a[s] for s in seeds] + [by_b[s] for s in seeds] for rows in (r["gold"], r["pred"])
                for row in rows for x in (row if multi else [row])}
        labels = sorted(seen)
    draws = bootstrap_indices(len(gold), n_samples, seed)
    weights = np.zeros((n_samples, len(gold)))
    np.add.at(weights, (np.arange(n_samples)[:, None], draws), 1.0)
    diffs = np.zeros(n_samples)
    point = 0.0
    per_seed = []
    for s in seeds:
        scores = []
        for r in (by_a[s], by_b[s]):
            counts, fn = count_metric(first["task_type"], metric, gold, r["pred"], labels, multi)
            scores.append((float(fn(counts.sum(0))), fn(weights @ counts)))
        diffs += (scores[0][1] - scores[1][1]) / len(seeds)
        point += (scores[0][0] - scores[1][0]) / len(seeds)
        per_seed.append([s, scores[0][0], scores[1][0]])
    out = _interval(diffs, point, confidence)
    if out["significant"]:
        out["verdict"] = f"{first['model'] if point > 0 else by_b[seeds[0]]['model']} better"
    return {"model_a": first["model"], "model_b": by_b[seeds[0]]["model"], "task": first["task"], "metric": metric,
            "seeds": seeds, "n_examples": len(gold), "n_samples": n_samples,
            "a": mean_std([x[1] for x in per_seed]), "b": mean_std([x[2] for x in per_seed]), "per_seed": per_seed,
            "resampled": (f"test examples ({len(gold)}), drawn with replacement {n_samples} times; the same draws for "
                          f"both models and all {len(seeds)} paired seeds; statistic = mean over seeds of A - B"),
            **out}
