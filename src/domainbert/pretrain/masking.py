"""Dynamic MLM masking: token-level or whole-word, chosen afresh for every batch.

Word boundaries come from a per-token ``word_start`` flag that ``data.py`` derives from the fast tokenizer's
``word_ids()`` (not from ``##`` prefixes), so whole-word masking works for WordPiece, SentencePiece and BPE
tokenizers alike. Special tokens ([CLS], [SEP], [PAD]) are never selected. Selected tokens are replaced
80/10/10 (configurable) by [MASK], a random token, or left unchanged, as in BERT.
The masking draws from an explicit ``torch.Generator`` so that a batch's mask depends only on (seed, step):
a resumed run masks exactly as an uninterrupted one. This module does not build batches.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

IGNORE_INDEX = -100


@dataclass(frozen=True)
class MaskingSpec:
    """What the masker needs to know about the tokenizer and objective."""

    mask_token_id: int
    vocab_size: int
    rate: float = 0.15
    mask_token_prob: float = 0.8
    random_token_prob: float = 0.1
    whole_word: bool = False


def select_positions(
    special: torch.Tensor, word_start: torch.Tensor, rate: float, whole_word: bool, generator: torch.Generator
) -> torch.Tensor:
    """Boolean mask of the positions to predict.

    Args:
        special: bool (batch, len), True where a token must never be masked.
        word_start: bool (batch, len), True where a token begins a word (ignored unless ``whole_word``).
        rate: share of the (non-special) tokens to select, in expectation.
        whole_word: select whole words: every token of a chosen word is selected together.
        generator: the random source.
    """
    if not whole_word:
        draw = torch.rand(special.shape, generator=generator)
        return (draw < rate) & ~special
    # Word index per token: a running count of word starts (special tokens always start their own word).
    starts = word_start | special
    word_index = torch.cumsum(starts.to(torch.int64), dim=1) - 1
    n_words = int(word_index.max().item()) + 1 if word_index.numel() else 0
    draw = torch.rand((special.shape[0], max(n_words, 1)), generator=generator)
    chosen_word = draw < rate
    chosen = torch.gather(chosen_word, 1, word_index.clamp(min=0))
    return chosen & ~special


def apply_mask(
    input_ids: torch.Tensor,
    special: torch.Tensor,
    word_start: torch.Tensor,
    spec: MaskingSpec,
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask a batch; returns (inputs, labels) with labels IGNORE_INDEX where nothing is predicted.

    At least one position per batch is selected, so a tiny batch never yields an empty loss.
    """
    selected = select_positions(special, word_start, spec.rate, spec.whole_word, generator)
    if not bool(selected.any()):
        candidates = (~special).nonzero()
        if len(candidates):
            pick = candidates[torch.randint(len(candidates), (1,), generator=generator)][0]
            selected[pick[0], pick[1]] = True
    labels = torch.where(selected, input_ids, IGNORE_INDEX)
    action = torch.rand(input_ids.shape, generator=generator)
    to_mask = selected & (action < spec.mask_token_prob)
    to_random = selected & (action >= spec.mask_token_prob) & (action < spec.mask_token_prob + spec.random_token_prob)
    random_ids = torch.randint(spec.vocab_size, input_ids.shape, generator=generator, dtype=input_ids.dtype)
    # Element-wise selects rather than boolean-index writes: the same values, without gathering the indices.
    inputs = torch.where(to_mask, spec.mask_token_id, torch.where(to_random, random_ids, input_ids))
    return inputs, labels


def host_positions(labels: torch.Tensor, attention_mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The flat positions a training forward gathers, found where the batch is built (on the host): the masked
    ones (``masked_positions``) and, with padding, the real ones (``real_positions``), in row-major order as a
    boolean mask would take them. The objective gathers with them (``objective.gather``) instead of indexing by a
    boolean mask on the device, whose data-dependent size makes the host wait for the GPU."""
    found = {"masked_positions": torch.nonzero(labels.flatten() != IGNORE_INDEX).squeeze(1)}
    if attention_mask is not None:
        found["real_positions"] = torch.nonzero(attention_mask.flatten()).squeeze(1)
    return found


def step_generator(seed: int, step: int, micro: int = 0, rank: int = 0) -> torch.Generator:
    """A generator seeded by (seed, step, micro-step, rank): masks are reproducible without saved state."""
    g = torch.Generator()
    g.manual_seed((seed * 1_000_003 + step * 10_007 + micro * 101 + rank) % (2**63 - 1))
    return g
