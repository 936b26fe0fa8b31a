"""MLM perplexity on fixed held-out text: the before/after figures of every arm and of the head warm-up.

The domain set is the first ``pretrain.eval_documents`` documents of the corpus's validation split; the
general set (forgetting) comes from ``pretrain.general_eval_corpus``. Masks are drawn from a generator seeded
apart from training's, so every evaluation of a run (step 0, every ``pretrain.eval_every`` steps, the end)
masks the same tokens, and evaluating draws nothing from the training RNG. The curve between them
(``watch_sets``) evaluates the first rows of the same sets at ``pretrain.watch_points`` steps, sized to a share
of training's compute. ``unigram_bar`` is the bar a perplexity is read against: the domain set under a model
that knows only how often each token occurs in the training split. This module does not train.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from domainbert.config.pretrain import PretrainConfig
from domainbert.core.paths import RunLayout
from domainbert.pretrain.data import Batch, pack_texts, read_jsonl_texts
from domainbert.pretrain.engine import Engine, objective_of
from domainbert.pretrain.masking import MaskingSpec, apply_mask, step_generator
from domainbert.pretrain.token_store import ensure_token_store

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

EVAL_BATCH = 16
EVAL_SEED_OFFSET = 7919  # evaluation masks differ from training masks but are equal before and after


def masking_spec(pcfg: PretrainConfig, tokenizer: PreTrainedTokenizerBase) -> MaskingSpec:
    return MaskingSpec(
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=len(tokenizer),
        rate=pcfg.mask_rate,
        mask_token_prob=pcfg.mask_token_prob,
        random_token_prob=pcfg.random_token_prob,
        whole_word=pcfg.whole_word_mask,
    )


def validation_texts(layout: RunLayout, limit: int) -> list[str]:
    from domainbert.corpus.store import iter_texts

    texts = []
    for text in iter_texts(Path(layout.corpus), "validation"):
        texts.append(text)
        if len(texts) >= limit:
            break
    return texts


def eval_sets(
    tokenizer: PreTrainedTokenizerBase, layout: RunLayout, pcfg: PretrainConfig, seq_len: int
) -> dict[str, Batch | None]:
    """``domain`` (the corpus's validation split) and, when configured, ``general``, packed at ``seq_len``."""
    sets = {"domain": pack_texts(tokenizer, validation_texts(layout, pcfg.eval_documents), seq_len)}
    if pcfg.general_eval_corpus:
        sets["general"] = pack_texts(
            tokenizer, read_jsonl_texts(pcfg.general_eval_corpus, pcfg.eval_documents), seq_len
        )
    return sets


@torch.no_grad()
def evaluate(
    engine: Engine, batch: Batch | None, spec: MaskingSpec, seed: int, device: torch.device
) -> dict[str, float | None]:
    """MLM perplexity (exp of the mean loss over masked tokens) on fixed, identically masked sequences, as
    ``{"perplexity": ...}``; under replaced-token detection the generator's perplexity, the discriminator's
    share of correct replaced/original calls (``discriminator_accuracy``) and that of calling every token
    original (``discriminator_floor_accuracy``)."""
    if batch is None:
        return {"perplexity": None}
    objective = objective_of(engine)
    engine.module.eval()
    total, count, correct, positions, replaced = 0.0, 0, 0.0, 0, 0.0
    for i in range(0, batch.input_ids.shape[0], EVAL_BATCH):
        sl = slice(i, i + EVAL_BATCH)
        gen = step_generator(seed + EVAL_SEED_OFFSET, i)
        inputs, labels = apply_mask(batch.input_ids[sl], batch.special[sl], batch.word_start[sl], spec, gen)
        attention = batch.attention_mask[sl].to(device) if batch.attention_mask is not None else None
        n = int((labels != -100).sum())
        loss = engine.forward(inputs.to(device), labels.to(device), attention)
        detection = getattr(objective, "last_detection", None)
        if detection is not None:
            loss = detection.generator_loss
            correct, positions = correct + float(detection.correct), positions + detection.positions
            replaced += float(detection.replaced)
        total += float(loss) * n
        count += n
    engine.module.train()
    # No masked token (a tiny evaluation set) measures nothing: None, never exp(0) = 1 or a NaN.
    figures: dict[str, float | None] = {"perplexity": math.exp(min(total / count, 50.0)) if count else None}
    if positions:
        figures["discriminator_accuracy"] = correct / positions
        figures["discriminator_floor_accuracy"] = 1 - replaced / positions  # calling every token original
    return figures


def perplexity_change(before: float | None, after: float | None) -> str:
    """``"12.3 -> 9.8"`` for a log line, or why there is no figure: a set too small to measure."""
    if before is None or after is None or math.isnan(before) or math.isnan(after):
        return "too few tokens to measure"
    return f"{before:.1f} -> {after:.1f}"


def evaluate_all(
    engine: Engine, sets: dict[str, Batch | None], spec: MaskingSpec, seed: int, device: torch.device
) -> dict[str, float | None]:
    """``{set: perplexity}`` for every set, and ``{set}_discriminator_accuracy`` under replaced-token detection."""
    out: dict[str, float | None] = {}
    for name, batch in sets.items():
        figures = evaluate(engine, batch, spec, seed, device)
        out[name] = figures.pop("perplexity")
        out.update({f"{name}_{key}": value for key, value in figures.items()})
    return out


MIN_WATCH_ROWS = 4  # fewer sequences than this make a curve of noise: no watch evaluations then


def watch_sets(
    sets: dict[str, Batch | None], points: int, share: float, train_tokens: int
) -> dict[str, Batch | None] | None:
    """The first rows of each held-out set for the curve's ``points`` evaluations, as many as keep their
    forward passes under ``share`` of training's (a training token costs about three forward-pass tokens:
    forward and backward); None when that leaves fewer than ``MIN_WATCH_ROWS`` rows or no points are asked."""
    present = {name: batch for name, batch in sets.items() if batch is not None}
    if points < 2 or not present:
        return None
    seq_len = max(batch.input_ids.shape[1] for batch in present.values())
    rows = int(share * 3 * train_tokens / (points * len(present) * seq_len))
    if rows < MIN_WATCH_ROWS:
        return None
    return {name: _first_rows(batch, rows) if batch is not None else None for name, batch in sets.items()}


def watch_steps(points: int, total_steps: int) -> set[int]:
    """Steps of the curve's points between the first (step 0) and the last (the end), evenly spaced."""
    return {round(i * total_steps / (points - 1)) for i in range(1, points - 1)} - {0, total_steps}


def _first_rows(batch: Batch, rows: int) -> Batch:
    def cut(t: torch.Tensor | None) -> torch.Tensor | None:
        return None if t is None else t[:rows]

    kept = batch.input_ids[:rows]
    real = int(batch.attention_mask[:rows].sum()) if batch.attention_mask is not None else int(kept.numel())
    return Batch(
        input_ids=kept,
        special=batch.special[:rows],
        word_start=batch.word_start[:rows],
        attention_mask=cut(batch.attention_mask),
        real_tokens=real,
        token_type_ids=cut(batch.token_type_ids),
        next_sentence_label=cut(batch.next_sentence_label),
    )


COUNT_CHUNK = 1 << 24  # stored ids counted this many at a time: a billion-token split is not widened at once


def unigram_perplexity(counts: np.ndarray, held_out: np.ndarray) -> float:
    """exp of the mean negative log-probability of the ``held_out`` token ids under the unigram model of
    ``counts`` (one count per vocabulary entry), add-one smoothed over the vocabulary."""
    probs = (counts + 1.0) / (float(counts.sum()) + len(counts))
    return float(np.exp(-np.log(probs[held_out]).mean()))


def unigram_bar(tokenizer: PreTrainedTokenizerBase, corpus_dir: Path, domain: Batch | None) -> float | None:
    """The domain set's perplexity under a unigram model of the corpus's training split, both read with the
    arm's tokenizer: what an encoder that has learnt token frequencies and nothing else scores (masked positions
    are drawn uniformly over the real tokens, so it is the expected perplexity of a unigram guess there). None
    without a domain set or stored token ids (a slow tokenizer)."""
    if domain is None:
        return None
    store = ensure_token_store(tokenizer, corpus_dir, "train")
    if store is None:
        return None
    counts = np.zeros(len(tokenizer), dtype=np.int64)
    for start in range(0, len(store.ids), COUNT_CHUNK):
        counts += np.bincount(np.asarray(store.ids[start : start + COUNT_CHUNK]), minlength=len(counts))
    real = ~domain.special if domain.attention_mask is None else ~domain.special & domain.attention_mask.bool()
    return unigram_perplexity(counts, domain.input_ids[real].numpy())
