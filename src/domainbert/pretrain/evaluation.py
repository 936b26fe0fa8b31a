"""MLM perplexity on fixed held-out text: the before/after figures of every arm and of the head warm-up.

The domain set is the first ``pretrain.eval_documents`` documents of the corpus's validation split; the
general set (forgetting) comes from ``pretrain.general_eval_corpus``. Masks are drawn from a generator seeded
apart from training's, so every evaluation of a run (step 0, every ``pretrain.eval_every`` steps, the end)
masks the same tokens, and evaluating draws nothing from the training RNG. This module does not train.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from domainbert.config.pretrain import PretrainConfig
from domainbert.core.paths import RunLayout
from domainbert.pretrain.data import Batch, pack_texts, read_jsonl_texts
from domainbert.pretrain.engine import Engine
from domainbert.pretrain.masking import MaskingSpec, apply_mask, step_generator

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
def evaluate(engine: Engine, batch: Batch | None, spec: MaskingSpec, seed: int, device: torch.device) -> float | None:
    """MLM perplexity (exp of the mean loss over masked tokens) on fixed, identically masked sequences."""
    if batch is None:
        return None
    engine.module.eval()
    total, count = 0.0, 0
    for i in range(0, batch.input_ids.shape[0], EVAL_BATCH):
        sl = slice(i, i + EVAL_BATCH)
        gen = step_generator(seed + EVAL_SEED_OFFSET, i)
        inputs, labels = apply_mask(batch.input_ids[sl], batch.special[sl], batch.word_start[sl], spec, gen)
        n = int((labels != -100).sum())
        loss = engine.forward(inputs.to(device), labels.to(device))
        total += float(loss) * n
        count += n
    engine.module.train()
    return math.exp(min(total / max(count, 1), 50.0))


def evaluate_all(
    engine: Engine, sets: dict[str, Batch | None], spec: MaskingSpec, seed: int, device: torch.device
) -> dict[str, float | None]:
    return {name: evaluate(engine, batch, spec, seed, device) for name, batch in sets.items()}
