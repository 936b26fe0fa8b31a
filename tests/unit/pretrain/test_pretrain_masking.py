"""Dynamic and whole-word masking on real WordPiece and SentencePiece tokenizers."""

from __future__ import annotations

import torch

from domainbert.pretrain.data import pack_texts
from domainbert.pretrain.masking import MaskingSpec, apply_mask, select_positions, step_generator
from support.pretrain import unigram_tokenizer, wordpiece_tokenizer


def _batch(tokenizer, texts):
    batch = pack_texts(tokenizer, texts, 64)
    return batch.input_ids, batch.word_start, batch.special


def _words_all_or_nothing(selected: torch.Tensor, starts: torch.Tensor, special: torch.Tensor) -> bool:
    """Every word (tokens from one start flag to the next; specials excluded) is all selected or none."""
    for row_sel, row_start, row_special in zip(selected.tolist(), starts.tolist(), special.tolist(), strict=True):
        word: list[bool] = []
        for sel, start, spec in zip(row_sel, row_start, row_special, strict=True):
            if (start or spec) and word:
                if len(set(word)) > 1:
                    return False
                word = []
            if not spec:
                word.append(sel)
        if len(set(word)) > 1:
            return False
    return True


def test_token_masking_rate_specials_and_80_10_10():
    g = step_generator(1, 0)
    ids = torch.randint(10, 1000, (64, 128), generator=g)
    special = torch.zeros_like(ids, dtype=torch.bool)
    special[:, 0] = True
    spec = MaskingSpec(mask_token_id=4, vocab_size=1000, rate=0.15)
    inputs, labels = apply_mask(ids, special, torch.ones_like(special), spec, step_generator(1, 1))
    selected = labels != -100
    assert not selected[:, 0].any()
    assert abs(selected.float().mean().item() - 0.15 * 127 / 128) < 0.01
    assert torch.equal(labels[selected], ids[selected])
    masked = (inputs == 4) & selected
    unchanged = (inputs == ids) & selected
    assert abs(masked.sum().item() / selected.sum().item() - 0.8) < 0.03
    assert abs(unchanged.sum().item() / selected.sum().item() - 0.1) < 0.03  # the 10% kept (random hits ~0)
    assert torch.equal(inputs[~selected], ids[~selected])


def test_masks_depend_only_on_seed_and_step():
    ids = torch.arange(4 * 32).view(4, 32) + 10
    special = torch.zeros_like(ids, dtype=torch.bool)
    spec = MaskingSpec(mask_token_id=4, vocab_size=200)
    a = apply_mask(ids, special, torch.ones_like(special), spec, step_generator(7, 3))
    b = apply_mask(ids, special, torch.ones_like(special), spec, step_generator(7, 3))
    c = apply_mask(ids, special, torch.ones_like(special), spec, step_generator(7, 4))
    assert torch.equal(a[1], b[1]) and not torch.equal(a[1], c[1])


def test_whole_word_masking_wordpiece(texts):
    tok = wordpiece_tokenizer(texts, vocab_size=300)  # small vocab: many words split into ## pieces
    ids, starts, special = _batch(tok, texts[:32])
    pieces = [tok.convert_ids_to_tokens(row) for row in ids.tolist()]
    # Boundaries come from word ids and agree with the ## convention on WordPiece.
    for row, flags in zip(pieces, starts.tolist(), strict=True):
        assert all(flag == (not p.startswith("##")) for p, flag in zip(row, flags, strict=True) if p[0] != "[")
    assert (~starts).sum() > 50
    selected = select_positions(special, starts, 0.3, True, step_generator(0, 0))
    assert not (selected & special).any()
    assert _words_all_or_nothing(selected, starts, special)
    assert 0.15 < selected.float().mean().item() < 0.45
    token_level = select_positions(special, starts, 0.3, False, step_generator(0, 0))
    assert not _words_all_or_nothing(token_level, starts, special)


def test_whole_word_masking_sentencepiece(texts):
    tok = unigram_tokenizer(texts, vocab_size=300)
    ids, starts, special = _batch(tok, texts[:32])
    pieces = [tok.convert_ids_to_tokens(row) for row in ids.tolist()]
    # No ## here: a word starts at a piece carrying the metaspace marker.
    for row, flags in zip(pieces, starts.tolist(), strict=True):
        assert all(flag == p.startswith("\u2581") for p, flag in zip(row, flags, strict=True) if p[0] != "[")
    assert (~starts).sum() > 50
    selected = select_positions(special, starts, 0.3, True, step_generator(0, 0))
    assert _words_all_or_nothing(selected, starts, special)
