"""Nothing outlives its parent: after a SIGKILL of a command (the OOM killer, a node agent, ``kill -9``) none
of the processes it started runs on, neither the corpus stage's workers nor Prefect's temporary server."""

from __future__ import annotations

import subprocess

import psutil
import pytest

from support.flows import DOMAINBERT, base_env, family, kill_and_count_survivors, session_processes, start_and_wait


def test_corpus_workers_die_with_a_sigkilled_command(tmp_path):
    out = tmp_path / "run"
    cmd = [DOMAINBERT, "corpus", "science", "corpus.shard_documents=500", "corpus.workers=2", "--out", str(out)]
    # Two input shards done: both workers are up and busy.
    two_done = lambda _: len(list(out.glob("corpus.work/*/processed/*.json"))) >= 2  # noqa: E731
    proc = start_and_wait(cmd, base_env(tmp_path / "prefect"), two_done, tmp_path / "command.log")
    assert len(session_processes(proc.pid)) >= 3  # the command and its workers
    assert kill_and_count_survivors(proc) == []


def _server_up(pid: int) -> bool:
    """The temporary server is up: a uvicorn among what the command started (the server has a session of
    its own, so Ctrl-C in a terminal does not reach it)."""
    for p in family(pid):
        try:
            if "uvicorn" in " ".join(p.cmdline()):
                return True
        except psutil.Error:  # ended meanwhile
            continue
    return False


@pytest.mark.slow  # a whole `run` up to the corpus stage: about 35 s
def test_prefects_temporary_server_dies_with_a_sigkilled_run(tmp_path):
    out = tmp_path / "run"
    cmd = [DOMAINBERT, "run", "science", "corpus.shard_documents=500", "--out", str(out)]

    def ready(proc: subprocess.Popen) -> bool:  # the server is up and the corpus stage's workers are at work
        return any(out.glob("corpus.work/*/processed/*.json")) and _server_up(proc.pid)

    proc = start_and_wait(cmd, base_env(tmp_path / "prefect"), ready, tmp_path / "command.log")
    assert kill_and_count_survivors(proc) == []


def test_a_launched_trainer_dies_with_a_sigkilled_launcher(tmp_path):
    """``run_command`` (the launchers of pretraining and fine-tuning) binds its child to the caller."""
    import sys

    code = "import sys; from pathlib import Path; from domainbert.core.processes import run_command; "
    code += "run_command(['sleep', '120'], Path(sys.argv[1]))"
    cmd = [sys.executable, "-c", code, str(tmp_path / "launch.log")]
    launched = lambda proc: len(session_processes(proc.pid)) >= 2  # noqa: E731
    proc = start_and_wait(cmd, base_env(tmp_path / "prefect"), launched, tmp_path / "command.log")
    assert kill_and_count_survivors(proc) == []
