"""The flows against a real Prefect server (SQLite-backed ``prefect server start``): a tiny domain end to end
through ``domainbert run``, a rerun after a change that recomputes only what changed, and a pretraining run
whose trainer is killed mid-way and whose retry resumes from the checkpoint.

Each flow runs in a subprocess of its own (as a worker would run it), so the test process's Prefect settings
stay untouched; the test reads task states, logs and artifacts back from the server's API.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from support.flows import REPO, api_client, base_env, run_logged, stop_group, task_states

pytestmark = [pytest.mark.slow]


def test_pipeline_end_to_end_then_rerun_recomputes_only_what_changed(
        sqlite_server: tuple[str, Path], tiny_domain: Path, tmp_path: Path) -> None:
    url, home = sqlite_server
    env = base_env(home, url)
    out = tmp_path / "runs" / "tiny"
    domainbert = str(Path(sys.executable).with_name("domainbert"))
    start = time.time()
    run_logged([domainbert, "run", str(tiny_domain), "--out", str(out)], env, tmp_path / "run1.log")
    first = time.time() - start
    assert (out / "report" / "report.html").is_file()
    records = {name: json.loads((out / name / "_domainbert.json").read_text()) for name in ("corpus", "vocab")}
    states = task_states(url, start)
    for name in ("corpus-split", "corpus-shard", "corpus-merge", "vocab", "pretrain-arm", "finetune", "report"):
        assert states.get(name) and all(s == "Completed" for s in states[name]), (name, states)
    # Training progress as the UI shows it: a progress artifact per arm and per fine-tuning run, ending at 100%.
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterType

    with api_client(url) as client:
        bars = client.read_artifacts(artifact_filter=ArtifactFilter(type=ArtifactFilterType(any_=["progress"])))
    done = {b.description: float(b.data) for b in bars}
    assert any(d.startswith("pretrain ") for d in done) and any("/seed-" in d for d in done), done
    assert all(v == 100.0 for d, v in done.items() if d.startswith("pretrain ")), done

    # Same inputs: every cached stage is a cache hit; a changed fine-tuning setting reruns the models'
    # fine-tuning runs only (the floor baseline does not read the learning rate: a cache hit too).
    second_start = time.time()
    run_logged([domainbert, "run", str(tiny_domain), "finetune.lr=1e-4", "--out", str(out)], env, tmp_path / "run2.log")
    states = task_states(url, second_start)
    for name in ("corpus", "vocab", "pretrain-arm"):
        assert states.get(name) == ["Cached"], (name, states)
    assert "corpus-split" not in states
    assert sorted(states.get("finetune", [])) == ["Cached", "Completed", "Completed"], states
    for name, record in records.items():
        assert json.loads((out / name / "_domainbert.json").read_text()) == record, f"{name} was rebuilt"
    rerun = time.time() - second_start

    # compare_domains over the same run: every stage a cache hit, then the cross-domain page, published.
    third_start = time.time()
    script = COMPARE_SCRIPT.format(domain=str(tiny_domain), out=str(out.parent))
    run_logged([sys.executable, "-c", script], env, tmp_path / "run3.log")
    assert (out.parent / "cross-domain" / "report.html").is_file()
    states = task_states(url, third_start)
    assert states.get("finetune") and set(states["finetune"]) == {"Cached"}, states
    assert states.get("cross-domain-report") == ["Completed"], states
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    with api_client(url) as client:
        published = client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=["cross-domain-tiny"])))
    assert published and published[0].type == "markdown"
    compared = time.time() - third_start

    # A learning-rate search through the flows: its task runs base at each rate first, and the run at the chosen
    # rate is base's first seed (written once, under base's own record), so base's seed 1 trains no more; with
    # early_stopping: reference, every other run trains to the step that run kept and validates there once.
    fourth_start = time.time()
    grid = ["finetune.lr=1e-4", "finetune.lr_grid=[1e-4, 3e-3]", "finetune.early_stopping=reference"]
    run_logged([domainbert, "run", str(tiny_domain), *grid, "--out", str(out)], env, tmp_path / "run4.log")
    assert task_states(url, fourth_start).get("recipe-search") == ["Completed"]
    first_seed = sorted((out / "finetune" / "base").glob("*/seed-*"))[0]
    result = json.loads((first_seed / "result.json").read_text())
    assert result["adopted_from"].startswith("recipe/finetune/lr-"), result.get("adopted_from")
    source = json.loads((out / result["adopted_from"] / "result.json").read_text())
    assert (result["model"], result["pred"], result["test"]) == ("base", source["pred"], source["test"])
    log = (tmp_path / "run4.log").read_text()
    assert f"base/{first_seed.parent.name}/{first_seed.name} is the search's run at its chosen rate" in log, log[-3000:]
    others = [f for f in (out / "finetune").glob("*/*/seed-*/result.json") if f.parent != first_seed]
    others = [json.loads(f.read_text()) for f in others if not f.parts[-4] == "floor"]
    assert others and all(len(r["history"]) == 1 and r["steps"] == r["best_step"] for r in others), others
    assert {r["best_step"] for r in others if r["task"] == result["task"]} == {result["best_step"]}
    print(f"flow test: first run {first:.1f} s, rerun {rerun:.1f} s, compare_domains {compared:.1f} s")


COMPARE_SCRIPT = """
from domainbert.flows.pipeline import compare_domains
print(compare_domains(domains=[{domain!r}], overrides=["finetune.lr=1e-4"], out={out!r}))
"""


RESUME_SCRIPT = """
import sys
from domainbert.flows.options import ExecutionOptions, RunSpec
from domainbert.flows.stages import pretrain_flow
spec = RunSpec(domain=sys.argv[1], overrides=sys.argv[3:], out=sys.argv[2])
print(pretrain_flow(spec, ExecutionOptions(retry_delay_seconds=0, pretrain_retries=2)))
"""


def _trainer_pids(root: int) -> list[int]:
    try:
        children = psutil.Process(root).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    pids = []
    for child in children:
        try:
            if "domainbert.pretrain.worker" in " ".join(child.cmdline()):
                pids.append(child.pid)
        except psutil.Error:
            continue
    return pids


def test_killed_pretraining_resumes_from_its_checkpoint_on_retry(
        sqlite_server: tuple[str, Path], tiny_domain: Path, tmp_path: Path) -> None:
    from domainbert.config.domain import load_domain
    from domainbert.core.paths import RunLayout
    from domainbert.corpus.build import build_corpus

    url, home = sqlite_server
    out = tmp_path / "run"
    overrides = ["pretrain.max_steps=12", "pretrain.budget_tokens=1000000", "pretrain.checkpoint_every=2",
                 "pretrain.launch.launcher=torchrun",
                 f"pretrain.launch.master_port={20000 + os.getpid() % 20000}"]
    build_corpus(load_domain(tiny_domain, overrides), RunLayout(out))
    env = base_env(home, url)
    log = tmp_path / "flow.log"
    checkpoints = out / "pretrain" / "continued" / "checkpoints"
    start = time.time()
    with open(log, "wb") as f:
        proc = subprocess.Popen([sys.executable, "-c", RESUME_SCRIPT, str(tiny_domain), str(out), *overrides],
                                stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
    killed = []
    try:
        deadline = time.monotonic() + 600
        while not killed and time.monotonic() < deadline and proc.poll() is None:
            if any((c / "trainer_state.json").is_file() for c in checkpoints.glob("step-*")):
                for pid in _trainer_pids(proc.pid):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
            time.sleep(0.05)
        rc = proc.wait(timeout=900)
    finally:
        stop_group(proc)
    assert killed, "the trainer finished before it could be killed:\n" + log.read_text()[-3000:]
    assert rc == 0, log.read_text(errors="replace")[-5000:]
    summary = json.loads((out / "pretrain" / "continued" / "summary.json").read_text())
    assert summary["steps"] == 12
    assert summary["resumed_from"] and 0 < summary["resumed_from"][0] < 12, summary["resumed_from"]
    states = task_states(url, start)
    assert states.get("pretrain-arm") == ["Completed"], states
    # The retry happened inside one task run, and the trainer's own lines reached the Prefect log.
    from prefect.client.schemas.filters import LogFilter, LogFilterTimestamp
    from prefect.types import DateTime

    messages: list[str] = []
    with api_client(url) as client:
        since = LogFilter(timestamp=LogFilterTimestamp(after_=DateTime.fromtimestamp(start)))
        for page in range(50):
            batch = client.read_logs(log_filter=since, limit=200, offset=200 * page)
            messages += [entry.message for entry in batch]
            if len(batch) < 200:
                break
    logs = [m for m in messages if "resuming continued from" in m]
    assert logs, "the trainer's 'resuming' line is not in the Prefect log"


DASK_SCRIPT = """
import json, os, sys
from domainbert.flows.options import ExecutionOptions, RunSpec
from domainbert.flows.stages import corpus_flow
if __name__ == "__main__":
    manifest = corpus_flow(RunSpec(domain=sys.argv[1], out=sys.argv[2]), ExecutionOptions(dask_local_workers=2))
    print("MANIFEST", json.dumps(manifest["content_hash"]))
    print("OMP_NUM_THREADS after the cluster:", os.environ.get("OMP_NUM_THREADS", "unset"))
"""


def test_corpus_shards_on_a_local_dask_cluster_match_the_plain_build(
        sqlite_server: tuple[str, Path], tiny_domain: Path, tmp_path: Path) -> None:
    from domainbert.config.domain import load_domain
    from domainbert.core.paths import RunLayout
    from domainbert.corpus.build import build_corpus

    url, home = sqlite_server
    overrides = ["corpus.shard_documents=60"]  # several input shards, spread over the two Dask workers
    script = tmp_path / "dask_corpus.py"
    script.write_text(DASK_SCRIPT.replace("RunSpec(domain=sys.argv[1]", f"RunSpec(overrides={overrides!r}, domain=sys.argv[1]"))
    start = time.time()
    env = base_env(home, url)
    env.pop("OMP_NUM_THREADS", None)
    run_logged([sys.executable, str(script), str(tiny_domain), str(tmp_path / "dask")], env, tmp_path / "dask.log")
    # The cluster's one-thread setting for its workers must not stay behind for the stages after it.
    assert "OMP_NUM_THREADS after the cluster: unset" in (tmp_path / "dask.log").read_text()
    plain = build_corpus(load_domain(tiny_domain, overrides), RunLayout(tmp_path / "plain"))
    dask_manifest = json.loads((tmp_path / "dask" / "corpus" / "manifest.json").read_text())
    assert dask_manifest["content_hash"] == plain["content_hash"]
    assert dask_manifest["documents"] == plain["documents"]
    states = task_states(url, start)
    assert len(states.get("corpus-shard", [])) == 5 and set(states["corpus-shard"]) == {"Completed"}, states
