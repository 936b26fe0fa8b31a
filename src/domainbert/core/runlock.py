"""One writer per run folder: ``<run>/.lock`` names the process that holds it.

The lock file holds the holder's pid, host, process start time, start time, command and a random token. A
second run into the same folder fails at once with one line naming the holder (``RunLocked``). A lock
left by a process that is gone (same host: no such pid, or the pid now belongs to a newer process) is taken
over with a warning, by one process only when several try at once; a lock from another host cannot be
checked and is reported as held.

Re-entrant: within a process the same folder may be locked again (the pipeline flow runs every stage flow
in one process), and a process given the holder's token (a pretraining deployment started by the pipeline
on a GPU worker) joins the lock instead of taking it. Only the outermost holder removes the file.
This module does not wait or retry: schedulers retry a failed run.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from domainbert.core.errors import DomainbertError

log = logging.getLogger(__name__)
LOCK = ".lock"
_mutex = threading.Lock()
_held: dict[str, list[Any]] = {}  # folder -> [depth, token, release] of the locks this process holds


class RunLocked(DomainbertError):
    """The run folder is locked by another live run."""


def _start_ticks(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid from the holder."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _alive(holder: dict[str, Any]) -> bool:
    pid = int(holder.get("pid", -1))
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # exists, another user's
    recorded, now = holder.get("pid_start"), _start_ticks(pid)
    return recorded is None or now is None or recorded == now


def read_lock(root: Path) -> dict[str, Any] | None:
    """The holder recorded in ``root/.lock`` (None when there is no lock; ``{}`` when it is unreadable)."""
    try:
        return json.loads((Path(root) / LOCK).read_text())
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}


def _describe(holder: dict[str, Any]) -> str:
    return f"pid {holder.get('pid')} on {holder.get('host')} since {holder.get('started')} ({holder.get('command')!r})"


def _create(path: Path, record: dict[str, Any]) -> bool:
    """Create the lock file with its content in one step; False if it exists."""
    tmp = path.with_name(f"{LOCK}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    tmp.write_text(json.dumps(record, sort_keys=True) + "\n")
    try:
        os.link(tmp, path)  # atomic, fails if the lock exists; readers never see an empty lock
        return True
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)


def _take_over(path: Path, stale: dict[str, Any]) -> bool:
    """Remove a dead holder's lock; False if another process got there first.

    Take-overs are serialised by an exclusive ``flock`` on ``.lock.guard``, and the lock is removed only if it
    still holds the dead holder's token: nothing else replaces a lock that exists (creation fails when it
    does, and a dead holder cannot release), so two processes taking over the same stale lock never both win
    and a live lock is never moved, even for an instant.
    """
    with open(path.with_name(f"{LOCK}.guard"), "a") as guard:
        fcntl.flock(guard, fcntl.LOCK_EX)
        try:
            current = read_lock(path.parent)
            if current is None or current.get("token") != stale.get("token"):
                return False
            path.unlink(missing_ok=True)
            return True
        finally:
            fcntl.flock(guard, fcntl.LOCK_UN)


def _acquire(root: Path, command: str, token: str | None) -> tuple[str, bool]:
    """Take the lock (or join it with ``token``); returns (token, whether this process must release it)."""
    path = root / LOCK
    host = socket.gethostname()
    record: dict[str, Any] = {
        "pid": os.getpid(),
        "host": host,
        "pid_start": _start_ticks(os.getpid()),
        "command": command,
        "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "token": uuid.uuid4().hex,
    }
    for _ in range(3):
        if _create(path, record):
            return record["token"], True
        holder = read_lock(root)
        if holder is None:
            continue  # released in between
        if token and holder.get("token") == token:
            return token, False
        if not holder:
            raise RunLocked(
                "run folder is locked and the lock file is unreadable (remove it if no run is using the folder)",
                file=path,
            )
        if holder.get("host") == host and not _alive(holder):
            if _take_over(path, holder):
                log.warning("%s: taking over a stale lock of a process that is gone: %s", path, _describe(holder))
            continue
        hint = "" if holder.get("host") == host else "; remove the file if that run is dead"
        raise RunLocked(f"run folder is in use by {_describe(holder)}{hint}", file=path)
    raise RunLocked("could not take the run folder's lock (other runs keep taking it)", file=path)


@contextmanager
def run_lock(root: str | Path, command: str, *, token: str | None = None) -> Iterator[str]:
    """Hold ``root/.lock`` for the duration; yields the token (pass it to a child run that should join).

    Raises:
        RunLocked: another live run holds the folder.
    """
    root = Path(root).resolve()
    key = str(root)
    with _mutex:
        if key in _held:
            _held[key][0] += 1
        else:
            try:
                root.mkdir(parents=True, exist_ok=True)
                tok, release = _acquire(root, command, token)
            except OSError as exc:  # read-only, not a folder, no space: a user error, not a bug
                raise DomainbertError(f"cannot write to the run folder: {exc.strerror or exc}", file=root) from None
            _held[key] = [1, tok, release]
    try:
        yield _held[key][1]
    finally:
        with _mutex:
            _held[key][0] -= 1
            if _held[key][0] == 0:
                _, tok, release = _held.pop(key)
                current = read_lock(root)
                if release and current and current.get("token") == tok:
                    (root / LOCK).unlink(missing_ok=True)


def held_token(root: str | Path) -> str | None:
    """The token of the lock this process holds on ``root`` (None if it holds none)."""
    entry = _held.get(str(Path(root).resolve()))
    return entry[1] if entry else None
