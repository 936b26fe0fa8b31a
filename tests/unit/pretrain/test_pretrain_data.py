"""Packing, the one-document-per-sequence mode, and the resumable stream position."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from domainbert.pretrain.data import TokenStream, encode_documents
from support.pretrain import unigram_tokenizer, wordpiece_tokenizer, write_corpus


def test_packing_is_the_document_stream_cut_into_full_sequences(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)
    stream = TokenStream(tok, tmp_path / "c", "train", packing=True)
    batch = stream.next_sequences(6, 40)
    assert batch.input_ids.shape == (6, 40) and batch.attention_mask is None and batch.real_tokens == 240
    assert (batch.input_ids[:, 0] == tok.cls_token_id).all()
    assert (batch.input_ids != tok.pad_token_id).all()
    # Without the leading [CLS], the rows are exactly the train documents, each followed by [SEP].
    expected = np.concatenate([np.append(ids, tok.sep_token_id) for ids, _ in encode_documents(tok, texts[20:40])])
    got = batch.input_ids[:, 1:].reshape(-1).numpy()
    assert np.array_equal(got, expected[: len(got)])
    assert batch.special[batch.input_ids == tok.sep_token_id].all()
    assert int((batch.input_ids == tok.sep_token_id).sum()) >= 1


def test_one_document_per_sequence_pads_and_reports_real_tokens(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)
    batch = TokenStream(tok, tmp_path / "c", "train", packing=False).next_sequences(8, 64)
    lengths = [min(len(ids), 62) + 2 for ids, _ in encode_documents(tok, texts[20:28])]
    assert batch.real_tokens == sum(lengths) < 8 * 64
    assert batch.attention_mask.sum(dim=1).tolist() == lengths
    assert (batch.input_ids[batch.attention_mask == 0] == tok.pad_token_id).all()
    assert batch.special[batch.attention_mask == 0].all()


def test_restored_stream_continues_without_replaying(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)  # train: 280 documents in row groups of 50
    first = TokenStream(tok, tmp_path / "c", "train")
    for _ in range(120):
        first.next_sequences(4, 32)
    state = first.state_dict()
    assert state["row_group"] > 0 or state["shard"] > 0  # the position is past the first row group
    expected = [first.next_sequences(4, 32).input_ids for _ in range(3)]
    second = TokenStream(tok, tmp_path / "c", "train")
    second.load_state_dict(state)
    read_groups = []
    original = second.cursor._row_group
    second.cursor._row_group = lambda shard, group: read_groups.append(group) or original(shard, group)
    got = [second.next_sequences(4, 32).input_ids for _ in range(3)]
    assert all(np.array_equal(a, b) for a, b in zip(expected, got, strict=True))
    assert min(read_groups) == state["row_group"]  # earlier row groups are never read again


def test_stream_wraps_into_a_new_epoch(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts[:30], n_val=20)  # 10 train documents
    stream = TokenStream(tok, tmp_path / "c", "train")
    total = sum(len(ids) + 1 for ids, _ in encode_documents(tok, texts[20:30]))
    stream.next_sequences(total // 31 + 2, 32)
    assert stream.cursor.state.epoch >= 1


def test_seeded_shuffle_reads_every_document_once_per_epoch_in_a_new_order(tmp_path, texts):
    from domainbert.pretrain.data import DocumentCursor

    write_corpus(tmp_path / "c", texts, n_val=20)  # train: 280 documents in row groups of 50

    def one_epoch(seed):
        cursor = DocumentCursor(tmp_path / "c", "train", shuffle_seed=seed)
        docs = []
        while cursor.state.epoch == 0:
            docs.extend(cursor.read_block(37))
        return docs[:280]

    plain, shuffled = one_epoch(None), one_epoch(7)
    assert plain == texts[20:300]
    assert sorted(shuffled) == sorted(plain) and shuffled != plain
    assert one_epoch(7) == shuffled and one_epoch(8) != shuffled
    # The first 50 documents do not all come from one block of 50 consecutive ones.
    assert len({plain.index(t) // 50 for t in shuffled[:50]}) > 1


def _reference_documents(tok, texts):
    """The per-token reading of ``word_ids()`` the vectorised encoder replaced: the oracle it must match."""
    enc = tok(texts, add_special_tokens=False, return_attention_mask=False, return_token_type_ids=False)
    out = []
    for i, ids in enumerate(enc["input_ids"]):
        words = enc.word_ids(i)
        starts = [True] + [words[j] is None or words[j] != words[j - 1] for j in range(1, len(words))]
        out.append((list(ids), starts[: len(ids)]))
    return out


@pytest.mark.parametrize("make_tokenizer", [wordpiece_tokenizer, unigram_tokenizer])
def test_vectorised_encoding_matches_the_per_token_reference(texts, make_tokenizer):
    tok = make_tokenizer(texts)
    sample = texts[:60] + ["", "[SEP] inside a [CLS] text", "x"]
    tok(["warm the wrapper with truncation"], truncation=True, max_length=4, padding="max_length")
    got = [(ids.tolist(), st.tolist()) for ids, st in encode_documents(tok, sample)]
    assert got == _reference_documents(tok, sample)
    # The wrapper still truncates and pads when asked after the stream read the Rust tokenizer directly.
    again = tok([texts[0]], truncation=True, max_length=6, padding="max_length")["input_ids"][0]
    assert len(again) == 6


@pytest.mark.parametrize("packing", [True, False])
def test_stream_rows_match_the_reference_documents(tmp_path, texts, packing):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)
    stream = TokenStream(tok, tmp_path / "c", "train", packing=packing)
    batches = [stream.next_sequences(5, 48) for _ in range(12)]
    docs = _reference_documents(tok, texts[20:300])
    if packing:
        flat_ids = [t for ids, _ in docs for t in [*ids, tok.sep_token_id]]
        flat_starts = [s for _, st in docs for s in [*st, True]]
        rows = [(b.input_ids[i, 1:].tolist(), b.word_start[i, 1:].tolist()) for b in batches for i in range(5)]
        n = sum(len(r[0]) for r in rows)
        assert [t for r in rows for t in r[0]] == flat_ids[:n]
        assert [s for r in rows for s in r[1]] == flat_starts[:n]
    else:
        nonempty = [d for d in docs if d[0]]
        for k, (b, i) in enumerate((b, i) for b in batches for i in range(5)):
            ids, st = nonempty[k]
            m = min(len(ids), 46)
            assert b.input_ids[i, 1 : m + 1].tolist() == ids[:m]
            assert b.word_start[i, 1 : m + 1].tolist() == st[:m]
    for b in batches:
        real = b.attention_mask.bool() if b.attention_mask is not None else torch.ones_like(b.special)
        expect = (b.input_ids == tok.cls_token_id) | (b.input_ids == tok.sep_token_id) | ~real
        assert torch.equal(b.special, expect) and b.real_tokens == int(real.sum())


@pytest.mark.parametrize("packing", [True, False])
def test_reading_ahead_on_threads_gives_the_same_stream_and_resumes_exactly(tmp_path, texts, packing):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)
    plain = TokenStream(tok, tmp_path / "c", "train", packing=packing, shuffle_seed=3)
    ahead = TokenStream(tok, tmp_path / "c", "train", packing=packing, shuffle_seed=3, encode_workers=2)
    for _ in range(30):  # past an epoch: wrapping happens while blocks are read ahead
        a, b = plain.next_sequences(4, 32), ahead.next_sequences(4, 32)
        assert torch.equal(a.input_ids, b.input_ids) and torch.equal(a.word_start, b.word_start)
    assert ahead._reader._pending  # blocks were read ahead of the position a checkpoint records
    assert ahead.state_dict() == plain.state_dict()
    resumed = TokenStream(tok, tmp_path / "c", "train", packing=packing, shuffle_seed=3, encode_workers=2)
    resumed.load_state_dict(ahead.state_dict())
    for _ in range(10):
        a, b = plain.next_sequences(4, 32), resumed.next_sequences(4, 32)
        assert torch.equal(a.input_ids, b.input_ids)
    ahead._reader.close()
    resumed._reader.close()


def test_threads_read_ahead_on_a_gpu_run_only():
    from domainbert.pretrain.read_ahead import MAX_WORKERS, default_workers

    assert default_workers(torch.device("cpu")) == 0  # a CPU step's own threads use the cores
    assert 1 <= default_workers(torch.device("cuda")) <= MAX_WORKERS
