"""Process groups and devices: rank and world size, cross-rank sums, and which device a run uses.

A lone process behaves as a world of one, so training loops need no special case. Used by pretraining and
fine-tuning alike; it starts no processes (``core.processes`` runs launchers) and joins no group.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping

import torch
import torch.distributed as dist

from domainbert.core.errors import ModelError


def dist_info() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside a process group."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def sum_across(values: list[float]) -> list[float]:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def mean_across(value: float) -> float:
    return sum_across([value])[0] / dist_info()[1]


def weights_digest(weights: Mapping[str, torch.Tensor]) -> str:
    """SHA-256 of a state dict: each tensor's name, dtype, shape and bytes, in name order."""
    digest = hashlib.sha256()
    for name in sorted(weights):
        tensor = weights[name].detach().cpu().contiguous()
        digest.update(f"{name}|{tensor.dtype}|{tuple(tensor.shape)}|".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def replica_digests(weights: Mapping[str, torch.Tensor]) -> list[str]:
    """Every rank's ``weights_digest`` of its full weights, in rank order (one entry outside a group).

    Data-parallel replicas must end equal; ranks on several machines that do not (a rank that missed a
    gradient, a rank on another library version) would save a model no rank trained.

    Raises:
        RuntimeError: the ranks' weights differ (raised on every rank, so all of them stop).
    """
    mine = weights_digest(weights)
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return [mine]
    digests: list[str | None] = [None] * dist.get_world_size()
    dist.all_gather_object(digests, mine)
    found = [str(d) for d in digests]
    if len(set(found)) > 1:
        raise RuntimeError(f"the ranks' weights differ after training (SHA-256 per rank: {found})")
    return found


def native_bf16(dev: torch.device) -> bool:
    """Does ``dev`` compute bf16 matrix products in hardware? A CUDA GPU that supports bf16; a CPU with
    AVX512-BF16 or AMX. Elsewhere (an AVX2-only x86 CPU, for one) torch emulates bf16 and autocast to it makes
    training many times slower than fp32 (bench/results/cpu_precision_cpu-avx2_2026-11.md)."""
    if dev.type == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    if dev.type == "cpu":
        cpu = torch.cpu
        return bool(cpu._is_avx512_bf16_supported() or cpu._is_amx_tile_supported())
    return False


def resolve_precision(precision: str, dev: torch.device) -> str:
    """``pretrain.precision`` as run on ``dev``: 'auto' is bf16 where the device computes it natively, else fp32."""
    if precision == "auto":
        return "bf16" if native_bf16(dev) else "fp32"
    return precision


def resolve_device(device: str, precision: str) -> tuple[torch.device, torch.dtype | None]:
    """The torch device and the autocast dtype (None: fp32) of ``finetune.device`` and ``finetune.precision``;
    in a process group of several on CUDA, this rank's GPU (``parallel.rank_device``).

    Raises:
        ModelError: a CUDA device was asked for on a machine without one, or fp16 on the CPU.
    """
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    dev = torch.device(device)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ModelError(f"finetune.device is {device!r} but torch sees no CUDA device (use 'auto' or 'cpu')")
    if dev.type == "cuda" and dist_info()[1] > 1:
        dev = rank_device(dev)
    if precision == "auto":
        precision = "bf16" if dev.type == "cuda" and native_bf16(dev) else "fp32"  # CPU bf16: pretraining only
    if precision == "fp16" and dev.type != "cuda":
        raise ModelError("finetune.precision fp16 needs a CUDA device (use bf16 or fp32 on the CPU)")
    return dev, {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[precision]


def rank_device(dev: torch.device) -> torch.device:
    """This rank's GPU, ``cuda:LOCAL_RANK``, for a run on CUDA with several processes.

    Raises:
        ModelError: ``finetune.device`` names one GPU, or this rank has no GPU of its own.
    """
    from domainbert.core.errors import ModelError

    if dev.index is not None:
        raise ModelError(
            f"finetune.device {str(dev)!r} names one GPU, but each of several processes takes its "
            "own (cuda:LOCAL_RANK): use 'auto' or 'cuda'",
            field="finetune.device",
        )
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if local >= torch.cuda.device_count():
        raise ModelError(
            f"process {local} has no GPU: torch sees {torch.cuda.device_count()}; lower finetune.num_processes",
            field="finetune.num_processes",
        )
    return torch.device("cuda", local)
