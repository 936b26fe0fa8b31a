"""Process-level set-up of a training run: the process group, seeds, CPU threads and autocast dtype.

Pretraining runs as one process or as several under ``torchrun``/``deepspeed`` (gloo on CPU, NCCL on GPUs);
the helpers here make a lone process behave as a world of one, so the loop needs no special case. This
module does not start processes (``launch.py`` does).
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Iterator

import numpy as np
import torch
import torch.distributed as dist

from domainbert.core import signals
from domainbert.core.distributed import resolve_precision, sum_across


def stop_agreed(world: int) -> bool:
    """Whether any rank got a stop signal (all ranks must stop at the same step)."""
    stop = float(signals.stop_requested())
    return (sum_across([stop])[0] if world > 1 else stop) > 0


def init_distributed(use_deepspeed: bool) -> None:
    """Join the process group the launcher set up (gloo on CPU); a lone DeepSpeed process gets a world of 1."""
    if dist.is_initialized():
        return
    if use_deepspeed:
        for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")):
            os.environ.setdefault(key, value)
        if "MASTER_PORT" not in os.environ:
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ["MASTER_PORT"] = str(s.getsockname()[1])
        from domainbert.core.extras import require

        deepspeed = require("deepspeed", "deepspeed", "pretrain.deepspeed.enabled")
        if not torch.cuda.is_available():
            _without_shm_comm_op()
        deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    elif int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def _without_shm_comm_op() -> None:
    """DeepSpeed's CPU backend compiles a shared-memory all-reduce op as it starts (minutes on a 2-core CPU, once
    per machine and extensions cache) that only its inference all-reduce uses; training reduces through
    torch.distributed (gloo), so the op is not built."""
    import importlib

    # importlib, not `import deepspeed.comm.torch as m`: that reads attribute `torch` of deepspeed.comm, which is
    # the torch package its star import brings in
    backend = importlib.import_module("deepspeed.comm.torch")
    backend.build_shm_op = lambda: None  # type: ignore[attr-defined]  # read by its TorchBackend at start


def local_device() -> torch.device:
    """This rank's GPU (``LOCAL_RANK``) when there is one, else the CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
    return torch.device("cpu")


def seed_everything(seed: int, rank: int) -> None:
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    torch.manual_seed(seed + rank)


def autocast_dtype(precision: str, device: torch.device | None = None) -> torch.dtype | None:
    """The autocast dtype of ``pretrain.precision`` on ``device`` (default: the CPU); None: fp32."""
    resolved = resolve_precision(precision, device or torch.device("cpu"))
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(resolved)


def default_threads() -> int:
    """torch's documented default: ``OMP_NUM_THREADS`` when set, else one thread per core this process may use.

    Computed afresh rather than read from torch: torch sizes its pool from the environment it saw when it was
    loaded, and a library that set ``OMP_NUM_THREADS=1`` for a moment then (a local Dask cluster spawning its
    workers does) would leave this process training on one core for good.
    """
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """Run with ``threads`` CPU threads for torch (None: ``default_threads()``), restoring the previous count after."""
    previous = torch.get_num_threads()
    torch.set_num_threads(threads or default_threads())
    try:
        yield
    finally:
        torch.set_num_threads(previous)
