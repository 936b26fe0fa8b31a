"""Packing, the one-document-per-sequence mode, and the resumable stream position."""

from __future__ import annotations

import numpy as np
from pretrain_fixtures import wordpiece_tokenizer, write_corpus

from domainbert.pretrain.data import TokenStream, encode_documents


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
    assert np.array_equal(got, expected[:len(got)])
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
