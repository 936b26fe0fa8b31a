"""Artifacts that are complete or absent: atomic output folders, content hashes and skip-if-done.

Every stage writes its output folder through ``atomic_output``: files go to a temporary sibling folder,
a ``_domainbert.json`` record (resolved config, input hashes, fingerprint, content hash, the code's git
commit) is written last,
and only then is the folder renamed into place. A folder without that record, or whose fingerprint differs,
is not complete and is rebuilt; a complete one is skipped. Resumable stages (pretraining) keep their
checkpoints elsewhere and use this only for the final model folder.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from domainbert import __version__

# file_hash and fingerprint are re-exported: the stages import records and hashes from here.
from domainbert.core.fingerprints import CARD as CARD
from domainbert.core.fingerprints import RECORD as RECORD
from domainbert.core.fingerprints import UNHASHED
from domainbert.core.fingerprints import file_hash as file_hash
from domainbert.core.fingerprints import fingerprint as fingerprint

log = logging.getLogger(__name__)


def file_hashes(folder: Path) -> dict[str, str]:
    """sha256 of every file in ``folder`` by relative path, in sorted order; the record and the top-level card
    (``README.md``: documentation a later stage may refresh, e.g. with the fine-tuning scores) are left out."""
    return {
        rel: file_hash(path)
        for path in sorted(p for p in folder.rglob("*") if p.is_file())
        if (rel := path.relative_to(folder).as_posix()) not in UNHASHED
    }


def combined_hash(hashes: dict[str, str]) -> str:
    h = hashlib.sha256()
    for rel, digest in sorted(hashes.items()):
        h.update(rel.encode())
        h.update(b"\0")
        h.update(digest.encode())
    return h.hexdigest()


def content_hash(folder: Path) -> str:
    """sha256 over the relative paths and bytes of every file in ``folder`` (the record excluded)."""
    return combined_hash(file_hashes(folder))


def read_record(folder: Path) -> dict[str, Any] | None:
    path = folder / RECORD
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None


SMALL_FILE = 1 << 20
"""Recorded files up to this size (results, manifests, reports, configs) are hashed on every check; larger
ones (weights, shards) have their size compared, and their hash only with ``verify``."""
_verify_all = False


def verify_everything(on: bool = True) -> None:
    """Hash every recorded file, big ones included, in every check this process makes (``plan --verify``)."""
    global _verify_all
    _verify_all = on


def is_complete(folder: Path, fp: str | None = None, *, verify: bool = False) -> bool:
    """True when ``folder`` has a record (with fingerprint ``fp`` if given) and its files still match it
    (``damage``: sizes, the hashes of small files, every hash with ``verify``). A damaged folder is not complete,
    so the stage that owns it runs again; a warning names the damaged file."""
    record = read_record(folder)
    if record is None:
        return False
    if fp is not None and record.get("fingerprint") != fp:
        return False
    problem = damage(folder, record, verify=verify)
    if problem is not None:
        log.warning("%s; not current: it will be rebuilt", problem)
        return False
    return True


def damage(folder: Path, record: dict[str, Any] | None = None, *, verify: bool = False) -> str | None:
    """One line naming the first file of a recorded folder that no longer matches its record (missing, of
    another size, or, for a small file or with ``verify`` any file, of another sha256), or None when it matches
    or has no record. Files added after the record are left to ``changed_file`` (``verify_folder``).

    The size check is what catches a truncated shard or checkpoint at the cost of a ``stat``; hashing every small
    file catches an edited result or a truncated manifest, which later stages and the report trust."""
    record = read_record(folder) if record is None else record
    if record is None:
        return None
    if verify or _verify_all:
        problem = changed_file(folder, record)
        return f"{problem[1]}: damaged: {problem[0]}" if problem else None
    hashes, sizes = record.get("files") or {}, record.get("sizes") or {}
    for rel, digest in sorted(hashes.items()):
        if rel in UNHASHED:
            continue
        path = Path(folder) / rel
        try:
            size = path.stat().st_size
        except OSError:
            return f"{path}: damaged: missing since the folder was written"
        if rel in sizes and size != sizes[rel]:
            return f"{path}: damaged: {size} bytes where its record has {sizes[rel]} (truncated or edited)"
        if size <= SMALL_FILE and file_hash(path) != digest:
            return f"{path}: damaged: content differs from the sha256 in its record (edited or corrupt)"
    return None


def write_json_atomic(path: Path, obj: object) -> None:
    """Write JSON next to ``path`` and rename it into place (a reader never sees half a file)."""
    write_text_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """Write ``text`` next to ``path`` and rename it into place (a reader never sees half a file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def inside(path: Path, root: Path) -> bool:
    """Whether ``path`` lies strictly inside ``root`` once both are resolved (``..`` and links followed)."""
    path, root = Path(path).resolve(), Path(root).resolve()
    return path != root and path.is_relative_to(root)


@contextmanager
def atomic_output(
    final: Path,
    *,
    config: dict[str, Any],
    inputs: dict[str, str] | None = None,
    fp: str | None = None,
    root: Path | None = None,
) -> Iterator[Path]:
    """Yield a temporary folder; on success record it and rename it to ``final``.

    On an exception the temporary folder is removed and ``final`` is left as it was.

    Args:
        final: the folder the stage's output should end up in.
        config: the resolved config of the stage (saved in the record, JSON-serialisable).
        inputs: content hashes of the stage's inputs, by name.
        fp: the fingerprint; defaults to ``fingerprint(config, inputs, __version__)``.
        root: the folder ``final`` must lie inside (the run folder). Replacing ``final`` deletes the folder
            there before, so a path that escapes its root (a name with ``..``, a link) is refused before
            anything is written: config names are checked at load, this is the second guard.

    Raises:
        DomainbertError: ``final`` lies outside ``root``.
    """
    final = Path(final)
    if root is not None and not inside(final, root):
        from domainbert.core.errors import DomainbertError

        raise DomainbertError(f"refusing to write outside the run folder {root}", file=final)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir()
    inputs = dict(inputs or {})
    fp = fp or fingerprint(config, inputs, __version__)
    from domainbert.core.errors import disk_errors

    try:
        with disk_errors(final):  # a library's "no space left" names the output, as an OSError would
            yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    hashes = file_hashes(tmp)
    record = {
        "fingerprint": fp,
        "config": config,
        "inputs": inputs,
        "content_hash": combined_hash(hashes),
        "files": hashes,
        "sizes": {rel: (tmp / rel).stat().st_size for rel in hashes},
        "domainbert_version": __version__,
        "source_revision": source_revision(),
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (tmp / RECORD).write_text(json.dumps(record, indent=2, sort_keys=True, default=str) + "\n")
    replace_folder(tmp, final)


@functools.lru_cache(maxsize=1)
def source_revision() -> str | None:
    """The git commit of the checkout this code runs from (``+changes`` where its tracked files differ from it),
    or None where there is none (an installed wheel, no git): which code made an artifact, for a reader of
    its record and for ``studies/export_scores.py``. Never part of a fingerprint: a commit that changes nothing a
    stage computes leaves its outputs current."""
    root = Path(__file__).resolve().parents[3]  # src/domainbert/core/artifacts.py -> the checkout
    if not (root / ".git").exists():
        return None
    try:
        git = ["git", "-C", str(root)]
        head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True)
        changed = subprocess.run(
            [*git, "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return head.stdout.strip() + ("+changes" if changed.stdout.strip() else "")


def replace_folder(done: Path, final: Path) -> None:
    """Move the finished folder ``done`` to ``final``; a folder already there is renamed away first and then
    removed, so ``final`` is never half old and half new."""
    if final.exists():
        old = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.replace(final, old)
        shutil.rmtree(old, ignore_errors=True)
    os.replace(done, final)


def _stat_key(folder: Path) -> tuple:
    return tuple(
        sorted(
            (p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns)
            for p in folder.rglob("*")
            if p.is_file() and (st := p.stat())
        )
    )


_VERIFIED: dict[str, tuple] = {}


def verify_folder(folder: Path) -> None:
    """Check that a recorded folder's files still hash to its record; a folder without a record passes.

    Hashes once per process per folder state: the result is cached by the files' sizes and modification
    times, so loading the same model for every fine-tuning seed costs a ``stat`` per file.

    Raises:
        ModelError: one line naming the first file that changed, is missing or was added.
    """
    from domainbert.core.errors import ModelError

    folder = Path(folder).resolve()
    record = read_record(folder)
    if record is None or "content_hash" not in record:
        return
    key = _stat_key(folder)
    if _VERIFIED.get(str(folder)) == key:
        return
    problem = changed_file(folder, record)
    if problem is not None:
        raise ModelError(problem[0], file=problem[1])
    _VERIFIED[str(folder)] = key


def changed_file(folder: Path, record: dict[str, Any]) -> tuple[str, Path] | None:
    """(what, where) of the first difference between ``folder`` and its record, or None when it matches.

    A record lists every file's hash: they are compared one by one, the card aside (a record of an earlier
    release lists it too; it may since have been refreshed). A record without the list is checked by its
    content hash alone."""
    actual = file_hashes(folder)
    recorded = record.get("files")
    if recorded is None:
        if combined_hash(actual) != record.get("content_hash"):
            return (
                f"content changed since it was written (content hash differs from {RECORD}; "
                "delete the folder to rebuild it)",
                folder,
            )
        return None
    recorded = {rel: digest for rel, digest in recorded.items() if rel not in UNHASHED}
    for rel in sorted(set(recorded) | set(actual)):
        if rel not in actual:
            return "file missing since the folder was written (restore or rebuild it)", folder / rel
        if rel not in recorded:
            return f"file added after the folder was written (not in its {RECORD})", folder / rel
        if recorded[rel] != actual[rel]:
            return (
                "content changed since it was written (sha256 mismatch; corrupt or edited, "
                "delete the folder to rebuild it)",
                folder / rel,
            )
    return None


def recorded_hash(folder: Path) -> str:
    """The content hash a complete folder recorded (what later stages key their caches on)."""
    record = read_record(folder)
    if record is None:
        raise FileNotFoundError(f"{folder} is not a complete domainbert artifact (no {RECORD})")
    return str(record["content_hash"])
