"""Resumable checkpoints: ``checkpoints/step-<N>/`` with the engine state (weights as safetensors, optimizer,
scheduler; or DeepSpeed's per-rank shards), each rank's RNG states, and ``trainer_state.json`` (step, tokens,
loss curve, step-0 evaluations, data position) written LAST by rank 0: a folder without it is incomplete
(the process was killed while saving) and is ignored and removed. The newest complete ``keep`` checkpoints
are kept. Resuming on a different GPU count under ZeRO needs a DeepSpeed universal checkpoint
(``python -m deepspeed.checkpoint.ds_to_universal``, see deploy/README.md); the data position and masks are
global, so they carry over unchanged.
"""

from __future__ import annotations

import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import torch

from domainbert.artifacts import write_json_atomic

STATE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


def rng_state() -> dict[str, Any]:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


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


def save_checkpoint(root: Path, step: int, engine, trainer_state: dict[str, Any], *, rank: int = 0,
                    barrier=None) -> Path:
    """Write checkpoint ``step`` (every rank calls this) and prune old ones (rank 0)."""
    folder = root / f"step-{step}"
    if rank == 0 and folder.exists():
        shutil.rmtree(folder)  # an incomplete leftover of a killed run
    if barrier:
        barrier()
    folder.mkdir(parents=True, exist_ok=True)
    engine.save(folder)
    torch.save(rng_state(), folder / f"rng-rank{rank}.pt")
    if barrier:
        barrier()
    if rank == 0:
        write_json_atomic(folder / STATE, trainer_state)
    if barrier:
        barrier()
    return folder


def prune_checkpoints(root: Path, keep: int) -> None:
    """Keep the newest ``keep`` complete checkpoints; remove older ones and incomplete folders."""
    complete = list_checkpoints(root)
    for _, path in complete[:-keep]:
        shutil.rmtree(path, ignore_errors=True)
    newest = complete[-1][0] if complete else -1
    for child in root.iterdir() if root.is_dir() else []:
        match = _STEP_DIR.match(child.name)
        if match and not (child / STATE).is_file() and int(match.group(1)) < newest:
            shutil.rmtree(child, ignore_errors=True)


def load_checkpoint(folder: Path, engine, *, rank: int = 0) -> dict[str, Any]:
    """Restore the engine and this rank's RNG; returns the trainer state."""
    engine.load(folder)
    rng = folder / f"rng-rank{rank}.pt"
    if rng.is_file():  # absent when resuming on more ranks than were saved
        set_rng_state(torch.load(rng, weights_only=False))
    return json.loads((folder / STATE).read_text())


def consolidate_zero_checkpoint(folder: Path) -> dict[str, torch.Tensor]:
    """Full fp32 weights from a DeepSpeed ZeRO checkpoint folder (any stage, any number of ranks), keys
    as in the Hugging Face model (wrapper prefixes stripped); the offline equivalent of ``zero_to_fp32.py``."""
    from deepspeed.utils.zero_to_fp32 import get_fp32_state_dict_from_zero_checkpoint

    from domainbert.pretrain.outputs import strip_wrappers

    return strip_wrappers(get_fp32_state_dict_from_zero_checkpoint(str(folder), tag="ds"))
