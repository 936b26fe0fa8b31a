"""MinHash, exact and near deduplication, and decontamination on small data."""

from __future__ import annotations

import gzip
import json

import numpy as np

from domainbert.config.corpus import DecontaminationConfig, DedupConfig
from domainbert.config.finetune import TaskConfig
from domainbert.corpus.decontaminate import Decontaminator, build_index, eval_texts
from domainbert.corpus.dedup import SignatureStore, exact_first_mask, lsh_params, near_duplicate_mask
from domainbert.corpus.hashing import MinHasher, exact_keys_and_word_counts, ngram_hashes, segment_hashes
from domainbert.corpus.words import lower_words
from reference.minhash import shingles
from reference.words import word_hashes, words_of

BASE = ("the parser reads tokens from the lexer and builds an abstract syntax tree that the type checker then "
        "walks to assign a type to every expression before code generation begins")


def test_minhash_estimates_jaccard():
    hasher = MinHasher(256, 3)
    a = words_of(BASE)
    b = words_of(BASE.replace("type checker", "name resolver"))
    sa, sb = (shingles(hasher, word_hashes(w), "") for w in (a, b))
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
        sig = hasher.signatures([shingles(hasher, word_hashes(words_of(t)), t) for t in texts])
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


def check_one(dec: Decontaminator, text: str) -> str | None:
    """One document checked alone."""
    return dec.check_batch([text])[0]


def test_decontamination_rule(tmp_path):
    cfg = DecontaminationConfig(ngram=8, max_overlap=0.5)
    sets = eval_texts([_task(tmp_path)], ["validation", "test"])
    summary = build_index(sets.texts, cfg, tmp_path / "index.npz")
    assert summary["t/test"]["texts"] == 1 and summary["t/validation"]["short_texts"] == 1
    dec = Decontaminator(tmp_path / "index.npz", cfg)
    clean = "A new paragraph on graph colouring for register allocation in optimising compilers, at length."
    long_clean = " ".join([clean] * 6)
    docs = [BASE.upper() + "!",
            f"{clean}\n{BASE}. {clean} Interest rates rose sharply! More words follow about compilers and linkers.",
            f"{long_clean}\n{BASE}.\nInterest rates rose sharply!\nThe end of the story is here.",
            "train text is never indexed at all, not even a little bit here"]
    alone = [check_one(dec, d) for d in docs]
    assert alone[0] is None  # whole document overlaps: removed
    # under half of its 8-grams hit: only the overlapping and the short-eval sentences are cut
    assert alone[1] == f"{clean}\n{clean} More words follow about compilers and linkers."
    assert alone[2] == f"{long_clean}\nThe end of the story is here."
    assert alone[3] is docs[3]
    assert dec.removed["t/test"]["documents"] >= 1
    assert dec.removed["t/test"]["sentences"] >= 1 and dec.removed["t/validation"]["sentences"] >= 1
    # in one batch: the same result per document, and the same counts
    batch = Decontaminator(tmp_path / "index.npz", cfg)
    assert batch.check_batch(docs) == alone and batch.removed == dec.removed


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
    single = [shingles(hasher, lower_words([t]).hashes, t) for t in texts]
    assert len(batch) == len(texts)
    for b, s in zip(batch, single, strict=True):
        assert np.array_equal(b, s)


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


def _index(tmp_path, texts: dict[str, list[str]], **kw) -> Decontaminator:
    cfg = DecontaminationConfig(**{"ngram": 13, **kw})
    build_index(texts, cfg, tmp_path / "index.npz")
    return Decontaminator(tmp_path / "index.npz", cfg)


def test_short_multi_sentence_texts_are_found_whole_and_inside_documents(tmp_path):
    """A dictionary entry of two short sentences (under 13 words): the old sentence rule missed it."""
    entry = "Compiler: a program that translates source code. See Interpreter."
    dec = _index(tmp_path, {"defs/test": [entry]})
    intro = "The glossary lists many terms used in this book about programming languages."
    docs = [entry, f"{intro}\n{entry}\nLinker: combines object files.", entry.upper().replace(" ", "  ")]
    out = dec.check_batch(docs)
    assert out[0] is None and out[2] is None  # the whole document was the evaluation text
    assert out[1] == f"{intro}\nLinker: combines object files."
    assert dec.removed["defs/test"] == {"documents": 2, "sentences": 2 + 2 + 2}


def test_short_text_straddling_two_sentences_cuts_both(tmp_path):
    """The text ends one sentence and starts the next: both sentences go, their neighbours stay."""
    dec = _index(tmp_path, {"t/test": ["rates rose sharply. Banks reacted quickly"]})
    doc = "Markets were calm. In March interest rates rose sharply. Banks reacted quickly to it. Life went on."
    assert check_one(dec, doc) == "Markets were calm. Life went on."
    # the same words split over two documents are no match in either
    first, second = "In March interest rates rose sharply.", "Banks reacted quickly to it, as expected."
    assert dec.check_batch([first, second]) == [first, second]


def test_texts_under_min_words_remove_only_equal_documents(tmp_path):
    dec = _index(tmp_path, {"t/test": ["Thank you!", "Good morning everyone there"]}, min_words=4)
    docs = ["thank you", "Thank you for the long and detailed answer, it helped.",
            "I said good morning everyone there and left."]
    out = dec.check_batch(docs)
    assert out[0] is None and out[1] is docs[1]  # a two-word text only as a whole document
    assert out[2] is None  # four words: found inside the document (its only sentence)


def test_cutting_that_creates_a_new_match_is_checked_again(tmp_path):
    """Removing a contaminated sentence joins its neighbours; a short text formed by the join goes too."""
    long_text = " ".join(f"word{i}" for i in range(20))
    dec = _index(tmp_path, {"t/test": [long_text, "alpha beta. gamma delta"]}, max_overlap=0.9)
    doc = f"Intro sentence here. Text alpha beta. {long_text}. gamma delta end. Closing words stay."
    assert check_one(dec, doc) == "Intro sentence here. Closing words stay."
