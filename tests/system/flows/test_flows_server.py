"""The real-server test: PostgreSQL, ``prefect server start``, a process work pool, the ``domain-pipeline``
deployment from prefect.yaml, a worker, and one tiny run that must complete and publish its artifacts.

Everything runs as a user would run it (the CLI commands of docs/cluster.md), on free ports of 127.0.0.1,
with PREFECT_HOME under tmp_path; every process is stopped by its process-group id, also on failure.
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from support.flows import (
    PREFECT,
    REPO,
    _as_postgres,
    base_env,
    pg_bin,
    postgres_cluster,
    prefect_server,
    prefect_worker,
)

pytestmark = [pytest.mark.server, pytest.mark.slow]

FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _cli(args: list[str], env: dict[str, str], cwd: Path = REPO) -> str:
    proc = subprocess.run([PREFECT, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"prefect {' '.join(args)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout


def _wait_final(client, run_id, timeout: float) -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.read_flow_run(run_id)
        if run.state and run.state.type.value in FINAL:
            return run
        time.sleep(2)
    raise TimeoutError(f"flow run {run_id} not finished after {timeout} s")


def _tail(path: Path, n: int = 4000) -> str:
    return path.read_text(errors="replace")[-n:] if path.is_file() else ""


def _cancel_during_pretraining(client, deployment_id, domain: Path, out: Path, worker_log: Path) -> dict:
    """Run the deployment with a long pretraining budget, cancel it (as the UI does: state Cancelling) once
    an arm's training has checkpointed, and return the final state names of the run and of its subflows, once
    the worker has finished its cancellation (its on_cancellation hooks run in a process of their own after the
    run's final state: a worker stopped before they end kills them, and Prefect logs a traceback)."""
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId, FlowRunFilterParentFlowRunId
    from prefect.states import Cancelling

    params = {"domain": str(domain), "out": str(out),
              "overrides": ["pretrain.max_steps=null", "pretrain.budget_tokens=400000"]}
    flow_run = client.create_flow_run_from_deployment(deployment_id, parameters=params)
    deadline = time.monotonic() + 600
    while not list((out / "pretrain" / "continued").glob("checkpoints/*")):
        assert time.monotonic() < deadline, "pretraining never checkpointed"
        time.sleep(1)
    client.set_flow_run_state(flow_run.id, Cancelling(), force=True)
    run = _wait_final(client, flow_run.id, timeout=300)
    time.sleep(3)  # the subflows' last states land after the parent's
    while f"Cancelled flow run '{run.name}'" not in _tail(worker_log, 10**6):
        assert time.monotonic() < deadline + 300, "the worker never ended its cancellation"
        time.sleep(1)
    subflows = client.read_flow_runs(
        flow_run_filter=FlowRunFilter(parent_flow_run_id=FlowRunFilterParentFlowRunId(any_=[flow_run.id])))
    names = {f.id: f.name for f in client.read_flows()}
    tasks = client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(
        any_=[flow_run.id, *[f.id for f in subflows]])), limit=200)
    return {"pipeline": run.state.type.value,
            "subflows": {names.get(f.flow_id, str(f.flow_id)): f.state.type.value for f in subflows if f.state},
            "tasks": {t.name.rsplit("-", 1)[0]: t.state.type.value for t in tasks if t.state}}


def test_domain_pipeline_on_a_postgres_backed_server(tmp_path: Path, tiny_domain: Path) -> None:
    from prefect.client.orchestration import SyncPrefectClient
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    timings: dict[str, float] = {}
    t0 = time.monotonic()
    home = tmp_path / "prefect-home"
    out = tmp_path / "run"
    with postgres_cluster() as database_url:
        timings["postgres_start_s"] = time.monotonic() - t0
        with prefect_server(home, database_url, tmp_path / "server.log") as api_url:
            timings["server_healthy_s"] = time.monotonic() - t0
            env = base_env(home, api_url)
            _cli(["work-pool", "create", "domainbert-cpu", "--type", "process"], env)
            _cli(["--no-prompt", "deploy", "--name", "domain-pipeline"], env)
            timings["deployed_s"] = time.monotonic() - t0
            with prefect_worker("domainbert-cpu", env, tmp_path / "worker.log", cwd=tmp_path) as worker:
                with SyncPrefectClient(api_url) as client:
                    deployment = client.read_deployment_by_name("domain-pipeline/domain-pipeline")
                    params = {"domain": str(tiny_domain), "overrides": ["finetune.epochs=1"], "out": str(out)}
                    flow_run = client.create_flow_run_from_deployment(deployment.id, parameters=params)
                    run = _wait_final(client, flow_run.id, timeout=1200)
                    timings["run_s"] = time.monotonic() - t0
                    assert worker.poll() is None, _tail(tmp_path / "worker.log")
                    assert run.state.type.value == "COMPLETED", (
                        f"{run.state}\n--- worker log ---\n{_tail(tmp_path / 'worker.log')}")
                    keys = ["tiny-report", "tiny-results", "tiny-report-html", "tiny-corpus", "tiny-vocab"]
                    artifacts = client.read_artifacts(
                        artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))
                    by_key = {a.key: a for a in artifacts}
                    cancelled = _cancel_during_pretraining(client, deployment.id, tiny_domain, tmp_path / "cancelled",
                                                           tmp_path / "worker.log")
            # The artifacts the stages wrote, where the deployment's parameters put them.
            assert (out / "report" / "report.html").is_file()
            manifest = json.loads((out / "corpus" / "manifest.json").read_text())
            assert manifest["documents"]["train"] > 0
            summary = json.loads((out / "pretrain" / "continued" / "summary.json").read_text())
            assert summary["steps"] == 2
            result = json.loads((out / "finetune" / "continued" / "terms-ner" / "seed-1" / "result.json").read_text())
            assert result["task"] == "terms-ner" and 0.0 <= result["test"]["f1"] <= 1.0
            # The Prefect artifacts it published, as the UI shows them.
            assert set(keys) <= set(by_key), sorted(by_key)
            assert by_key["tiny-report"].type == "markdown" and len(by_key["tiny-report"].data) > 100
            assert by_key["tiny-results"].type == "table"
            rows = json.loads(by_key["tiny-results"].data) if isinstance(by_key["tiny-results"].data, str) \
                else by_key["tiny-results"].data
            assert any("continued" in json.dumps(row) for row in rows)
            link = by_key["tiny-report-html"].data  # a link artifact (Markdown): the worker's file, named as such
            assert "report.html (a file on " in link and "](file://" in link
            assert "data:image/png;base64," in by_key["tiny-report"].data  # figures embedded: the UI shows them
            # The run is recorded in PostgreSQL, not in a SQLite file.
            port = database_url.rsplit(":", 1)[1].split("/")[0]
            count = subprocess.run(
                _as_postgres([pg_bin("psql") or "psql", "-h", "127.0.0.1", "-p", port, "-U", "postgres", "-d",
                              "prefect", "-tAc", "select count(*) from flow_run where state_type = 'COMPLETED'"]),
                capture_output=True, text=True, check=True).stdout.strip()
            assert int(count) >= 5  # the pipeline and its five stage subflows
            assert not list(home.glob("*.db"))
            # A cancel from the UI: the pipeline and every stage subflow it had started end Cancelled (none
            # Crashed or Failed), and the worker logged no error for it.
            states = cancelled["subflows"]
            assert cancelled["pipeline"] == "CANCELLED", cancelled
            assert states.get("domainbert-pretrain") == "CANCELLED", cancelled
            assert set(states.values()) <= {"COMPLETED", "CANCELLED"}, cancelled
            # so does the task it interrupted (the arm's training), logged at INFO; no task crashed
            assert cancelled["tasks"].get("pretrain-arm") == "CANCELLED", cancelled
            assert set(cancelled["tasks"].values()) <= {"COMPLETED", "CANCELLED"}, cancelled
            log = _tail(tmp_path / "worker.log", 10**6)
            assert not [line for line in log.splitlines() if "| ERROR" in line and " run " in line], log[-3000:]
            assert not (tmp_path / "cancelled" / "pretrain" / "continued" / "model").exists()
            assert "Traceback" not in _tail(tmp_path / "worker.log", 10**6)
    timings["total_s"] = time.monotonic() - t0
    (tmp_path / "timings.json").write_text(json.dumps(timings))
    print("server test timings:", json.dumps({k: round(v, 1) for k, v in timings.items()}))
