"""Faults a run must survive: names that would escape the run folder, a command refused by the lock, damaged
artifacts, hostile YAML, deterministic errors and OS errors. Each ends in one line naming the file or field and
leaves nothing outside the run folder; a damaged artifact is not current, so a rerun repairs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from domainbert.cli import run_cli
from domainbert.core.artifacts import atomic_output
from domainbert.core.errors import DomainbertError
from domainbert.core.paths import project_root

ROOT = project_root()
SCIENCE = ROOT / "domains" / "science.yaml"


def _science(tmp: Path, edit=None) -> str:
    """The science domain as a file under ``tmp`` (its relative paths kept pointing at the checkout)."""
    data = yaml.safe_load(SCIENCE.read_text().replace("../corpora", str(ROOT / "corpora")))
    if edit:
        edit(data)
    path = tmp / "d.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _one_line_error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


def test_a_task_name_that_climbs_out_of_the_run_folder_is_refused_at_load(tmp_path, capsys):
    def rename(data):
        for section in (data, *data["profiles"].values()):
            for task in (section.get("finetune") or {}).get("tasks") or []:
                task["name"] = "../../../../tmp/x"

    assert run_cli(["validate", _science(tmp_path, rename)]) == 2
    line = _one_line_error(capsys)
    assert "finetune.tasks.0.name" in line and "'../../../../tmp/x' is not a plain name" in line


def test_an_extra_model_name_that_climbs_out_is_refused_at_load(tmp_path, capsys):
    override = 'finetune.extra_models={"../x": "bert-base-uncased"}'
    assert run_cli(["plan", "science", override, "--no-estimate", "--out", str(tmp_path / "run")]) == 2
    line = _one_line_error(capsys)
    assert "finetune.extra_models.../x" in line and "not a plain name" in line


def test_atomic_output_never_replaces_a_folder_outside_its_root(tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside" / "seed-1"
    outside.mkdir(parents=True)
    (outside / "keep.txt").write_text("someone else's")
    escaping = run / "finetune" / "m" / ".." / ".." / ".." / "outside" / "seed-1"
    with pytest.raises(DomainbertError, match="outside the run folder"):
        with atomic_output(escaping, config={}, root=run) as tmp:
            (tmp / "result.json").write_text("{}")
    assert (outside / "keep.txt").read_text() == "someone else's"
    assert sorted(p.name for p in outside.parent.iterdir()) == ["seed-1"]  # no temporary sibling either
    with atomic_output(run / "finetune" / "m" / "seed-1", config={}, root=run) as tmp:
        (tmp / "result.json").write_text("{}")
    assert (run / "finetune" / "m" / "seed-1" / "result.json").is_file()


HOLD = """
import sys, time
from domainbert.core.runlock import run_lock
with run_lock(sys.argv[1], "holder command"):
    print("held", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("stage", ["corpus", "vocab", "pretrain", "finetune"])
def test_a_command_refused_by_the_lock_leaves_the_run_config_as_it_was(tmp_path, capsys, stage):
    run = tmp_path / "run"
    run.mkdir()
    recorded = run / "config.resolved.json"
    recorded.write_text(json.dumps({"profile": "offline", "overrides": ["pretrain.max_steps=3"]}))
    before = recorded.read_bytes()
    proc = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "held"
        assert run_cli([stage, "science", "pretrain.max_steps=99", "--out", str(run)]) == 2
    finally:
        proc.kill()
        proc.wait()
    assert "in use by" in _one_line_error(capsys)
    assert recorded.read_bytes() == before


BOMB = "\n".join(  # three levels here; ten levels of ten grow a 10^10-element list
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(3)]
)


def test_an_alias_bomb_in_a_domain_file_is_one_line_naming_the_file_and_line(tmp_path, capsys):
    text = SCIENCE.read_text().replace("../corpora", str(ROOT / "corpora"))
    options = "\n".join("      " + line for line in BOMB.splitlines())
    text = text.replace("    - name: min_length_v1\n", f"    - name: min_length_v1\n      options:\n{options}\n", 1)
    assert "*c" in text
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    assert run_cli(["validate", str(path)]) == 2
    line = _one_line_error(capsys)
    bomb_line = next(i for i, text_line in enumerate(text.splitlines(), 1) if "*a" in text_line)
    assert f"{path}:{bomb_line}: invalid YAML: an alias (*a) is not allowed in a domain file" in line


def test_an_alias_in_an_override_is_refused(tmp_path, capsys):
    assert run_cli(["plan", "science", "pretrain.scratch_model=&a {x: *a}", "--out", str(tmp_path / "r")]) == 2
    assert "is not allowed in a domain file" in _one_line_error(capsys)


@pytest.mark.parametrize(
    ("error", "words"),
    [
        (
            OSError(28, "No space left on device"),
            "No space left on device; free space there and rerun (finished stages are kept)",
        ),
        (PermissionError(13, "Permission denied"), "Permission denied; check its permissions"),
    ],
)
def test_an_os_error_in_a_stage_is_one_line_naming_the_path_exit_2(tmp_path, capsys, monkeypatch, error, words):
    import domainbert.corpus.build

    shard = tmp_path / "run" / "corpus.work" / "shard-00000.parquet"
    error.filename = str(shard)

    def full_disk(cfg, layout):
        raise error

    monkeypatch.setattr(domainbert.corpus.build, "build_corpus", full_disk)
    assert run_cli(["corpus", "science", "--out", str(tmp_path / "run")]) == 2
    assert _one_line_error(capsys) == f"error: {shard}: {words}"


def test_plan_verify_hashes_the_shards_too(tmp_path, capsys, monkeypatch):
    from domainbert.core import artifacts

    seen = []
    monkeypatch.setattr(artifacts, "verify_everything", lambda on=True: seen.append(on))
    assert run_cli(["plan", "science", "--no-estimate", "--verify", "--out", str(tmp_path / "run")]) == 0
    assert seen == [True]


def test_plan_reads_a_read_only_run_folder(tmp_path, capsys):
    """An archived run (a read-only file system; root ignores permission bits) is planned, not refused."""
    run = tmp_path / "archived"
    run.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(run)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        (run / "config.resolved.json").write_text(json.dumps({"profile": "offline", "overrides": []}))
        subprocess.run(["mount", "-o", "remount,ro", str(run)], check=True)
        assert run_cli(["plan", "science", "--no-estimate", "--out", str(run)]) == 0
        assert "corpus" in capsys.readouterr().out
    finally:
        subprocess.run(["umount", "-l", str(run)], check=False)


def test_a_result_names_its_model_relative_to_the_project(tmp_path):
    from types import SimpleNamespace

    from domainbert.cards.finetuned_and_corpus import hub_id_of
    from domainbert.finetune.jobs import Job
    from domainbert.finetune.stage import _run_fields

    model = ROOT / "runs" / "science" / "pretrain" / "continued" / "model"
    job = Job("continued", str(model), "science-subject", 1, "full")
    task = SimpleNamespace(type="classification", multi_label=False)
    data = SimpleNamespace(splits={"train": [1, 2]}, split_overlap={})
    fields = _run_fields(job, task, data)
    assert fields["model_ref"] == "@project/runs/science/pretrain/continued/model"
    assert hub_id_of(fields["model_ref"]) is None  # a folder, not a Hub id
