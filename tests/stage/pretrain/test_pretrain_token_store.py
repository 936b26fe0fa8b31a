"""The stored token ids (pretrain/token_store.py): the same batches and state as tokenizing, a store per corpus
and tokenizer, built once."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from transformers import AutoTokenizer

from domainbert.core.errors import DataError
from domainbert.corpus.store import write_shard
from domainbert.pretrain import token_store
from domainbert.pretrain.data import TokenStream, encode_documents
from domainbert.pretrain.token_store import TokenStore, ensure_token_store, stored_reader
from support.pretrain import unigram_tokenizer, wordpiece_tokenizer, write_corpus


def _pair(tok, corpus, packing, seed):
    text = TokenStream(tok, corpus, "train", packing=packing, shuffle_seed=seed)
    stored = TokenStream(
        tok,
        corpus,
        "train",
        packing=packing,
        shuffle_seed=seed,
        blocks=stored_reader(tok, corpus, "train", shuffle_seed=seed),
    )
    return text, stored


@pytest.mark.parametrize("make_tokenizer", [wordpiece_tokenizer, unigram_tokenizer])
@pytest.mark.parametrize("packing", [True, False])
@pytest.mark.parametrize("seed", [None, 3])
def test_stored_stream_gives_the_tokenized_streams_batches_and_state(tmp_path, texts, make_tokenizer, packing, seed):
    tok = make_tokenizer(texts)
    corpus = write_corpus(tmp_path / "c", texts[:100] + ["", "x"], n_val=20)  # row groups of 50 and 32
    extra = [{"id": f"b{i}", "text": t, "source": "foldoc", "meta": {}} for i, t in enumerate(texts[300:330])]
    write_shard(corpus / "train" / "shard-00001.parquet", extra, row_group_size=20)  # a second shard
    text, stored = _pair(tok, corpus, packing, seed)
    assert isinstance(stored._reader, token_store.StoredReader)
    for _ in range(250):  # 112 documents, 11,000 to 18,000 tokens: past the first epoch
        a, b = text.next_sequences(4, 32), stored.next_sequences(4, 32)
        for name in ("input_ids", "special", "word_start"):
            assert torch.equal(getattr(a, name), getattr(b, name)), name
        assert a.real_tokens == b.real_tokens
    assert stored.cursor.state.epoch >= 1
    assert stored.state_dict() == text.state_dict()


def test_a_stored_stream_resumes_exactly_from_either_streams_state(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    corpus = write_corpus(tmp_path / "c", texts, n_val=20)
    text, stored = _pair(tok, corpus, True, 5)
    for _ in range(7):
        text.next_sequences(8, 64), stored.next_sequences(8, 64)
    for state in (text.state_dict(), stored.state_dict()):  # a checkpoint from before the store resumes too
        resumed = TokenStream(tok, corpus, "train", shuffle_seed=5, blocks=stored_reader(tok, corpus, "train", 5))
        resumed.load_state_dict(state)
        reference = TokenStream(tok, corpus, "train", shuffle_seed=5)
        reference.load_state_dict(state)
        for _ in range(12):
            assert torch.equal(resumed.next_sequences(8, 64).input_ids, reference.next_sequences(8, 64).input_ids)


def test_stored_arrays_are_the_documents_tokens_in_file_order(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    docs = texts[:70] + ["", "one more"]
    corpus = write_corpus(tmp_path / "c", docs, n_val=10)  # 62 training rows: row groups of 50 and 12
    store = ensure_token_store(tok, corpus, "train")
    assert store.index["row_groups"] == [[50, 12]] and store.first_document == [[0, 50]]
    assert store.index["documents"] == 62 and store.ids.dtype == np.uint16  # a 600-token vocabulary
    expected = encode_documents(tok, docs[10:])
    assert store.offsets.tolist() == [0, *np.cumsum([len(i) for i, _ in expected]).tolist()]
    assert store.ids.tolist() == [t for i, _ in expected for t in i.tolist()]
    assert store.word_starts.tolist() == [s for _, st in expected for s in st.tolist()]
    assert store.index["tokens"] == len(store.ids) and store.index["text_bytes"] == sum(
        len(t.encode()) for t in docs[10:]
    )
    ids, starts, lengths = store.gather(np.array([61, 60, 3]))
    assert lengths.tolist() == [len(expected[k][0]) for k in (61, 60, 3)] and lengths[1] == 0
    assert ids.tolist() == [*expected[61][0].tolist(), *expected[3][0].tolist()] and ids.dtype == np.int64
    assert starts.tolist() == [*expected[61][1].tolist(), *expected[3][1].tolist()]


def test_one_store_per_corpus_and_tokenizer_built_once(tmp_path, texts, monkeypatch):
    built = []
    real_build = token_store.build
    monkeypatch.setattr(token_store, "build", lambda *a, **k: built.append(a[2]) or real_build(*a, **k))
    corpus = write_corpus(tmp_path / "c", texts[:120], n_val=20)
    wordpiece, unigram = wordpiece_tokenizer(texts), unigram_tokenizer(texts)
    first = ensure_token_store(wordpiece, corpus, "train")
    wordpiece.save_pretrained(tmp_path / "tok")
    loaded = AutoTokenizer.from_pretrained(tmp_path / "tok")
    loaded(["the wrapper sets truncation on its backend"], truncation=True, max_length=4)
    again = ensure_token_store(loaded, corpus, "train")  # the same tokenizer, saved and loaded as a run does
    assert again.folder == first.folder and len(built) == 1
    # Retraining draws other ids for tied pieces (another serialisation): another store, as it must be.
    assert ensure_token_store(wordpiece_tokenizer(texts), corpus, "train").folder != first.folder
    built.pop()
    other = ensure_token_store(unigram, corpus, "train")  # another arm's tokenizer: its own store
    assert other.folder != first.folder and len(built) == 2
    assert ensure_token_store(wordpiece, corpus, "validation").folder != first.folder
    write_corpus(corpus, texts[:121], n_val=20)  # the corpus changed: tokenized again
    changed = ensure_token_store(wordpiece, corpus, "train")
    assert changed.folder != first.folder and changed.index["documents"] == 101 and len(built) == 4


def test_runs_starting_together_tokenize_once(tmp_path, texts, monkeypatch):
    built = []
    real_build = token_store.build
    monkeypatch.setattr(token_store, "build", lambda *a, **k: built.append(a[2]) or real_build(*a, **k))
    corpus = write_corpus(tmp_path / "c", texts[:300], n_val=20)
    tok = wordpiece_tokenizer(texts)
    folders: list = []
    threads = [
        threading.Thread(target=lambda: folders.append(ensure_token_store(tok, corpus).folder)) for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1 and len(set(folders)) == 1 and TokenStore(folders[0]).index["documents"] == 280


def test_a_slow_tokenizer_is_not_stored(tmp_path, texts):
    slow = SimpleNamespace(is_fast=False)  # a Python tokenizer (transformers' slow classes): no Rust backend
    corpus = write_corpus(tmp_path / "c", texts[:60], n_val=20)
    assert ensure_token_store(slow, corpus) is None and stored_reader(slow, corpus) is None


def test_a_corrupt_shard_is_named_as_the_text_stream_names_it(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    corpus = write_corpus(tmp_path / "c", texts[:120], n_val=20)
    shard = corpus / "train" / "shard-00000.parquet"
    shard.write_bytes(shard.read_bytes()[:-200])  # truncated: the footer is gone
    with pytest.raises(DataError, match=r"cannot read corpus shard \(truncated or corrupt") as stored:
        ensure_token_store(tok, corpus)
    with pytest.raises(DataError) as text:
        TokenStream(tok, corpus, "train").next_sequences(2, 16)
    assert str(stored.value) == str(text.value) and "shard-00000.parquet" in str(stored.value)
    folder = token_store.cache_folder(token_store.store_fingerprint(tok, corpus, "train"))
    assert not folder.exists() and not list(folder.parent.glob(f"{folder.name}.tmp-*"))  # nothing half-made


def test_a_cache_that_cannot_be_written_falls_back_to_tokenizing(tmp_path, texts, monkeypatch, caplog):
    tok = wordpiece_tokenizer(texts)
    corpus = write_corpus(tmp_path / "c", texts[:60], n_val=20)
    (tmp_path / "not-a-folder").write_text("")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "not-a-folder"))  # every write under it fails
    with pytest.raises(OSError):
        ensure_token_store(tok, corpus)
    assert stored_reader(tok, corpus) is None and "tokenizing while training instead" in caplog.text
