"""Reading PyTorch pickle files without running code from them.

``torch.load`` unpickles, and a pickle can call any importable function: a file planted in a run folder (a
checkpoint's optimizer or RNG state) would run code as the user who resumes. Everything domainbert writes
with ``torch.save`` holds only tensors and plain values, so it is read back with ``weights_only=True``, and a
file that needs anything else is refused with a ``CheckpointError``. Files written by DeepSpeed, which loads
them itself with full unpickling, are vetted first with ``vet_pickle``: the globals they reference must be on
a short allowlist of the DeepSpeed classes its checkpoints legitimately hold. This module does not decide
which checkpoint to resume from (``pretrain/checkpoint.py`` does).

A model folder whose weights are only a ``pytorch_model.bin`` is not loaded at all (``core.models``); run as
``python -m domainbert.core.safeload FOLDER`` this module writes its ``model.safetensors`` from the tensors
alone (``convert_to_safetensors``), once, so that no pickle is read when the folder is used.
"""

from __future__ import annotations

import pickle
import sys
import zipfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from domainbert.core.errors import ModelError

# Classes DeepSpeed pickles into ZeRO optimizer states (loss scaler, stage enum, fragment addresses). Exact
# names only: a prefix would let a pickle reach any attribute chain under the package.
DEEPSPEED_GLOBALS = frozenset(
    {
        "deepspeed.runtime.fp16.loss_scaler.LossScaler",
        "deepspeed.runtime.fp16.loss_scaler.DynamicLossScaler",
        "deepspeed.runtime.zero.config.ZeroStageEnum",
        "deepspeed.utils.tensor_fragment.fragment_address",
    }
)


class CheckpointError(ModelError):
    """A checkpoint file is unreadable (truncated, corrupt) or refused (it would run code when loaded)."""


def safe_torch_load(path: Path) -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU; a refused or unreadable file is a ``CheckpointError``."""
    import torch

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        if "Weights only load failed" in first or "Unsupported global" in str(exc):
            raise CheckpointError(
                "refused to load: the file holds objects other than tensors and plain values "
                "(a tampered or foreign file; domainbert never writes one)",
                file=path,
            ) from None
        raise CheckpointError(f"cannot read (truncated or corrupt): {first}", file=path) from None
    except FileNotFoundError:
        raise CheckpointError("file missing", file=path) from None
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"cannot read (truncated or corrupt): {first}", file=path) from None


def vet_pickle(path: Path, allowed: Iterable[str] = DEEPSPEED_GLOBALS) -> None:
    """Refuse a torch pickle that references globals beyond the weights-only set and ``allowed``.

    Only the pickle's opcodes are read; nothing is executed.
    """
    from torch.serialization import get_unsafe_globals_in_checkpoint

    try:
        unsafe = get_unsafe_globals_in_checkpoint(str(path))
    except FileNotFoundError:
        raise CheckpointError("file missing", file=path) from None
    except Exception as exc:  # noqa: BLE001 - any parse failure means the file cannot be trusted or read
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"cannot read (truncated or corrupt): {first}", file=path) from None
    refused = sorted(set(unsafe) - set(allowed))
    if refused:
        raise CheckpointError(
            f"refused to load: the file references {', '.join(refused)} (a tampered or foreign "
            "file; domainbert's checkpoints never do)",
            file=path,
        )


def vet_folder(folder: Path, allowed: Iterable[str] = DEEPSPEED_GLOBALS) -> None:
    """``vet_pickle`` every ``*.pt`` file under ``folder``."""
    for path in sorted(Path(folder).rglob("*.pt")):
        vet_pickle(path, allowed)


def convert_to_safetensors(folder: Path) -> Path:
    """Write ``folder/model.safetensors`` from ``folder/pytorch_model.bin`` read with ``safe_torch_load``.

    Raises:
        CheckpointError: the pickle is refused or unreadable, holds no tensors, or is sharded (several files).
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    source = folder / "pytorch_model.bin"
    if not source.is_file():
        raise CheckpointError("no pytorch_model.bin to convert (a sharded one is not supported)", file=folder)
    state = safe_torch_load(source)
    if not isinstance(state, dict) or not state:
        raise CheckpointError("holds no state dict of tensors", file=source)
    # Tied weights share storage, which safetensors refuses: each tensor is saved as its own copy.
    tensors = {str(k): v.detach().contiguous().clone() for k, v in state.items()}
    out = folder / "model.safetensors"
    save_file(tensors, str(out), metadata={"format": "pt"})
    return out


def main(argv: list[str]) -> int:
    """Convert each folder named in ``argv``; one line per folder, exit 2 on the first error."""
    for folder in argv:
        try:
            print(f"wrote {convert_to_safetensors(Path(folder))}")
        except ModelError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
