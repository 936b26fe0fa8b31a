"""A user error inside a stage of ``domainbert run``: one ``error:`` line and exit 2, none of Prefect's
tracebacks (``flows.user_errors``)."""

from __future__ import annotations

import logging
import subprocess

import pytest

from domainbert.core.errors import DataError
from domainbert.core.logs import VERBOSE_ENV
from domainbert.flows.user_errors import UserErrorIsNotACrash
from support.flows import DOMAINBERT, base_env


def _record(msg: str, exc: BaseException | None = None) -> logging.LogRecord:
    exc_info = (type(exc), exc, None) if exc else None
    return logging.LogRecord("prefect.flow_runs", logging.ERROR, __file__, 1, msg, None, exc_info)


def test_only_the_engines_lines_about_a_user_error_are_dropped_and_verbose_keeps_them(monkeypatch):
    quiet = UserErrorIsNotACrash()
    monkeypatch.delenv(VERBOSE_ENV, raising=False)
    assert not quiet.filter(_record("Encountered exception during execution: %r", DataError("x", field="f")))
    assert not quiet.filter(_record("Finished in state Failed('Task run encountered an exception DataError: f: x')"))
    other = _record("Encountered exception during execution: %r", RuntimeError("a bug"))
    assert quiet.filter(other) and other.levelname == "ERROR"  # a bug keeps its traceback
    assert quiet.filter(_record("Finished in state Failed('Task run encountered an exception KeyError: 'a'')"))
    monkeypatch.setenv(VERBOSE_ENV, "1")
    kept = _record("Encountered exception during execution: %r", DataError("x", field="f"))
    assert quiet.filter(kept) and kept.levelname == "DEBUG"


@pytest.mark.slow
def test_a_stage_s_user_error_under_run_is_one_line_and_no_traceback(tiny_domain, tmp_path):
    """The vocabulary stage refuses a tiny corpus for 100,000 tokens after the corpus stage ran: through Prefect
    (a temporary server, the stage's subflow and task) the command still says it in one line."""
    proc = subprocess.run(
        [DOMAINBERT, "run", str(tiny_domain), "tokenizer.vocab_size=100000", "--out", str(tmp_path / "run")],
        env=base_env(tmp_path / "prefect"), capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 2, proc.stderr[-3000:]
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and "tokenizer.vocab_size" in errors[0], proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr and "| ERROR" not in proc.stderr, proc.stderr[-3000:]
    assert (tmp_path / "run" / "corpus").is_dir()  # the stage before it finished and is kept for the rerun
