"""General-text replay in the token stream: the share of tokens counted on tiny data, the rows taken in order
from each source, and an exact resume of the mix."""

from __future__ import annotations

import torch

from domainbert.pretrain.data import TokenStream
from domainbert.pretrain.replay import ReplayStream
from support.pretrain import wordpiece_tokenizer, write_corpus


def _streams(tmp_path, texts, tok, fraction):
    write_corpus(tmp_path / "domain", texts[:150], n_val=10)
    write_corpus(tmp_path / "general", texts[150:], n_val=10)
    return ReplayStream(TokenStream(tok, tmp_path / "domain", "train"), TokenStream(tok, tmp_path / "general", "train"),
                        fraction)


def test_the_general_share_of_tokens_is_the_fraction_at_every_step(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    stream = _streams(tmp_path, texts, tok, 0.25)
    real = general = 0
    for step in range(1, 11):
        batch = stream.next_sequences(4, 32)
        real, general = real + batch.real_tokens, general + batch.general_tokens
        assert real == 4 * 32 * step  # packed: every position is real
        assert abs(general - 0.25 * real) <= 16, step  # within half a row of the share after every batch
    assert general == 10 * 32  # 10 of the 40 rows
    # rows of a length schedule: the share is of tokens, not of rows
    stream = _streams(tmp_path / "b", texts, tok, 0.3)
    sizes = [(8, 16)] * 5 + [(2, 64)] * 5
    got = [stream.next_sequences(n, length) for n, length in sizes]
    total = sum(b.real_tokens for b in got)
    assert abs(sum(b.general_tokens for b in got) - 0.3 * total) <= 32


def test_each_source_hands_out_its_own_rows_in_order(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    mixed = _streams(tmp_path, texts, tok, 0.5)
    alone = _streams(tmp_path, texts, tok, 0.5)
    batch = mixed.next_sequences(6, 32)
    general_rows = torch.tensor([False, True] * 3)  # nearest to half: domain, general, domain, ...
    assert batch.general_tokens == 3 * 32
    assert torch.equal(batch.input_ids[~general_rows], alone.domain.next_sequences(3, 32).input_ids)
    assert torch.equal(batch.input_ids[general_rows], alone.general.next_sequences(3, 32).input_ids)
    assert torch.equal(batch.special, (batch.input_ids == tok.cls_token_id) | (batch.input_ids == tok.sep_token_id))


def test_no_replay_is_the_domain_stream_itself(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    stream = _streams(tmp_path, texts, tok, 0.0)
    reference = TokenStream(tok, tmp_path / "domain", "train")
    for _ in range(3):
        batch = stream.next_sequences(4, 32)
        assert batch.general_tokens == 0 and torch.equal(batch.input_ids, reference.next_sequences(4, 32).input_ids)


def test_a_restored_mix_continues_as_the_uninterrupted_one(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    first = _streams(tmp_path, texts, tok, 0.3)
    for _ in range(3):
        first.next_sequences(4, 32)
    state = first.state_dict()
    restored = _streams(tmp_path, texts, tok, 0.3)
    restored.load_state_dict(state)
    for _ in range(4):
        a, b = first.next_sequences(4, 32), restored.next_sequences(4, 32)
        assert torch.equal(a.input_ids, b.input_ids) and a.general_tokens == b.general_tokens
