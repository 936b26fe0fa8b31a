"""MinHash, exact and near deduplication, and decontamination on small data."""

from __future__ import annotations

import gzip
import json

import numpy as np

from domainbert.corpus.config import DecontaminationConfig, DedupConfig
from domainbert.corpus.decontaminate import Decontaminator, build_index, read_conll_sentences
from domainbert.corpus.dedup import SignatureStore, exact_first_mask, lsh_params, near_duplicate_mask
from domainbert.corpus.hashing import (
    MinHasher,
    exact_keys_and_word_counts,
    ngram_hashes,
    segment_hashes,
    word_hashes,
    words_of,
)
from domainbert.corpus.words import lower_words
from domainbert.finetune.config import TaskConfig

BASE = ("the parser reads tokens from the lexer and builds an abstract syntax tree that the type checker then "
        "walks to assign a type to every expression before code generation begins")


def test_minhash_estimates_jaccard():
    hasher = MinHasher(256, 3)
    a = words_of(BASE)
    b = words_of(BASE.replace("type checker", "name resolver"))
    sa, sb = (hasher.shingles(word_hashes(w), "") for w in (a, b))
    true = len(np.intersect1d(sa, sb)) / len(np.union1d(sa, sb))
    sig = hasher.signatures([sa, sb], chunk=7)  # several chunks: must not change the result
    assert np.array_equal(sig, hasher.signatures([sa, sb]))
    assert abs((sig[0] == sig[1]).mean() - true) < 0.1


def test_exact_first_mask():
    assert exact_first_mask(np.array([5, 3, 5, 3, 9], dtype=np.uint64)).tolist() == [True, True, False, False, True]


def test_near_duplicates_across_shards(tmp_path):
    cfg = DedupConfig(threshold=0.7, num_perm=128, ngram=3)
    hasher = MinHasher(cfg.num_perm, cfg.ngram)
    other = "completely different text about tax law and the rules on interest payments by small companies today"
    shard_texts = [[BASE, other], [BASE.replace("begins", "starts"), BASE + " quickly"], [other.upper() + " x y"]]
    paths = []
    for i, texts in enumerate(shard_texts):
        sig = hasher.signatures([hasher.shingles(word_hashes(words_of(t)), t) for t in texts])
        paths.append(tmp_path / f"{i}.npy")
        np.save(paths[-1], sig)
    store = SignatureStore(paths)
    keep, clusters = near_duplicate_mask(store, np.ones(len(store), dtype=bool), cfg)
    assert keep.tolist() == [True, True, False, False, False]
    assert clusters == 2
    keep, _ = near_duplicate_mask(store, np.array([False, True, True, True, True]), cfg)
    assert keep.tolist() == [False, True, True, False, False]  # the first eligible doc of a cluster stays


def _task(tmp_path):
    folder = tmp_path / "task"
    folder.mkdir()
    rows = {"test": [{"text": BASE, "label": "a"}], "validation": [{"text": "Interest rates rose sharply.", "label": "b"}],
            "train": [{"text": "train text is never indexed at all, not even a little bit here", "label": "a"}]}
    for split, recs in rows.items():
        with gzip.open(folder / f"{split}.jsonl.gz", "wt") as f:
            f.writelines(json.dumps(r) + "\n" for r in recs)
    return TaskConfig(name="t", type="classification", format="jsonl", path=str(folder), labels=["a", "b"])


def test_decontamination_rule(tmp_path):
    cfg = DecontaminationConfig(ngram=8, max_overlap=0.5)
    summary = build_index([_task(tmp_path)], cfg, tmp_path / "index.npz")
    assert summary["t/test"]["texts"] == 1 and summary["t/validation"]["short_texts"] == 1
    dec = Decontaminator(tmp_path / "index.npz", cfg)
    assert dec.check(BASE.upper() + "!") is None  # whole document overlaps: removed
    clean = "A new paragraph on graph colouring for register allocation in optimising compilers, at length."
    mixed = f"{clean}\n{BASE}. {clean} Interest rates rose sharply! More words follow about compilers and linkers."
    # under half of its 8-grams hit: only the overlapping and the short-eval sentences are cut
    assert dec.check(mixed) == f"{clean}\n{clean} More words follow about compilers and linkers."
    long_clean = " ".join([clean] * 6)
    kept = dec.check(f"{long_clean}\n{BASE}.\nInterest rates rose sharply!\nThe end of the story is here.")
    assert kept == f"{long_clean}\nThe end of the story is here."
    assert dec.check("train text is never indexed at all, not even a little bit here") is not None
    assert dec.removed["t/test"]["documents"] >= 1
    assert dec.removed["t/test"]["sentences"] >= 1 and dec.removed["t/validation"]["sentences"] >= 1


def test_conll_reader(tmp_path):
    path = tmp_path / "test.conll"
    path.write_text("-DOCSTART-\tO\n\nThe\tO\nlexer\tB-TERM\n\nWorks\tO\n")
    assert read_conll_sentences(path) == ["The lexer", "Works"]


def test_exact_keys_ignore_case_and_spacing_and_count_words_like_split():
    texts = ["Hello   World", "hello world", "hello\nworld ", "Hello, World!", "", "  ", "Ünïcode STRASSE 42_x",
             " a  b ", "x\u00a0y\u2003z", "Tab\tand\nnewline"]
    keys, counts = exact_keys_and_word_counts(texts)
    normal = [" ".join(t.lower().split()) for t in texts]
    for i in range(len(texts)):
        for j in range(len(texts)):
            assert (keys[i] == keys[j]) == (normal[i] == normal[j]), (texts[i], texts[j])
    assert counts.tolist() == [len(t.split()) for t in texts]
    assert keys[0] == keys[1] == keys[2] and keys[3] != keys[0] and keys[4] == keys[5]


def test_batch_shingles_equal_one_document_at_a_time():
    hasher = MinHasher(num_perm=16, ngram=3)
    texts = ["the cat sat on the mat", "a b", "", "one two three one two three one", "x y z"]
    batch = hasher.batch_shingles(lower_words(texts), texts)
    single = [hasher.shingles(lower_words([t]).hashes, t) for t in texts]
    assert len(batch) == len(texts)
    for b, s in zip(batch, single, strict=True):
        assert np.array_equal(b, s)


def test_decontamination_batch_equals_check(tmp_path):
    """check_batch sends exactly the documents that check would change through it (long n-gram hits and
    sentences equal to a short evaluation text), leaves the rest, and counts the same removals."""
    cfg = DecontaminationConfig(ngram=8, max_overlap=0.5)
    build_index([_task(tmp_path)], cfg, tmp_path / "index.npz")
    clean = "A new paragraph on graph colouring for register allocation in optimising compilers, at length."
    docs = [BASE.upper() + "!", f"{clean}\n{BASE}. {clean} Interest rates rose sharply! More words follow.",
            clean, f"{clean} Interest rates rose sharply today.", f"{clean}\nInterest rates rose sharply.",
            "train text is never indexed at all, not even a little bit here", ""]
    one, batch = Decontaminator(tmp_path / "index.npz", cfg), Decontaminator(tmp_path / "index.npz", cfg)
    expected = [one.check(d) for d in docs]
    got = batch.check_batch(docs)
    assert got == expected and batch.removed == one.removed
    assert expected[4] == clean  # the short evaluation sentence was found through its k-gram
    assert [out is doc for doc, out in zip(docs, got, strict=True)] == [False, False, True, True, False, True, True]


def test_segment_hashes_equal_whole_segment_ngram_hashes():
    rng = np.random.default_rng(0)
    hashes = rng.integers(0, 2**63, size=300, dtype=np.uint64)
    offsets = np.array([0, 5, 5, 12, 100, 100, 170, 300])
    got = segment_hashes(hashes, offsets)
    for i, (a, b) in enumerate(zip(offsets[:-1], offsets[1:], strict=True)):
        if b > a:
            assert got[i] == ngram_hashes(hashes[a:b], b - a)[0]
    assert got[1] == got[4]  # empty segments hash alike


def test_lsh_params_are_datasketchs_choice():
    from datasketch.lsh import _optimal_param

    for threshold, num_perm in ((0.8, 128), (0.5, 64), (0.9, 256)):
        cfg = DedupConfig(threshold=threshold, num_perm=num_perm)
        assert lsh_params(cfg) == _optimal_param(threshold, num_perm, 0.5, 0.5)
