"""Portable fingerprints (core/fingerprints.py): a finished run folder moved elsewhere and read from a second
checkout at another path is up to date; a changed input reruns exactly its dependants."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from domainbert.core.artifacts import RECORD, atomic_output, is_complete, read_record
from domainbert.core.fingerprints import file_identity, fingerprint, folder_identity, portable

REPO = Path(__file__).resolve().parents[3]


def test_paths_under_the_project_or_the_machine_cache_are_named_relative_to_them(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # no domains/ here: the project is DOMAINBERT_HOME's
    monkeypatch.setenv("DOMAINBERT_HOME", str(tmp_path / "checkout"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    parts = {"paths": [str(tmp_path / "checkout" / "corpora" / "a.jsonl"), str(tmp_path / "cache" / "domainbert" / "m")],
             str(tmp_path / "checkout" / "k"): "hf-id/model", "n": 3, "elsewhere": "/opt/x"}
    assert portable(parts) == {"paths": ["@project/corpora/a.jsonl", "@cache/m"], "@project/k": "hf-id/model",
                               "n": 3, "elsewhere": "/opt/x"}
    assert portable(str(tmp_path / "checkout-2" / "a")) == str(tmp_path / "checkout-2" / "a")  # a prefix, not a folder
    here = fingerprint({"path": str(tmp_path / "checkout" / "corpora" / "a.jsonl")})
    monkeypatch.setenv("DOMAINBERT_HOME", str(tmp_path / "other"))
    there = fingerprint({"path": str(tmp_path / "other" / "corpora" / "a.jsonl")})
    assert here == there


def test_file_identity_is_the_content_and_changes_with_it(tmp_path):
    a, b = tmp_path / "a.txt", tmp_path / "b.txt"
    a.write_text("same bytes\n")
    b.write_text("same bytes\n")
    assert file_identity(a) == file_identity(b)
    b.write_text("other bytes\n")
    assert file_identity(a) != file_identity(b)
    with atomic_output(tmp_path / "out", config={}) as tmp:
        (tmp / "x").write_text("x")
    recorded = read_record(tmp_path / "out")["content_hash"]
    assert folder_identity(tmp_path / "out", recorded) == recorded
    shutil.copytree(tmp_path / "out", tmp_path / "bare")
    (tmp_path / "bare" / RECORD).unlink()
    assert folder_identity(tmp_path / "bare") == recorded  # the same formula as the record's content hash


def test_a_record_of_another_fingerprint_is_not_complete_and_stays_as_written(tmp_path):
    with atomic_output(tmp_path / "out", config={}, fp="old-value") as tmp:
        (tmp / "x").write_text("x")
    written = (tmp_path / "out" / RECORD).read_bytes()
    assert not is_complete(tmp_path / "out", "new-value")
    assert (tmp_path / "out" / RECORD).read_bytes() == written  # no record is rewritten to another value
    assert is_complete(tmp_path / "out", "old-value")


TINY_YAML = """\
name: tiny
description: A tiny science domain that names its inputs relative to itself.
language: [en]
corpus:
  filters: [{name: normalize_whitespace_v1}, {name: min_length_v1, options: {min_words: 5}}]
  dedup: {exact: true, near: false}
  decontamination: {enabled: true, ngram: 8, splits: [validation, test]}
  validation_fraction: 0.1
tokenizer: {kind: wordpiece, vocab_size: 600, lowercase: true}
vocab:
  references: [{name: bert-base-uncased, path: ../corpora/vocab/bert-base-uncased-vocab.txt}]
  curve_sizes: [300, 600]
  control_corpus: [../corpora/general/glosses.jsonl.gz]
  extension: {enabled: false}
base_model: {name_or_path: ../models/bert-tiny, lowercase: true}
pretrain:
  arms: [continued]
  budget_tokens: 2048
  max_steps: 2
  seq_len: 32
  batch_size: 4
  eval_documents: 8
  general_eval_corpus: [../corpora/general/glosses.jsonl.gz]
finetune:
  tasks:
    - {name: terms-ner, type: ner, format: conll, path: ../corpora/tasks/ner, labels: [O, B-TERM, I-TERM],
       tag_scheme: IOB2, max_train_examples: 16, max_eval_examples: 8}
  seeds: [1]
  epochs: 1
  batch_size: 8
  max_length: 32
compare: {bootstrap_samples: 100}
profiles:
  offline:
    corpus:
      sources: [{type: local, name: foldoc, paths: [../corpora/science/foldoc.jsonl.gz], max_documents: 200}]
"""


def _project(root: Path) -> Path:
    """A checkout of one's own: domains/tiny.yaml naming every input by a path relative to it."""
    (root / "domains").mkdir(parents=True)
    (root / "domains" / "tiny.yaml").write_text(TINY_YAML)
    corpora = REPO / "corpora"
    for src, dst in [("vocab/bert-base-uncased-vocab.txt", "vocab/bert-base-uncased-vocab.txt"),
                     ("general/wordnet-glosses-01.jsonl.gz", "general/glosses.jsonl.gz"),
                     ("science/foldoc.jsonl.gz", "science/foldoc.jsonl.gz")]:
        (root / "corpora" / dst).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(corpora / src, root / "corpora" / dst)
    shutil.copytree(corpora / "tasks" / "science-terms-ner", root / "corpora" / "tasks" / "ner")
    _tiny_bert(root / "models" / "bert-tiny", root / "corpora" / "vocab" / "bert-base-uncased-vocab.txt")
    return root


def _tiny_bert(folder: Path, vocab: Path) -> None:
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    tok = BertTokenizerFast(vocab_file=str(vocab), do_lower_case=True)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64)
    BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)


def _plan(run: Path, capsys) -> dict[str, str]:
    from domainbert.cli import run_cli

    assert run_cli(["plan", "tiny", "--no-estimate", "--out", str(run)]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line and not line.startswith(("warning: ", "power ", "disk: "))]
    out = {}
    for line in lines:
        words = line.split()
        name = " ".join(words[:2]) if words[0] == "pretrain" else words[0]
        out[name] = line[len(name):].strip()
    return out


@pytest.mark.slow
def test_a_finished_run_moved_and_read_from_another_checkout_is_up_to_date(tmp_path, monkeypatch, capsys):
    from domainbert.cli import run_cli

    monkeypatch.delenv("DOMAINBERT_HOME", raising=False)
    monkeypatch.setenv("DOMAINBERT_LOG_LEVEL", "WARNING")
    first = _project(tmp_path / "checkout-a")
    monkeypatch.chdir(first)
    run = first / "runs" / "tiny"
    for stage in ("corpus", "vocab", "pretrain", "finetune", "report"):
        assert run_cli([stage, "tiny", "--out", str(run)]) == 0, stage
    capsys.readouterr()
    states = _plan(run, capsys)
    assert all(v.startswith(("up to date", "not needed")) for v in states.values()), states

    # A second checkout at another path (every file copied anew: new modification times) and the run moved to
    # shared storage: nothing reruns, and the re-rendered report still holds every model.
    second = tmp_path / "checkout-b"
    shutil.copytree(first, second, copy_function=shutil.copy, ignore=shutil.ignore_patterns("runs"))
    shared = tmp_path / "shared" / "tiny"
    shared.parent.mkdir()
    shutil.move(str(run), str(shared))
    monkeypatch.chdir(second)
    states = _plan(shared, capsys)
    assert all(v.startswith(("up to date", "not needed")) for v in states.values()), states
    assert run_cli(["report", "tiny", "--out", str(shared)]) == 0
    capsys.readouterr()
    models = {r["model"] for r in json.loads((shared / "report" / "results.json").read_text())["scores"]}
    assert {"base", "continued"} <= models, models

    # One input changed (the reference vocabulary): the vocab stage reruns, nothing else.
    ref = second / "corpora" / "vocab" / "bert-base-uncased-vocab.txt"
    ref.write_text(ref.read_text() + "zzzdomainbert\n")
    states = _plan(shared, capsys)
    assert states.pop("vocab").startswith("will rerun"), states
    assert all(v.startswith(("up to date", "not needed")) for v in states.values()), states
