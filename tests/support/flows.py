"""Helpers of the flow tests: a tiny domain (small corpus, tiny base model) and the services of the real
server test (a PostgreSQL cluster in a temp folder, ``prefect server start``, a process worker).

Every process a fixture starts runs in its own session and is stopped by its process-group id, on success
and on failure. Ports are free ports on 127.0.0.1; PREFECT_HOME is under tmp_path.
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parents[2]
CORPORA = REPO / "corpora"
PREFECT = str(Path(sys.executable).with_name("prefect"))
# A stopped command exits within a scheduler's grace period (Kubernetes' and Slurm's default: 30 s), with room
# for the CI machine, whose two test workers share its two cores with the command's own processes.
STOP_WITHIN_S = 15.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stop_group(proc: subprocess.Popen, timeout: float = 20) -> None:
    """SIGTERM the process group of ``proc`` (started with start_new_session), SIGKILL it if it lingers."""
    if proc.poll() is not None:
        return
    for sig, wait in ((signal.SIGTERM, timeout), (signal.SIGKILL, 10)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def signal_when(cmd: list[str], env: dict[str, str], marker: str, sig: int, *, group: bool,
                settle_s: float = 0.0) -> tuple[int, float, str, str]:
    """Start ``cmd`` in a session of its own and, ``settle_s`` after it prints ``marker``, send ``sig`` to its
    process (``group=False``: as Kubernetes signals a container's main process) or its whole process group (as a
    terminal sends Ctrl-C); (exit status, seconds from the signal to the exit, output before, output after)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                            start_new_session=True)
    lines: list[str] = []
    try:
        deadline = time.time() + 400
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if marker in line:
                break
            assert time.time() < deadline, "".join(lines)[-3000:]
        assert proc.poll() is None, "".join(lines)[-3000:]
        time.sleep(settle_s)
        sent = time.monotonic()
        (os.killpg if group else os.kill)(proc.pid, sig)
        rest = proc.communicate(timeout=120)[0]
        return proc.returncode, time.monotonic() - sent, "".join(lines), rest
    finally:
        stop_group(proc)


# --- processes a command leaves behind --------------------------------------------------------------------

DOMAINBERT = str(Path(sys.executable).with_name("domainbert"))


def session_processes(sid: int) -> list[psutil.Process]:
    """The live processes of session ``sid`` (a command started with ``start_new_session``), zombies left out."""
    found = []
    for proc in psutil.process_iter():
        try:
            if os.getsid(proc.pid) == sid and proc.status() != psutil.STATUS_ZOMBIE:
                found.append(proc)
        except (OSError, psutil.Error):
            continue
    return found


def family(pid: int) -> list[psutil.Process]:
    """The live processes a command started: its session's and its descendants' (a child may start a session
    of its own, as the temporary Prefect server does), the command itself left out."""
    found = {p.pid: p for p in session_processes(pid)}
    try:
        found.update({p.pid: p for p in psutil.Process(pid).children(recursive=True)})
    except psutil.Error:
        pass
    found.pop(pid, None)
    return list(found.values())


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def kill_and_count_survivors(proc: subprocess.Popen, within: float = 10.0) -> list[str]:
    """SIGKILL ``proc`` alone (not its group), wait up to ``within`` seconds for every process it started (its
    session's and its descendants') to end, and return the command lines of those still running (killed
    afterwards, so nothing leaks)."""
    started = family(proc.pid)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + within
    while (left := [p for p in started if _alive(p)] + session_processes(proc.pid)) and time.monotonic() < deadline:
        time.sleep(0.2)
    lines = []
    for p in {q.pid: q for q in left}.values():
        try:
            lines.append(" ".join(p.cmdline())[:160])
            p.kill()
        except psutil.Error:
            pass
    return lines


def start_and_wait(
    cmd: list[str], env: dict[str, str], ready: Callable[[subprocess.Popen], bool], log_path: Path, timeout: float = 240
) -> subprocess.Popen:
    """Start ``cmd`` in a session of its own, output to ``log_path``, and return once ``ready(proc)`` holds (or
    fail with its output)."""
    log = open(log_path, "w+")  # noqa: SIM115 - read back on failure
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    deadline = time.monotonic() + timeout
    while not ready(proc):
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            log.seek(0)
            pytest.fail(f"never got ready (exit {proc.returncode}):\n{log.read()[-3000:]}")
        time.sleep(0.1)
    return proc


def base_env(prefect_home: Path, api_url: str | None = None) -> dict[str, str]:
    env = {**os.environ, "PREFECT_HOME": str(prefect_home), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
           "DO_NOT_TRACK": "1", "PREFECT_LOGGING_EXTRA_LOGGERS": "domainbert", "DOMAINBERT_HOME": str(REPO),
           "PREFECT_CLI_PROMPT": "false"}
    env.pop("PREFECT_API_URL", None)
    if api_url:
        env["PREFECT_API_URL"] = api_url
    return env


# --- tiny domain ---------------------------------------------------------------------------------------

TINY_YAML = """\
name: tiny
description: A tiny science domain for flow tests.
language: [en]
corpus:
  filters:
    - name: normalize_whitespace_v1
    - name: min_length_v1
      options: {{min_words: 5}}
  dedup: {{exact: true, near: true, threshold: 0.8, num_perm: 32, ngram: 3}}
  decontamination: {{enabled: true, ngram: 8, splits: [validation, test]}}
  validation_fraction: 0.1
  shard_documents: 100
tokenizer: {{kind: wordpiece, vocab_size: 800, lowercase: true}}
vocab:
  references:
    - {{name: bert-base-uncased, path: {corpora}/vocab/bert-base-uncased-vocab.txt}}
  curve_sizes: [400, 800]
  control_corpus: [{corpora}/general/wordnet-glosses-01.jsonl.gz]
  extension: {{enabled: true, num_tokens: 30}}
base_model: {{name_or_path: {base_model}, lowercase: true}}
pretrain:
  arms: [continued]
  budget_tokens: 4096
  max_steps: 2
  seq_len: 32
  batch_size: 4
  checkpoint_every: 1
  eval_documents: 8
  general_eval_corpus: [{corpora}/general/wordnet-glosses-01.jsonl.gz]
finetune:
  tasks:
    - name: terms-ner
      type: ner
      format: conll
      path: {corpora}/tasks/science-terms-ner
      labels: [O, B-TERM, I-TERM]
      tag_scheme: IOB2
      max_train_examples: 24
      max_eval_examples: 12
      max_test_examples: 12
  seeds: [1]
  epochs: 1
  batch_size: 8
  max_length: 32
compare: {{bootstrap_samples: 100}}
profiles:
  offline:
    corpus:
      sources:
        - {{type: local, name: foldoc, paths: [{corpora}/science/foldoc.jsonl.gz], format: jsonl, max_documents: 300}}
"""


def make_tiny_model(folder: Path) -> Path:
    """A 2-layer, hidden-128 BERT with BERT's uncased vocabulary (an offline stand-in for a hub model)."""
    from transformers import BertConfig, BertForMaskedLM, BertTokenizerFast

    if (folder / "config.json").is_file():
        return folder
    tok = BertTokenizerFast(vocab_file=str(CORPORA / "vocab" / "bert-base-uncased-vocab.txt"), do_lower_case=True)
    config = BertConfig(vocab_size=tok.vocab_size, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128)
    BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    return folder


# --- PostgreSQL, Prefect server, worker -----------------------------------------------------------------

def pg_bin(name: str) -> str | None:
    """A PostgreSQL server binary: Debian keeps them in /usr/lib/postgresql/<version>/bin."""
    found = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), key=lambda p: int(p.split("/")[4]))
    return found[-1] if found else shutil.which(name)


def _as_postgres(cmd: list[str]) -> list[str]:
    # PostgreSQL refuses to run as root; as root, run it as the Debian package's postgres user.
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


@contextmanager
def postgres_cluster() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on 127.0.0.1 with database ``prefect``; yields its SQLAlchemy URL."""
    initdb, pg_ctl = pg_bin("initdb"), pg_bin("pg_ctl")
    if not initdb or not pg_ctl:
        msg = "PostgreSQL is not installed (run scripts/ci_services.sh)"
        if os.environ.get("CI"):
            pytest.fail(msg)
        pytest.skip(msg)
    # Not under tmp_path: pytest's folders are private to root, and the server runs as postgres.
    data = Path(tempfile.mkdtemp(prefix="domainbert-pg-"))
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    port = free_port()
    log = data / "server.log"
    try:
        subprocess.run(_as_postgres([initdb, "-D", str(data / "db"), "-U", "postgres", "--auth=trust", "-E", "UTF8"]),
                       check=True, capture_output=True)
        opts = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off"
        subprocess.run(_as_postgres([pg_ctl, "-D", str(data / "db"), "-o", opts, "-l", str(log), "-w", "start"]),
                       check=True, capture_output=True)
        subprocess.run(_as_postgres([pg_bin("createdb") or "createdb", "-h", "127.0.0.1", "-p", str(port),
                                     "-U", "postgres", "prefect"]), check=True, capture_output=True)
        yield f"postgresql+asyncpg://postgres@127.0.0.1:{port}/prefect"
    finally:
        pid_file = data / "db" / "postmaster.pid"
        if pid_file.is_file():
            pid = int(pid_file.read_text().split()[0])
            try:
                os.kill(pid, signal.SIGINT)  # PostgreSQL's "fast" shutdown
                for _ in range(100):
                    os.kill(pid, 0)
                    time.sleep(0.1)
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        shutil.rmtree(data, ignore_errors=True)


def wait_healthy(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"prefect server exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(f"{url}/health", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"prefect server not healthy at {url} after {timeout} s")


@contextmanager
def prefect_server(home: Path, database_url: str | None, log_path: Path) -> Iterator[str]:
    """``prefect server start`` on a free port of 127.0.0.1 (PostgreSQL when given, else SQLite); yields the API URL."""
    port = free_port()
    env = base_env(home)
    env["PREFECT_UI_ENABLED"] = "false"
    if database_url:
        env["PREFECT_API_DATABASE_CONNECTION_URL"] = database_url
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        wait_healthy(url, proc)
        yield url
    finally:
        stop_group(proc)


@contextmanager
def prefect_worker(pool: str, env: dict[str, str], log_path: Path, cwd: Path) -> Iterator[subprocess.Popen]:
    """``prefect worker start`` for ``pool`` in its own process group; stopped by its pid."""
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([PREFECT, "worker", "start", "--pool", pool, "--type", "process", "--limit", "1"],
                                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd, start_new_session=True)
    try:
        yield proc
    finally:
        stop_group(proc)


# --- reading a server back -------------------------------------------------------------------------------

def api_client(url: str):
    from prefect.client.orchestration import SyncPrefectClient

    return SyncPrefectClient(url)


def task_states(url: str, since: float) -> dict[str, list[str]]:
    """Task-run state names by task name (``corpus``, ``pretrain-arm``, ...) for runs started after ``since``."""
    from prefect.client.schemas.filters import TaskRunFilter, TaskRunFilterStartTime
    from prefect.types import DateTime

    states: dict[str, list[str]] = {}
    with api_client(url) as client:
        runs = client.read_task_runs(task_run_filter=TaskRunFilter(
            start_time=TaskRunFilterStartTime(after_=DateTime.fromtimestamp(since))), limit=200)
    for run in runs:
        states.setdefault(run.name.rsplit("-", 1)[0], []).append(run.state.name if run.state else "?")
    return states


def run_logged(cmd: list[str], env: dict[str, str], log: Path, timeout: float = 900) -> None:
    """Run ``cmd`` from the repository in its own process group, output appended to ``log``; assert it succeeds."""
    with open(log, "ab") as f:
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
    try:
        rc = proc.wait(timeout=timeout)
    finally:
        stop_group(proc)
    assert rc == 0, log.read_text(errors="replace")[-5000:]
