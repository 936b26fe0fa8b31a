"""Cache keys of the stage tasks: a key moves exactly when something the stage reads changes."""

from __future__ import annotations

import json
from pathlib import Path

from domainbert.core.artifacts import RECORD
from domainbert.flows import caching
from domainbert.flows.options import ExecutionOptions, RunSpec
from domainbert.flows.publish import artifact_key
from domainbert.flows.tasks import result_storage


def _keys(domain: Path, out: Path, *overrides: str) -> dict[str, str]:
    spec = RunSpec(domain=str(domain), overrides=list(overrides), out=str(out))
    return {
        "corpus": caching.corpus_key(None, {"spec": spec}),
        "vocab": caching.vocab_key(None, {"spec": spec}),
        "pretrain": caching.pretrain_key(None, {"spec": spec, "arm": "continued"}),
        "finetune": caching.finetune_key(None, {"spec": spec, "model_name": "base", "model_ref": "package:x",
                                                "task_name": "terms-ner", "seed": 1, "mode": "finetune"}),
    }


def _changed(a: dict[str, str], b: dict[str, str]) -> set[str]:
    return {k for k in a if a[k] != b[k]}


def test_keys_move_only_for_the_stages_that_read_a_setting(tiny_domain: Path, tmp_path: Path) -> None:
    base = _keys(tiny_domain, tmp_path)
    assert base == _keys(tiny_domain, tmp_path)  # deterministic
    assert _changed(base, _keys(tiny_domain, tmp_path, "finetune.lr=1e-4")) == {"finetune"}
    assert _changed(base, _keys(tiny_domain, tmp_path, "pretrain.lr=1e-3")) == {"pretrain"}
    # The continued arm starts from the base model's own vocabulary: a new domain vocabulary leaves it alone.
    assert _changed(base, _keys(tiny_domain, tmp_path, "tokenizer.vocab_size=900")) == {"vocab"}
    assert _changed(base, _keys(tiny_domain, tmp_path, "corpus.dedup.threshold=0.7")) == {"corpus"}
    # The launcher changes speed, not results.
    assert _changed(base, _keys(tiny_domain, tmp_path, "pretrain.launch.launcher=torchrun")) == set()


def test_downstream_keys_follow_the_recorded_content_hash_of_their_inputs(tiny_domain: Path, tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    corpus.mkdir()

    def record(content_hash: str) -> None:
        (corpus / RECORD).write_text(json.dumps({"content_hash": content_hash, "fingerprint": "f"}))

    record("aaa")
    first = _keys(tiny_domain, tmp_path)
    record("bbb")
    second = _keys(tiny_domain, tmp_path)
    # A new corpus: vocabulary and pretraining recompute; the corpus key (its own inputs) does not move.
    assert _changed(first, second) == {"vocab", "pretrain"}


def test_a_source_file_edit_moves_the_corpus_key(tiny_domain: Path, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"id": "1", "text": "one two three four five six"}\n')
    domain = tmp_path / "own.yaml"
    text = tiny_domain.read_text()
    start = text.index("paths: [") + len("paths: [")
    domain.write_text(text[:start] + str(source) + text[text.index("]", start):])
    before = _keys(domain, tmp_path)["corpus"]
    source.write_text('{"id": "1", "text": "one two three four five six seven"}\n')
    assert _keys(domain, tmp_path)["corpus"] != before


def test_a_stage_is_current_only_when_complete_with_its_own_fingerprint(tiny_domain: Path, tmp_path: Path) -> None:
    from domainbert.corpus.build import stage_fingerprint

    spec = RunSpec(domain=str(tiny_domain), out=str(tmp_path))
    cfg = spec.config()
    layout = spec.layout(cfg)
    assert not caching.corpus_state(cfg, layout).current
    layout.corpus.mkdir(parents=True)
    (layout.corpus / "manifest.json").write_text("{}")
    assert not caching.corpus_state(cfg, layout).current  # files without the completion record do not count
    (layout.corpus / RECORD).write_text(json.dumps({"content_hash": "x", "fingerprint": "f"}))
    assert not caching.corpus_state(cfg, layout).current  # recorded for other inputs
    (layout.corpus / RECORD).write_text(json.dumps({"content_hash": "x", "fingerprint": stage_fingerprint(cfg)}))
    assert caching.corpus_state(cfg, layout) == caching.StageState(f"corpus-{stage_fingerprint(cfg)}", True)


def test_keys_are_the_stage_fingerprints(tiny_domain: Path, tmp_path: Path) -> None:
    from domainbert.corpus.build import stage_fingerprint
    from domainbert.finetune.jobs import Job, run_record
    from domainbert.pretrain.stage import arm_fingerprint
    from domainbert.vocab.stage import vocab_record

    spec = RunSpec(domain=str(tiny_domain), out=str(tmp_path))
    cfg = spec.config()
    layout = spec.layout(cfg)
    keys = _keys(tiny_domain, tmp_path)
    assert keys["corpus"] == "corpus-" + stage_fingerprint(cfg)
    assert keys["vocab"] == "vocab-" + vocab_record(cfg, layout)[2]
    assert keys["pretrain"] == "pretrain-" + arm_fingerprint(cfg, "continued", layout)
    assert keys["finetune"] == "finetune-" + run_record(cfg, Job("base", "package:x", "terms-ner", 1, "finetune"))[2]


def test_settings_a_stage_ignores_leave_its_key_alone(tiny_domain: Path, tmp_path: Path) -> None:
    base = _keys(tiny_domain, tmp_path)
    # Thread counts change speed, not results; the corpus reads only what decontamination needs of a task.
    assert _changed(base, _keys(tiny_domain, tmp_path, "pretrain.torch_threads=1")) == set()
    assert _changed(base, _keys(tiny_domain, tmp_path, "finetune.torch_threads=1")) == set()
    # The process count and saving the models neither: a run without its model is rerun on the same key.
    assert _changed(base, _keys(tiny_domain, tmp_path, "finetune.num_processes=2", "finetune.save_models=true")) == set()
    budget = tmp_path / "budget.yaml"
    budget.write_text(tiny_domain.read_text().replace("max_train_examples: 24", "max_train_examples: 20"))
    assert _changed(base, _keys(budget, tmp_path)) == {"finetune"}


def test_result_storage_and_artifact_keys(tmp_path: Path) -> None:
    assert result_storage(ExecutionOptions(), tmp_path) == tmp_path.resolve() / ".prefect" / "results"
    assert result_storage(ExecutionOptions(result_storage=str(tmp_path / "r")), tmp_path) == (tmp_path / "r").resolve()
    assert result_storage(ExecutionOptions(result_storage="block:s3-bucket/runs"), tmp_path) == "s3-bucket/runs"
    assert artifact_key("Tiny_Domain", "report") == "tiny-domain-report"
    assert artifact_key("cross-domain", "law", "science") == "cross-domain-law-science"
