"""User-facing errors.

A ``DomainbertError`` is a mistake in the user's input (a config key, a data file, a model folder) that the
CLI prints as one line, without a traceback, and exits non-zero. Bugs in domainbert stay ordinary exceptions.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


class DomainbertError(Exception):
    """An error in user input: says what is wrong and where (file, line, field)."""

    def __init__(
        self, message: str, *, file: str | Path | None = None, line: int | None = None, field: str | None = None
    ) -> None:
        self.file = str(file) if file is not None else None
        self.line = line
        self.field = field
        where = ""
        if self.file:
            where = self.file + (f":{line}" if line is not None else "")
        if field:
            where = f"{where}: {field}" if where else field
        super().__init__(f"{where}: {message}" if where else message)


# A training process started by a launcher (torchrun, deepspeed) prints its user error after this mark, so that
# the parent raises it again as a DomainbertError (``core.processes``): deterministic, never retried.
USER_ERROR_MARK = "domainbert user error: "


class ConfigError(DomainbertError):
    """A domain YAML, a profile or an override is invalid."""


class DataError(DomainbertError):
    """A corpus, task or vocabulary file is missing or malformed."""


class ModelError(DomainbertError):
    """A model or tokenizer folder is missing, incomplete or inconsistent."""


_OS_HINTS = {
    errno.ENOSPC: "free space there and rerun (finished stages are kept)",
    errno.EDQUOT: "free space there and rerun (finished stages are kept)",
    errno.EACCES: "check its permissions",
    errno.EPERM: "check its permissions",
    errno.EROFS: "the file system is read-only: choose another --out",
}


def os_error_line(exc: OSError) -> str:
    """One line for an OS error (a full disk, a permission): the path, the system's words and what to do."""
    exc = _first_copy_error(exc)
    where = exc.filename if exc.filename is not None else "(no path given)"
    hint = _OS_HINTS.get(exc.errno or 0)
    return f"{where}: {exc.strerror or exc}" + (f"; {hint}" if hint else "")


def _first_copy_error(exc: OSError) -> OSError:
    """``shutil.copytree``'s ``Error`` lists (source, destination, why) for every file it could not copy, with
    ``why`` as text: the first of them as the OSError it was, named by its destination."""
    import shutil

    failures = exc.args[0] if isinstance(exc, shutil.Error) and exc.args else None
    if not failures or not isinstance(failures, list) or len(failures[0]) != 3:
        return exc
    _, destination, why = failures[0]
    found = re.match(r"\[Errno (\d+)\] ([^:]+)", str(why))
    if found is None:
        return OSError(None, str(why), str(destination))
    return OSError(int(found.group(1)), found.group(2), str(destination))


# What libraries say when a write ran out of room: safetensors' SafetensorError ("No space left on device")
# and torch.save's "unexpected pos N vs M" (its writer found the file shorter than what it wrote).
_DISK_FULL = re.compile(r"No space left on device|unexpected pos \d+ vs \d+")


@contextmanager
def disk_errors(path: Path) -> Iterator[None]:
    """Raise a write's disk-full failure, whatever library reported it, as ``OSError(ENOSPC)`` naming ``path``
    (a disk-full ``OSError`` without a path gets ``path``), so the command says "no space left" in one line."""
    try:
        yield
    except OSError as exc:
        if exc.filename is None and exc.errno in (errno.ENOSPC, errno.EDQUOT):
            exc.filename = str(path)
        raise
    except Exception as exc:
        if _DISK_FULL.search(str(exc)):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path)) from exc
        raise
