"""Fingerprints that survive a move: what a stage's output depends on, without where it happened to live.

A fingerprint is the sha256 of the canonical JSON of its parts (configs, content hashes of inputs, the code
version). Parts are made portable first: an absolute path under the project (the folder holding
``domains/``) becomes ``@project/<relative path>`` and one under this machine's cache ``@cache/<relative
path>``, so a run folder copied to shared storage, or read from another checkout of the same revision, keeps
its fingerprints. Inputs are identified by content (``file_identity``, ``folder_identity``), never by a
modification time, which a ``git clone`` or a ``cp`` resets.

Hashing a large input is cached per machine by path, size, modification time and inode (a changed file
changes one of them).
What this module leaves out: which parts a stage's fingerprint holds (the stages decide) and the records
themselves (``core.artifacts``).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from domainbert.core.paths import machine_cache, project_root

RECORD = "_domainbert.json"  # a finished folder's record (core.artifacts)
CARD = "README.md"  # its card: documentation a later stage may refresh
UNHASHED = frozenset({RECORD, CARD})  # top-level files a folder's content hash leaves out


def canonical_json(obj: object) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)


def _digest(obj: object) -> str:
    return hashlib.sha256(canonical_json(obj).encode()).hexdigest()


def _roots() -> list[tuple[str, str]]:
    roots = [(str(project_root()), "@project"), (str(machine_cache().resolve()), "@cache")]
    # The longest root first: a cache inside the project is named as the cache.
    return sorted(roots, key=lambda r: -len(r[0]))


def portable(obj: object, roots: list[tuple[str, str]] | None = None) -> object:
    """``obj`` with every absolute path under a known root rewritten relative to it (dicts, lists, strings)."""
    roots = _roots() if roots is None else roots
    if isinstance(obj, str):
        if os.path.isabs(obj):
            for root, name in roots:
                if obj == root or obj.startswith(root + os.sep):
                    return name + obj[len(root) :].replace(os.sep, "/")
        return obj
    if isinstance(obj, Mapping):
        return {portable(k, roots): portable(v, roots) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [portable(v, roots) for v in obj]
    return obj


def fingerprint(*parts: object) -> str:
    """sha256 (hex) of the canonical JSON of the portable ``parts``."""
    return _digest(portable(list(parts)))


def file_hash(path: Path, chunk: int = 1 << 20) -> str:
    """sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def file_identity(path: Path) -> str:
    """sha256 of a file's bytes, cached on this machine by its path, size, modification time and inode."""
    path = Path(path).resolve()
    st = path.stat()
    key = _digest([str(path), st.st_size, st.st_mtime_ns, st.st_ino])
    cached = machine_cache() / "file-hashes" / key[:2] / key
    try:
        return cached.read_text().strip()
    except OSError:
        pass
    digest = file_hash(path)
    try:
        cached.parent.mkdir(parents=True, exist_ok=True)
        tmp = cached.with_name(f".{key}.{os.getpid()}")
        tmp.write_text(digest)
        os.replace(tmp, cached)
    except OSError:  # a read-only cache costs a rehash next time, nothing else
        pass
    return digest


def folder_identity(folder: Path, recorded: str | None = None) -> str:
    """A folder's content: the content hash its record holds (``recorded``), else one over its files' relative
    paths and ``file_identity`` (the record and the card left out, as ``artifacts.content_hash`` does)."""
    if recorded:
        return recorded
    folder = Path(folder)
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel not in UNHASHED:
            h.update(rel.encode() + b"\0" + file_identity(path).encode())
    return h.hexdigest()
