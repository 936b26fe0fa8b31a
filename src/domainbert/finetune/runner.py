"""One fine-tuning run in memory: load model and tokenizer, encode the task, train, score validation and test.

``run_finetune`` is what ``stage.finetune_one`` wraps with artifacts and skip-if-done; it writes nothing but
the fine-tuned model, when asked to (``save_to``). The test split is evaluated exactly once, after training,
with the weights that scored best on validation. With several processes (``parallel.py``) every rank trains,
rank 0 alone scores, predicts and saves, and every rank returns rank 0's output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from domainbert.core.distributed import dist_info, resolve_device
from domainbert.core.errors import ModelError
from domainbert.core.models import embedding_rows, load_tokenizer, loading, quiet_transformers, resolve_model_ref
from domainbert.finetune.batching import predict_logits
from domainbert.finetune.classification import classification_metrics, decode_classification, encode_classification
from domainbert.finetune.collapse import chance_score, diagnose
from domainbert.finetune.ner import decode_ner, encode_ner, ner_metrics
from domainbert.finetune.parallel import broadcast
from domainbert.finetune.pooling import MeanPoolClassifier, head_pooler
from domainbert.finetune.trainer import TrainSettings, fit
from domainbert.task_data.splits import TaskData

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

logger = logging.getLogger(__name__)

PRIMARY = {"ner": "f1", "classification": "macro_f1"}


def load_task_model(ref: str, data: TaskData, pooling: str = "cls") -> PreTrainedModel | MeanPoolClassifier:
    """A token- or sequence-classification model with a new head sized for the task's labels; a sequence
    classifier pools the encoder's states by their mean (``pooling.MeanPoolClassifier``) or, with
    ``pooling="cls"``, is transformers' own (the [CLS] state through the checkpoint's pooler)."""
    from transformers import AutoModel, AutoModelForSequenceClassification, AutoModelForTokenClassification

    cfg = data.config
    resolved = resolve_model_ref(ref)
    labels = data.label_list
    if cfg.type == "classification" and pooling == "mean":
        with quiet_transformers(), loading(resolved, f"model for {cfg.type}"):  # an MLM head is not used here
            return MeanPoolClassifier(AutoModel.from_pretrained(resolved), len(labels), cfg.multi_label)
    kwargs: dict[str, Any] = {
        "num_labels": len(labels),
        "id2label": dict(enumerate(labels)),
        "label2id": {label: i for i, label in enumerate(labels)},
    }
    if cfg.type == "classification":
        kwargs["problem_type"] = "multi_label_classification" if cfg.multi_label else "single_label_classification"
    cls = AutoModelForTokenClassification if cfg.type == "ner" else AutoModelForSequenceClassification
    with quiet_transformers(), loading(resolved, f"model for {cfg.type}"):  # a new head, for every base
        return fresh_pooler(cls.from_pretrained(resolved, **kwargs))


def fresh_pooler(model: PreTrainedModel) -> PreTrainedModel:
    """``model`` with its encoder's pooler (BERT's dense + tanh over [CLS]) initialised anew, from the seed set
    before loading: a checkpoint saved with a trained pooler (BERT's NSP pooler, a sentence-embedding model's)
    would otherwise start with a head the other models of the comparison lack. Models whose classification
    head holds its own dense layer (RoBERTa, DeBERTa, ELECTRA) already start it fresh."""
    pooler = head_pooler(model)
    if pooler is None:
        return model
    std = getattr(model.config, "initializer_range", 0.02)
    with torch.no_grad():  # torch's own init: transformers' skips weights it loaded from the checkpoint
        for layer in pooler.modules():
            if isinstance(layer, torch.nn.Linear):
                torch.nn.init.normal_(layer.weight, std=std)
                if layer.bias is not None:
                    torch.nn.init.zeros_(layer.bias)
    return model


def _load_tokenizer(ref: str, data: TaskData) -> PreTrainedTokenizerBase:
    tok = load_tokenizer(ref)
    if data.config.type == "ner" and not getattr(tok, "is_fast", False):
        raise ModelError("NER needs a fast tokenizer (word_ids); this folder has only a slow one", file=ref)
    if data.config.type == "ner" and getattr(tok, "add_prefix_space", None) is False:
        # Byte-level BPE tokenizers (RoBERTa, GPT-2) need a prefix space for pre-split words.
        from transformers import AutoTokenizer

        tok = AutoTokenizer.from_pretrained(resolve_model_ref(ref), add_prefix_space=True)
    if tok.pad_token_id is None:
        raise ModelError("tokenizer has no padding token", file=ref)
    return tok


def _lengths(data: TaskData, split: str) -> list[int]:
    """Tokenizer-independent lengths (words), so that batches are the same for every model."""
    if data.config.type == "ner":
        return [len(ex.tokens) for ex in data.splits[split]]
    return [len(ex.text.split()) + len((ex.text_pair or "").split()) for ex in data.splits[split]]


def _encode(data: TaskData, split: str, tok: Any, max_length: int) -> list[dict[str, Any]]:
    label2id = {label: i for i, label in enumerate(data.label_list)}
    if data.config.type == "ner":
        return encode_ner(data.splits[split], tok, label2id, max_length)
    config = data.config
    return encode_classification(data.splits[split], tok, label2id, max_length, config.multi_label, config.chunks)


def gold_of(data: TaskData, split: str) -> list[Any]:
    """Gold answers as stored in result.json: tag lists (NER), a label or a label list (classification)."""
    if data.config.type == "ner":
        return [list(ex.tags) for ex in data.splits[split]]
    if data.config.multi_label:
        return [sorted(ex.labels) for ex in data.splits[split]]
    return [ex.labels[0] for ex in data.splits[split]]


def score(data: TaskData, gold: list[Any], pred: list[Any]) -> dict[str, Any]:
    """The task's metrics on aligned gold and predicted answers."""
    if data.config.type == "ner":
        return ner_metrics(gold, pred)
    return classification_metrics(gold, pred, data.label_list, data.config.multi_label)


def predict(
    model: Any,
    data: TaskData,
    split: str,
    features: list[dict[str, Any]],
    batch_size: int,
    pad_id: int,
    dtype: Any = None,
    repairs: list[int] | None = None,
    inference_mode: bool = True,
    length_sorted: bool = True,
) -> list[Any]:
    """The model's answers on ``split`` (NER: each ill-formed ``I-X`` repaired, counted in ``repairs``);
    ``inference_mode`` and ``length_sorted`` as ``batching.predict_logits`` takes them."""
    logits = predict_logits(
        model, features, batch_size, pad_id, dtype, inference_mode=inference_mode, length_sorted=length_sorted
    )
    if data.config.type == "ner":
        return decode_ner(logits, features, data.splits[split], data.label_list, repairs)
    pred = decode_classification(np.stack(logits), data.label_list, data.config.multi_label)
    return [sorted(p) for p in pred] if data.config.multi_label else pred


def _load_pair(
    model_ref: str, data: TaskData, seed: int, pooling: str
) -> tuple[PreTrainedModel | MeanPoolClassifier, PreTrainedTokenizerBase]:
    """The task model (a head seeded by ``seed`` alone) and its tokenizer, checked to fit together."""
    if Path(str(model_ref)).is_dir() or model_ref.startswith("package:"):
        resolve_model_ref(model_ref)  # a folder without config.json -> ModelError naming it
    tok = _load_tokenizer(model_ref, data)
    torch.manual_seed(seed)  # the head's initialisation depends on the seed only
    model = load_task_model(model_ref, data, pooling)
    emb = embedding_rows(model)
    if len(tok) > emb:
        raise ModelError(
            f"tokenizer has {len(tok)} tokens but the model only {emb} embeddings", file=resolve_model_ref(model_ref)
        )
    return model, tok


def prepare_run(
    data: TaskData, model_ref: str, seed: int, pooling: str, max_length: int
) -> tuple[PreTrainedModel | MeanPoolClassifier, PreTrainedTokenizerBase, dict[str, list[dict[str, Any]]]]:
    """What a run does before its first step: the task model, its tokenizer and every split encoded (``plan``
    times this same call as a run's fixed cost)."""
    model, tok = _load_pair(model_ref, data, seed, pooling)
    if data.config.chunks > 1 and isinstance(model, MeanPoolClassifier):
        model.chunk_length = max_length  # every window of a long text encoded on its own, all pooled
    return model, tok, {split: _encode(data, split, tok, max_length) for split in ("train", "validation", "test")}


def timed_short_run(
    data: TaskData,
    model_ref: str,
    settings: TrainSettings,
    max_length: int,
    pooling: str,
    sample: tuple[int, int],
    clock: Any,
    loading: Any = None,
) -> tuple[float, float, float]:
    """A run of ``data`` cut short, timed with this module's own code (``plan``'s fine-tuning estimate): seconds
    to prepare (``prepare_run``: the whole task encoded), then per example to train (one epoch of ``fit`` on
    ``sample[0]`` training examples drawn at random: their real lengths, padding and loop) and to score
    (``predict`` and the task's metrics on ``sample[1]`` validation examples, decoding included). ``loading``: a
    context the load runs in, timed inside it (a lock: transformers loads a model under a device context that
    is the whole process's, so two loads in threads at once left later tensors on the meta device)."""
    import random

    with loading or contextlib.nullcontext():
        t0 = clock()
        model, tok, feats = prepare_run(data, model_ref, settings.seed, pooling, max_length)
        t1 = clock()
    rng, pad_id = random.Random(settings.seed), int(tok.pad_token_id)
    picked = sorted(rng.sample(range(len(feats["train"])), min(sample[0], len(feats["train"]))))
    lengths = _lengths(data, "train")
    primary = PRIMARY[data.config.type]
    short = dataclasses.replace(settings, epochs=1, evals_per_epoch=1, min_steps=0)  # one pass of the sample
    fit(
        model,
        [feats["train"][i] for i in picked],
        [lengths[i] for i in picked],
        lambda: {primary: 0.0},
        primary,
        short,
        pad_id,
    )
    t2 = clock()
    held = sorted(rng.sample(range(len(feats["validation"])), min(sample[1], len(feats["validation"]))))
    part = dataclasses.replace(
        data, splits={**data.splits, "validation": [data.splits["validation"][i] for i in held]}
    )
    _, dtype = resolve_device(settings.device, settings.precision)
    pred = predict(
        model,
        part,
        "validation",
        [feats["validation"][i] for i in held],
        settings.eval_batch_size,
        pad_id,
        dtype,
        None,
        *eval_levers(settings),
    )
    score(part, gold_of(part, "validation"), pred)
    t3 = clock()
    return t1 - t0, (t2 - t1) / max(1, len(picked)), (t3 - t2) / max(1, len(held))


def cut_by_window(feats: dict[str, list[dict[str, Any]]], max_length: int, chunks: int) -> dict[str, Any]:
    """How many examples of each split the encoder's window left part of unread (``max_length`` sub-tokens,
    ``chunks`` windows of them), as the features say; a split whose features do not say (text pairs) is None."""
    counts = {
        split: sum(bool(f["cut"]) for f in rows) if rows and all("cut" in f for f in rows) else None
        for split, rows in feats.items()
    }
    return {"max_length": max_length, "chunks": chunks, **counts}


def _score_test(
    out: dict[str, Any],
    data: TaskData,
    model: torch.nn.Module,
    test: tuple[list[dict[str, Any]], int, int, Any],
    validation: tuple[list[Any], list[Any]],
    levers: tuple[bool, bool] = (True, True),
) -> None:
    """The test split predicted (``test``: its features, the batch size, the pad id, the dtype) and scored: its
    metrics, the answers, both collapse diagnoses, the parameter counts and, for NER, the count of predicted
    ``I-X`` tags repaired (``predicted_repairs``: summed per task by ``ner.repair_lines``), into ``out``;
    ``levers``: ``predict``'s switches (``eval_levers``)."""
    repairs = [0]
    gold, pred = (
        gold_of(data, "test"),
        predict(model, data, "test", *test, repairs, inference_mode=levers[0], length_sorted=levers[1]),
    )
    if data.config.type == "ner":
        out["predicted_repairs"] = repairs[0]
    out["test"] = score(data, gold, pred)
    out["gold"], out["pred"] = gold, pred
    kind, multi, losses = data.config.type, data.config.multi_label, (out["loss_start"], out["loss_end"])
    out["collapse"] = diagnose(kind, gold, pred, *losses, multi_label=multi)
    out["collapse_validation"] = diagnose(kind, *validation, *losses, multi_label=multi)
    # the level a run at chance does not pass on validation: the recipe search reads it (report/failures.py)
    out["chance_validation"] = chance_score(kind, validation[0], PRIMARY[kind], multi)
    out["num_parameters"] = sum(p.numel() for p in model.parameters())
    out["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)


def eval_levers(settings: TrainSettings) -> tuple[bool, bool]:
    """The prediction switches of ``settings`` (``finetune.eval_inference_mode``, ``finetune.eval_length_sorted``),
    in the order ``predict`` takes them."""
    return settings.eval_inference_mode, settings.eval_length_sorted


def _with_class_weights(settings: TrainSettings, data: TaskData, train: list[dict[str, Any]]) -> TrainSettings:
    """``settings`` with the loss's class weights of the training features where the task asks for balanced
    ones; as they were otherwise."""
    if data.config.class_weights != "balanced":
        return settings
    from domainbert.finetune.class_weights import balanced_weights

    weights = balanced_weights(train, len(data.label_list))
    return dataclasses.replace(settings, class_weights=weights)


def run_finetune(
    data: TaskData,
    model_ref: str,
    settings: TrainSettings,
    max_length: int,
    pooling: str = "cls",
    save_to: Path | None = None,
) -> dict[str, Any]:
    """Fine-tune ``model_ref`` on ``data`` and score it.

    Args:
        data: the loaded task (``tasks.load_task``).
        model_ref: a model reference (``domainbert.core.models.resolve_model_ref``).
        settings: loop settings (seed included).
        max_length: sub-token truncation length.
        pooling: ``mean`` or ``cls`` (sequence classification only; see ``load_task_model``).
        save_to: a folder to save the fine-tuned model and its tokenizer in (``export.save_task_model``;
            replaced if it exists); None: nothing is saved.

    Returns:
        ``validation`` (metrics of the kept weights), ``test`` (metrics), ``gold``/``pred`` (test answers),
        ``collapse`` and ``collapse_validation`` (``collapse.diagnose`` of the test and validation predictions),
        ``chance_validation`` (``collapse.chance_score`` on validation),
        ``history``, ``best_step``, ``steps``, ``stopped_early``, ``train_seconds``, ``train_examples``,
        ``examples_per_s``, ``num_parameters``, ``trainable_parameters``, ``cut_by_window`` (``cut_by_window``).

    Raises:
        ModelError: the model or its tokenizer cannot be loaded or do not fit together.
    """
    model, tok, feats = prepare_run(data, model_ref, settings.seed, pooling, max_length)
    settings = _with_class_weights(settings, data, feats["train"])
    pad_id = int(tok.pad_token_id)
    primary = PRIMARY[data.config.type]
    val_gold = gold_of(data, "validation")
    val_preds: list[list[Any]] = []  # every evaluation's predictions: the kept weights' are reused below
    _, dtype = resolve_device(settings.device, settings.precision)  # fit places the model
    levers = eval_levers(settings)

    def evaluate() -> dict[str, Any]:
        val_preds.append(
            predict(
                model, data, "validation", feats["validation"], settings.eval_batch_size, pad_id, dtype, None, *levers
            )
        )
        return score(data, val_gold, val_preds[-1])

    out = fit(model, feats["train"], _lengths(data, "train"), evaluate, primary, settings, pad_id)
    out["cut_by_window"] = cut_by_window(feats, max_length, data.config.chunks)
    rank, world = dist_info()
    if rank > 0:
        return broadcast(None)
    # The kept weights are those of the best evaluation, so its validation predictions are theirs.
    val_pred = val_preds[[entry["step"] for entry in out["history"]].index(out["best_step"])]
    out["validation"] = out.pop("best")
    _score_test(
        out, data, model, (feats["test"], settings.eval_batch_size, pad_id, dtype), (val_gold, val_pred), levers
    )
    logger.info("test %s %.4f", primary, out["test"][primary])
    if save_to is not None:
        from domainbert.finetune.export import save_task_model

        save_task_model(model, tok, data, save_to)
    return broadcast(out) if world > 1 else out
