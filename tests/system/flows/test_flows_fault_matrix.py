"""The fault matrix of a tiny run, stage by stage (corpus, vocab, pretrain, finetune, report):

- a SIGKILL of the stage's command mid-way: no process of its session survives it, and the rerun gives the
  artifact an uninterrupted run gave (the same content hash, or the same scores where a file records times);
- a full disk (a tmpfs with room for half the stage's output): one line, exit 2, nothing half-written under a
  final name, and the rerun on a larger disk gives the uninterrupted run's artifact;
- each artifact kind damaged (truncated, edited at the same size, deleted, its record lost): the owning
  stage's rerun repairs it to the uninterrupted run's artifact.

Each case adds a row to a table of fault -> outcome, printed at the end of the module (``pytest -s``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from domainbert.core.artifacts import RECORD, file_hash, recorded_hash
from support.flows import (
    CORPORA,
    DOMAINBERT,
    TINY_YAML,
    base_env,
    kill_and_count_survivors,
    start_and_wait,
)

pytestmark = [pytest.mark.slow]
STAGES = ("corpus", "vocab", "pretrain", "finetune", "report")
# What each stage writes (removed before the stage runs again in a SIGKILL case).
OUTPUTS = {
    "corpus": ["corpus", "corpus.work"],
    "vocab": ["vocab"],
    "pretrain": ["pretrain"],
    "finetune": ["finetune", "tracking"],
    "report": ["report"],
}
TABLE: list[tuple[str, str, str]] = []


def artifact(stage: str, run: Path) -> object:
    """What an uninterrupted run and a repaired one must share: recorded content hashes, the model's bytes,
    and, where a file records wall times (results), the scores."""
    if stage == "corpus":
        return recorded_hash(run / "corpus")
    if stage == "vocab":
        return recorded_hash(run / "vocab" / "tokenizer"), recorded_hash(run / "vocab" / "extended-model")
    if stage == "pretrain":
        return file_hash(run / "pretrain" / "continued" / "model" / "model.safetensors")
    if stage == "finetune":
        return sorted(
            (p.relative_to(run).as_posix(), json.loads(p.read_text())["test"])
            for p in (run / "finetune").glob("*/*/seed-*/result.json")
        )
    return json.loads((run / "report" / "results.json").read_text())["comparisons"]


@pytest.fixture(scope="module")
def domain(tmp_path_factory: pytest.TempPathFactory, tiny_model: Path) -> Path:
    path = tmp_path_factory.mktemp("domain") / "tiny.yaml"
    # Every run keeps its model (save_models: all): the tiny runs collapse, and a collapsed run's model is never
    # kept as the task's best, so the seed folders hold the fine-tuning stage's model artifacts here.
    text = TINY_YAML.format(corpora=CORPORA, base_model=tiny_model)
    path.write_text(text.replace("  seeds: [1]\n", "  seeds: [1]\n  save_models: all\n", 1))
    assert "save_models: all" in path.read_text()
    return path


def _command(stage: str, domain: Path, run: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [DOMAINBERT, stage, str(domain), "--out", str(run)], env=env, capture_output=True, text=True, timeout=300
    )


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory, domain: Path) -> tuple[Path, dict[str, object]]:
    """An uninterrupted run of every stage, and each stage's artifact."""
    run = tmp_path_factory.mktemp("reference") / "run"
    env = base_env(run.parent / "prefect")
    for stage in STAGES:
        done = _command(stage, domain, run, env)
        assert done.returncode == 0, done.stderr[-3000:]
    return run, {stage: artifact(stage, run) for stage in STAGES}


def _copy(reference: Path, to: Path) -> Path:
    shutil.copytree(reference, to, symlinks=True)
    return to


# Mid-way through each stage: a line its command logs, or for the corpus a shard its workers finished.
MIDWAY = {
    "corpus": lambda run, log: any(run.glob("corpus.work/*/processed/*.json")),
    "vocab": lambda run, log: "vocab: control vocabulary" in log,  # the domain tokenizer is trained
    "pretrain": lambda run, log: "pretrain continued: step 1/" in log,  # its first checkpoint is being written
    "finetune": lambda run, log: "run 2/3:" in log,  # the floor is done, the first model is training
    "report": lambda run, log: "report inputs:" in log,  # the report is being rendered
}


@pytest.mark.parametrize("stage", STAGES)
def test_sigkill_mid_stage_leaves_no_process_and_the_rerun_matches(stage, domain, reference, tmp_path):
    ref_run, ref = reference
    run = _copy(ref_run, tmp_path / "run")
    for name in OUTPUTS[stage]:
        shutil.rmtree(run / name, ignore_errors=True)
    env = base_env(tmp_path / "prefect")
    started = time.monotonic()
    cmd = [DOMAINBERT, stage, str(domain), "--out", str(run)]
    log = tmp_path / "killed.log"
    proc = start_and_wait(cmd, env, lambda _: MIDWAY[stage](run, log.read_text()), log)
    assert proc.poll() is None, "the stage ended before it was killed"
    killed_at = time.monotonic() - started
    survivors = kill_and_count_survivors(proc)
    rerun = _command(stage, domain, run, env)
    same = rerun.returncode == 0 and artifact(stage, run) == ref[stage]
    outcome = f"{len(survivors)} survivors; rerun exit {rerun.returncode}, " + ("same artifact" if same else "DIFFERS")
    TABLE.append((stage, f"SIGKILL {killed_at:.1f} s into the command", outcome))
    assert survivors == [], survivors
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert same


# The folders a stage finishes (each complete, with its record, or absent: never a half under a final name).
FINAL = {
    "corpus": ["corpus"],
    "vocab": ["vocab/tokenizer", "vocab/extended-model"],
    "pretrain": ["pretrain/continued/model", "pretrain/continued/checkpoints/step-*"],
    "finetune": ["finetune/*/terms-ner/seed-*", "finetune/*/terms-ner/best"],
    "report": ["report"],
}


def _used(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("stage", STAGES)
def test_a_full_disk_mid_stage_is_one_line_and_leaves_no_half_artifact(stage, domain, reference, tmp_path):
    """The run folder on a tmpfs with room for half the stage's output; then the disk grows and the rerun
    completes with the uninterrupted run's artifact."""
    ref_run, ref = reference
    run = tmp_path / "run"
    run.mkdir()
    need = sum(_used(ref_run / name) for name in OUTPUTS[stage] if (ref_run / name).exists())
    staged = tmp_path / "staged"
    _copy(ref_run, staged)
    for name in OUTPUTS[stage]:
        shutil.rmtree(staged / name, ignore_errors=True)
    size = (_used(staged) + need // 2) // 4096 * 4096 + 64 * 4096  # files plus a page for each folder
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(run)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        shutil.copytree(staged, run, symlinks=True, dirs_exist_ok=True)
        env = base_env(tmp_path / "prefect")
        full = _command(stage, domain, run, env)
        errors = [line for line in full.stderr.splitlines() if line.startswith("error:")]
        half = [
            p.relative_to(run).as_posix()
            for pattern in FINAL[stage]
            for p in run.glob(pattern)
            if p.is_dir() and not (p / RECORD).is_file() and not (p / "trainer_state.json").is_file()
        ]
        subprocess.run(["mount", "-o", f"remount,size={size + 4 * need + (64 << 20)}", str(run)], check=True)
        rerun = _command(stage, domain, run, env)
        same = rerun.returncode == 0 and artifact(stage, run) == ref[stage]
    finally:
        subprocess.run(["umount", "-l", str(run)], check=False)
    said = errors[0].split(f"{run}/", 1)[-1][:70] if errors else "no error line"
    outcome = (
        f"exit {full.returncode}, {len(errors)} error line(s){', a traceback' if 'Traceback' in full.stderr else ''}"
        f" ({said}), {len(half)} half folder(s); rerun with room: " + ("same artifact" if same else "DIFFERS")
    )
    TABLE.append((stage, f"disk full ({size >> 10} KB tmpfs, {need >> 10} KB to write)", outcome))
    assert full.returncode == 2 and len(errors) == 1 and "Traceback" not in full.stderr, full.stderr[-3000:]
    assert "No space left on device" in errors[0] and "(no path given)" not in errors[0]
    assert half == []
    assert same, rerun.stderr[-3000:]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _edit(path: Path) -> None:
    """One digit changed, the size kept (a tampered score or count)."""
    text = path.read_text()
    i = next(i for i, c in enumerate(text) if c.isdigit() and i > len(text) // 3)
    path.write_text(text[:i] + str((int(text[i]) + 1) % 10) + text[i + 1 :])


def _delete(path: Path) -> None:
    path.unlink()


def _model_gone_newest_checkpoint_truncated(path: Path) -> None:
    shutil.rmtree(path / "model")
    _truncate(max(path.glob("checkpoints/step-*/model.safetensors")))


DAMAGE: list[tuple[str, str, Callable[[Path], None]]] = [
    ("corpus", "corpus/train/shard-00000.parquet", _truncate),
    ("corpus", "corpus/train/shard-00001.parquet", _delete),
    ("corpus", "corpus/validation/shard-00000.parquet", _truncate),
    ("corpus", "corpus/manifest.json", _truncate),
    ("corpus", "corpus/manifest.json", _edit),
    ("corpus", "corpus/report.md", _edit),
    ("corpus", "corpus/_domainbert.json", _delete),
    ("vocab", "vocab/tokenizer/vocab.txt", _truncate),
    ("vocab", "vocab/tokenizer/tokenizer.json", _edit),
    ("vocab", "vocab/tokenizer/tokenizer_config.json", _delete),
    ("vocab", "vocab/extended-model/model.safetensors", _truncate),
    ("vocab", "vocab/extended-model/config.json", _edit),
    ("vocab", "vocab/report.json", _edit),
    ("vocab", "vocab/_domainbert.json", _delete),
    ("pretrain", "pretrain/continued/model/model.safetensors", _truncate),
    ("pretrain", "pretrain/continued/model/model.safetensors", _delete),
    ("pretrain", "pretrain/continued/model/config.json", _edit),
    ("pretrain", "pretrain/continued/model/_domainbert.json", _delete),
    ("pretrain", "pretrain/continued", _model_gone_newest_checkpoint_truncated),
    ("finetune", "finetune/continued/terms-ner/seed-1/result.json", _edit),
    ("finetune", "finetune/continued/terms-ner/seed-1/result.json", _truncate),
    ("finetune", "finetune/base/terms-ner/seed-1/result.json", _delete),
    ("finetune", "finetune/floor/terms-ner/seed-0/result.json", _edit),
    ("finetune", "finetune/continued/terms-ner/seed-1/model/model.safetensors", _truncate),
    ("finetune", "finetune/base/terms-ner/seed-1/model/config.json", _edit),
    ("report", "report/results.json", _edit),
    ("report", "report/report.md", _truncate),
    ("report", "report/report.html", _delete),
    ("report", "report/_domainbert.json", _delete),
]


@pytest.mark.parametrize(
    ("stage", "target", "fault"), DAMAGE, ids=[f"{t}-{f.__name__.strip('_')}" for _, t, f in DAMAGE]
)
def test_a_damaged_artifact_is_repaired_by_its_stage(stage, target, fault, domain, reference, tmp_path):
    ref_run, ref = reference
    run = _copy(ref_run, tmp_path / "run")
    fault(run / target)
    rerun = _command(stage, domain, run, base_env(tmp_path / "prefect"))
    repaired = rerun.returncode == 0 and artifact(stage, run) == ref[stage]
    if target.endswith((".safetensors", "config.json")):  # a model file: its own bytes back, not only the scores
        repaired = repaired and (run / target).is_file() and file_hash(run / target) == file_hash(ref_run / target)
    # The line that named the damaged file, if one did, from the file on, up to its advice.
    said = next((line for line in rerun.stderr.splitlines() if ": damaged:" in line or " is unusable" in line), "")
    said = "named: " + said.split(f"{run}/", 1)[-1].split(";")[0][:90] if said else "not named"
    outcome = f"rerun exit {rerun.returncode}, " + ("repaired" if repaired else "NOT REPAIRED") + f"; {said}"
    TABLE.append((stage, f"{fault.__name__.strip('_').replace('_', ' ')} {target}", outcome))
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert repaired


def test_print_the_fault_table(reference):
    """Last in the module: the table of every fault above and its outcome."""
    width = max((len(f) for _, f, _ in TABLE), default=10)
    lines = [f"{'stage':<9} {'fault':<{width}} outcome"] + [f"{s:<9} {f:<{width}} {o}" for s, f, o in TABLE]
    print("\n" + "\n".join(lines) + f"\n{len(TABLE)} faults")
    assert TABLE
