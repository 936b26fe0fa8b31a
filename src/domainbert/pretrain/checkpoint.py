"""Resumable checkpoints: ``checkpoints/step-<N>/`` with the engine state (weights as safetensors, optimizer,
scheduler; or DeepSpeed's per-rank shards), the model's config, tokenizer and (for DeepSpeed, gathered)
Hugging Face weights so that every kept checkpoint loads with ``from_pretrained``, each rank's RNG states,
and ``trainer_state.json`` (step, tokens,
loss curve, step-0 evaluations, data position) written LAST by rank 0: a folder without it is incomplete
(the process was killed while saving) and is ignored and removed. The newest complete ``keep`` checkpoints
are kept. ``trainer_state.json`` also lists the size and sha256 of every file of the checkpoint; a checkpoint
whose files no longer match (truncated, bytes flipped) or that holds a pickle beyond tensors and plain values
is skipped with a warning and the previous one is used (``resume``). A checkpoint is written as
``.tmp-step-<N>/`` and renamed when complete, so a full disk leaves nothing under a final name; the disk
needs room for ``keep + 1`` checkpoints (the new one is written before the oldest is pruned). RNG states are saved as tensors and
plain lists, so every file is read with ``torch.load(weights_only=True)`` (``safeload.py``).
Resuming on a different GPU count under ZeRO needs a DeepSpeed universal checkpoint
(``python -m deepspeed.checkpoint.ds_to_universal``, see deploy/PRETRAIN.md); the data position and masks are
global, so they carry over unchanged.
"""

from __future__ import annotations

import json
import logging
import random
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from domainbert.core.artifacts import file_hash, write_json_atomic
from domainbert.core.errors import disk_errors
from domainbert.core.safeload import CheckpointError, safe_torch_load, vet_folder
from domainbert.pretrain.engine import Engine

log = logging.getLogger(__name__)
STATE = "trainer_state.json"
FILES = "files"  # the trainer_state key listing each file's size and sha256
_STEP_DIR = re.compile(r"^step-(\d+)$")
_TMP_PREFIX = ".tmp-step-"  # a checkpoint being written


def rng_state() -> dict[str, Any]:
    """Python, NumPy, torch and CUDA generator states as tensors and plain lists (weights-only loadable)."""
    version, internal, gauss = random.getstate()
    # numpy's stub types the default (legacy) call as a dict; the global MT19937 state is this tuple
    mt19937 = cast(tuple[str, np.ndarray, int, int, float], np.random.get_state())
    name, keys, pos, has_gauss, cached = mt19937
    return {
        "python": [version, torch.tensor(internal, dtype=torch.int64), gauss],
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), int(pos), int(has_gauss), float(cached)],
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
    }


def set_rng_state(state: dict[str, Any]) -> None:
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(int(x) for x in internal.tolist()), gauss))
    name, keys, pos, has_gauss, cached = state["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def file_manifest(folder: Path) -> dict[str, dict[str, Any]]:
    """Size and sha256 of every file under ``folder`` except the trainer state."""
    return {
        p.relative_to(folder).as_posix(): {"size": p.stat().st_size, "sha256": file_hash(p)}
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name != STATE
    }


def verify_checkpoint(folder: Path) -> dict[str, Any]:
    """The trainer state of a checkpoint whose files match its manifest and hold no unsafe pickle.

    Raises:
        CheckpointError: an unreadable state, a missing, resized or changed file, or a refused pickle.
    """
    try:
        state = json.loads((folder / STATE).read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"unreadable trainer state: {exc}", file=folder / STATE) from None
    for rel, want in (state.get(FILES) or {}).items():
        path = folder / rel
        if not path.is_file():
            raise CheckpointError("file missing (listed in the checkpoint's trainer state)", file=path)
        if path.stat().st_size != want["size"]:
            raise CheckpointError(
                f"truncated or resized: {path.stat().st_size} bytes, recorded {want['size']}", file=path
            )
        if file_hash(path) != want["sha256"]:
            raise CheckpointError("content changed since it was saved (sha256 mismatch)", file=path)
    vet_folder(folder)
    return state


def list_checkpoints(root: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints, oldest first."""
    if not root.is_dir():
        return []
    found = []
    for child in root.iterdir():
        match = _STEP_DIR.match(child.name)
        if match and (child / STATE).is_file():
            found.append((int(match.group(1)), child))
    return sorted(found)


def latest_checkpoint(root: Path) -> Path | None:
    found = list_checkpoints(root)
    return found[-1][1] if found else None


def save_checkpoint(
    root: Path,
    step: int,
    engine: Engine,
    trainer_state: dict[str, Any],
    *,
    rank: int = 0,
    barrier: Callable[[], None] | None = None,
    hf_view: Callable[[Path], None] | None = None,
) -> Path:
    """Write checkpoint ``step`` (every rank calls this) and prune old ones (rank 0).

    ``hf_view(folder)``, called on every rank after the engine's files, writes what makes the folder load with
    ``from_pretrained`` (config, tokenizer and, for DeepSpeed, the gathered weights; rank 0 writes).
    """
    # Written under a temporary name and renamed when complete: a full disk or a kill mid-save leaves
    # nothing under the final name, and the temporary folder (never matched as a checkpoint) is swept later.
    final, folder = root / f"step-{step}", root / f"{_TMP_PREFIX}{step}"
    if rank == 0 and folder.exists():
        shutil.rmtree(folder)  # an incomplete leftover of a killed run
    if barrier:
        barrier()
    try:
        with disk_errors(folder):
            folder.mkdir(parents=True, exist_ok=True)
            engine.save(folder)
            if hf_view is not None:
                hf_view(folder)
            torch.save(rng_state(), folder / f"rng-rank{rank}.pt")
            if barrier:
                barrier()
            if rank == 0:
                write_json_atomic(folder / STATE, {**trainer_state, FILES: file_manifest(folder)})
                if final.exists():  # a folder of the same step left by an older release
                    shutil.rmtree(final)
                folder.rename(final)
    except BaseException:
        if rank == 0:
            shutil.rmtree(folder, ignore_errors=True)  # give the space back at once
        raise
    if barrier:
        barrier()
    return final


def disk_needed(parameters: int, keep: int) -> tuple[int, int]:
    """(bytes of one checkpoint, bytes an arm needs at its peak) for a model of ``parameters``: fp32 weights and
    AdamW's two fp32 moments (12 bytes a parameter; the RNG states and config are small), ``keep + 1``
    checkpoints (a new one is complete before the oldest is pruned) and the final model's fp32 weights."""
    one = 12 * parameters
    return one, (keep + 1) * one + 4 * parameters


def prune_checkpoints(root: Path, keep: int, kept: frozenset[int] = frozenset()) -> None:
    """Keep the newest ``keep`` complete checkpoints and those of the steps in ``kept`` (other arms start from
    them); remove older ones and incomplete folders."""
    complete = list_checkpoints(root)
    for step, path in complete[:-keep]:
        if step not in kept:
            shutil.rmtree(path, ignore_errors=True)
    newest = complete[-1][0] if complete else -1
    for child in root.iterdir() if root.is_dir() else []:
        match = _STEP_DIR.match(child.name)
        if match and not (child / STATE).is_file() and int(match.group(1)) < newest:
            shutil.rmtree(child, ignore_errors=True)
        elif child.name.startswith(_TMP_PREFIX):  # a save cut short (prune runs after a save, on rank 0)
            shutil.rmtree(child, ignore_errors=True)


def load_checkpoint(folder: Path, engine: Engine, *, rank: int = 0) -> dict[str, Any]:
    """Verify, then restore the engine and this rank's RNG; returns the trainer state (without the manifest).

    Raises:
        CheckpointError: the checkpoint fails ``verify_checkpoint`` or a file cannot be read.
    """
    return _restore(folder, engine, verify_checkpoint(folder), rank)


def _restore(folder: Path, engine: Engine, state: dict[str, Any], rank: int) -> dict[str, Any]:
    rng = folder / f"rng-rank{rank}.pt"
    # Read before the engine is touched, so a bad RNG file leaves the engine as it was.
    rng_states = safe_torch_load(rng) if rng.is_file() else None  # absent when resuming on more ranks
    engine.load(folder)
    if rng_states is not None:
        set_rng_state(rng_states)
    state.pop(FILES, None)
    return state


def resume(
    root: Path, engine: Engine, *, fingerprint: str, rank: int = 0, barrier: Callable[[], None] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """Load the newest checkpoint under ``root`` that verifies; a bad one is skipped with a warning.

    Checkpoints are verified before the engine is touched, so a fallback starts from a clean engine. When
    the newest usable one belongs to another ``fingerprint`` (config, corpus or start point changed) every
    checkpoint is removed: a run never resumes from another recipe. Returns None when there is nothing to
    resume from.
    """
    candidates = list(reversed(list_checkpoints(root)))
    for i, (step, folder) in enumerate(candidates):
        try:
            state = verify_checkpoint(folder)
        except CheckpointError as exc:
            fallback = (
                "falling back to the previous one" if i + 1 < len(candidates) else "no earlier one: starting over"
            )
            log.warning("checkpoint step %d is unusable, %s: %s", step, fallback, exc)
            continue
        if state.get("fingerprint") != fingerprint:
            log.warning("checkpoints in %s belong to a different configuration; starting over", root)
            if barrier:
                barrier()
            if rank == 0:
                shutil.rmtree(root, ignore_errors=True)
            if barrier:
                barrier()
            return None
        return folder, _restore(folder, engine, state, rank)
    return None


def consolidate_zero_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """Full fp32 weights from a DeepSpeed ZeRO checkpoint folder (any stage, any number of ranks), keys
    as in the Hugging Face model (wrapper prefixes stripped); the offline equivalent of ``zero_to_fp32.py``."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    from domainbert.pretrain.outputs import strip_wrappers

    vet_folder(folder)  # zero_to_fp32 unpickles in full
    return strip_wrappers(get_fp32_state_dict_from_zero_checkpoint(str(folder), tag="ds"))
