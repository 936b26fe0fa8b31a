"""The flows cache on the stages' own fingerprints, on a real Prefect server: a setting the stage ignores is a
cache hit, a setting it reads reruns the stage's task.

The corpus and pretraining flows run in subprocesses (as a worker runs them) against a SQLite-backed server;
the test reads the task states back. Both changes of the second run (a task's training budget, the
pretraining thread count) moved the flows' former second cache key although neither stage reads them.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from support.flows import base_env, run_logged, task_states

pytestmark = [pytest.mark.slow]

SCRIPT = """
import sys
from domainbert.flows.options import ExecutionOptions, RunSpec
from domainbert.flows.stages import corpus_flow, pretrain_flow
spec = RunSpec(domain=sys.argv[1], out=sys.argv[2], overrides=sys.argv[3:])
corpus_flow(spec, ExecutionOptions(retries=0))
pretrain_flow(spec, ExecutionOptions(retries=0, pretrain_retries=0))
"""


def test_a_change_the_stage_ignores_is_a_cache_hit_and_one_it_reads_reruns(
        sqlite_server: tuple[str, Path], tiny_domain: Path, tmp_path: Path) -> None:
    url, home = sqlite_server
    env = base_env(home, url)
    out = tmp_path / "run"
    model_record = out / "pretrain" / "continued" / "model" / "_domainbert.json"

    def run(name: str, *overrides: str) -> dict[str, list[str]]:
        start = time.time()
        run_logged([sys.executable, "-c", SCRIPT, str(tiny_domain), str(out), *overrides], env,
                   tmp_path / f"{name}.log")
        return task_states(url, start)

    first = run("first")
    assert first.get("corpus") == ["Completed"] and first.get("pretrain-arm") == ["Completed"], first
    recorded = json.loads(model_record.read_text())

    # Ignored by both stages: a fine-tuning budget (the corpus reads only what decontamination needs of a
    # task) and the pretraining thread count (speed, not results).
    tiny_domain.write_text(tiny_domain.read_text().replace("max_train_examples: 24", "max_train_examples: 20"))
    ignored = run("ignored", "pretrain.torch_threads=1")
    assert ignored.get("corpus") == ["Cached"] and ignored.get("pretrain-arm") == ["Cached"], ignored
    assert "corpus-split" not in ignored
    assert json.loads(model_record.read_text()) == recorded

    # Read by the pretraining stage: its task reruns (and trains anew); the corpus stays a cache hit.
    read = run("read", "pretrain.lr=0.001")
    assert read.get("corpus") == ["Cached"] and read.get("pretrain-arm") == ["Completed"], read
    assert json.loads(model_record.read_text())["fingerprint"] != recorded["fingerprint"]

    # A deleted output is recomputed although its key is in the cache.
    import shutil

    shutil.rmtree(out / "corpus")
    again = run("deleted", "pretrain.lr=0.001")
    assert again.get("corpus") == ["Completed"] and (out / "corpus" / "_domainbert.json").is_file(), again
