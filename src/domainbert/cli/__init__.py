"""The ``domainbert`` command: one subcommand per stage, ``run`` for the whole pipeline, ``compare`` for the
cross-domain page over finished runs.

Every subcommand takes a domain (a name from ``domains/`` or a path to a YAML file), optional
``dotted.key=value`` overrides, ``--profile`` (``offline`` by default) and ``--out`` (``runs/<domain>/``).
User errors (``DomainbertError``) print one line on stderr and exit with status 2, without a traceback;
Ctrl-C, SIGTERM and SIGUSR1 stop any command with status 130/143/138 and one line naming the command that
continues the run (``run_cli``, ``domainbert.core.signals``).

The app and what every subcommand shares are ``common.py``'s, the subcommands ``commands.py``'s;
``domainbert.cli:app`` and ``domainbert.cli:main`` stay the entry points.
"""

from __future__ import annotations

import gc
import logging
import os
import shlex
import signal
import sys

import typer

from domainbert.cli import commands  # noqa: F401  - registers every subcommand on the app
from domainbert.cli.common import app
from domainbert.core import logs, signals
from domainbert.core.errors import DomainbertError, os_error_line

__all__ = ["app", "main", "run_cli"]


def main() -> None:
    logs.configure(os.environ.get("DOMAINBERT_LOG_LEVEL", "INFO"))
    logging.getLogger("httpx").setLevel(logging.WARNING)  # else every Prefect API request is logged
    code = run_cli(None)
    # The interpreter's last garbage collection walks every object the run left (models, Prefect's clients):
    # seconds on a busy machine, after a stop too. Nothing left needs a finalizer run by it.
    gc.freeze()
    sys.exit(code)


def run_cli(argv: list[str] | None) -> int:
    """Run the CLI on ``argv`` (None: ``sys.argv``) and return the exit status; user errors print one line.

    Exit status: 0 done; 2 a user error (``DomainbertError``: config, data, model folder, run folder locked) or
    an OS error (a full disk, a permission: one line naming the path);
    128 + the signal number after a stop by Ctrl-C (130), SIGTERM (143) or SIGUSR1 (138): one INFO line names
    the command to rerun to continue.
    """
    command = shlex.join(["domainbert", *(sys.argv[1:] if argv is None else argv)])
    try:
        with signals.stoppable():
            app(args=argv, prog_name="domainbert")  # click exits through SystemExit, usage errors included
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except signals.StopRequested as exc:
        return _stopped(command, exc.signum, exc.where)
    except DomainbertError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 2
    except OSError as exc:  # a full disk, a permission: the machine's state, not a bug (unless a stop caused it)
        if not signals.stop_requested():
            typer.echo(f"error: {os_error_line(exc)}", err=True)
            return 2
        return _stopped(command)
    except BaseException:
        # A stop can surface as another exception: a flow ends Cancelled through Prefect's Abort, Prefect's
        # engine raises its own on SIGTERM.
        if signals.stop_requested():
            return _stopped(command)
        raise
    return 0


def _stopped(command: str, signum: int | None = None, where: str = "") -> int:
    """One INFO line: what stopped, where, and the command that continues the run."""
    signum = signum or signals.requested_signal() or signal.SIGTERM
    at = f" {where}" if where and "second signal" not in where else ""
    line = f"stopped by {signal.Signals(signum).name}{at}; to continue, rerun: {command}"
    root = logging.getLogger()
    if root.handlers and root.isEnabledFor(logging.INFO):
        # Through the root's handlers alone: Prefect's API handler on "domainbert" has no flow run to log to.
        root.handle(root.makeRecord("domainbert", logging.INFO, __file__, 0, "%s", (line,), None))
    else:  # no logging set up (run_cli called from Python): the line still shows
        typer.echo(f"INFO {line}", err=True)
    return signals.exit_code(signum)
