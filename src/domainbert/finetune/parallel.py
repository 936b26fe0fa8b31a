"""Data-parallel fine-tuning: one run over several processes (``finetune.num_processes``), started by torchrun.

With ``num_processes`` above 1, ``stage.finetune_one`` does not train in its own process: ``launch_run``
saves the resolved config and starts ``torchrun --standalone --nproc_per_node N -m domainbert.finetune.worker``
(output written to ``<run>/launch/finetune/<model>/<task>/seed-N/launch.log``), waits for it and reads the
result that rank 0 wrote. Inside the workers the loop (``trainer.fit``) uses the helpers here:

- every rank draws the same batches of ``finetune.batch_size`` examples (the global batch) and takes its
  strided slice (``rank_share``); its mean loss is scaled so that DistributedDataParallel's mean of the
  ranks' gradients is the gradient of the global batch's mean loss (per labelled token for NER, per example
  for classification), so the optimisation does not depend on the process count, only dropout masks do;
- one all-reduce per step (``agree_step``) gives every rank the global batch's loss (history, collapse check,
  the non-finite check) and a stop signal any rank received, so all ranks stop at the same step;
- rank 0 alone evaluates, and ``broadcast`` hands its metrics (and, at the end, its whole output) to the
  others, so early stopping and the kept weights are decided once; rank 0 alone writes the result.

GPUs: each rank runs on ``cuda:LOCAL_RANK`` with NCCL; on the CPU the ranks talk over gloo. A lone process
never comes here: the single-process loop is unchanged. What this leaves out: several nodes, gradient
accumulation, and sharded (ZeRO) optimisers, which fine-tuning an encoder does not need.
"""

from __future__ import annotations

import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist

from domainbert.core import signals
from domainbert.core.distributed import dist_info, rank_device

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout
    from domainbert.finetune.jobs import Job

logger = logging.getLogger(__name__)
WORKER = "domainbert.finetune.worker"
LAUNCH_LOG = "launch.log"


def launches(num_processes: int) -> bool:
    """Whether a run must start its own processes: more than one asked for, and not inside them already."""
    return num_processes > 1 and dist_info()[1] == 1


def _units(feature: dict[str, Any]) -> int:
    """What the model's mean loss averages over in one example: its labelled tokens (NER) or the example."""
    labels = feature["labels"]
    if isinstance(labels, list) and labels and not isinstance(labels[0], float):
        return sum(1 for label in labels if label != -100)
    return 1  # a class id, or a multi-hot row (the loss averages over examples x labels: the same weights)


def rank_share(batch: list[int], features: list[dict[str, Any]], rank: int, world: int) -> tuple[list[int], float]:
    """This rank's examples of a global batch and the factor its mean loss is multiplied by.

    Strided slices, because the batch is sorted by length: every rank gets the same mix of long and short
    examples. The factor is ``world * units(slice) / units(batch)``: DDP averages the ranks' gradients, so the
    sum of the scaled losses over ranks divided by ``world`` is the mean over the whole batch. A rank left
    without an example (a last batch smaller than the world) runs its forward pass on one example with a
    factor of 0, since every rank must take part in every gradient all-reduce.
    """
    mine = batch[rank::world]
    if not mine:
        return batch[:1], 0.0
    total = sum(_units(features[i]) for i in batch)
    return mine, world * sum(_units(features[i]) for i in mine) / total if total else 0.0


def agree_step(loss: torch.Tensor, weight: float, world: int, where: str) -> tuple[torch.Tensor, float]:
    """The scaled loss to backpropagate and the global batch's mean loss, agreed with one all-reduce.

    Raises:
        StopRequested: on every rank, when any rank received SIGTERM/SIGUSR1.
    """
    scaled = loss * weight
    stop = float(signals.stop_requested())
    shared = torch.tensor([scaled.item() / world, stop], dtype=torch.float64, device=loss.device)
    dist.all_reduce(shared)
    if shared[1].item() > 0:
        raise signals.StopRequested(signals.requested_signal() or signal.SIGTERM, where)
    return scaled, float(shared[0].item())


def broadcast(obj: Any) -> Any:
    """Rank 0's ``obj`` on every rank (what the other ranks pass is ignored)."""
    box = [obj]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def wrap(model: torch.nn.Module, dev: torch.device) -> torch.nn.Module:
    """The model under DistributedDataParallel; rank 0's initial weights are broadcast to the others."""
    from torch.nn.parallel import DistributedDataParallel

    # find_unused_parameters: the mean-pooling classifier leaves its encoder's pooler out of the graph.
    # The buffers (position and token type ids) never change, so they are not broadcast every step.
    return DistributedDataParallel(
        model,
        device_ids=[dev.index] if dev.type == "cuda" else None,
        find_unused_parameters=True,
        broadcast_buffers=False,
    )


def init_group(device: str) -> None:
    """Join the group torchrun set up: NCCL with this rank's GPU when the run is on CUDA, else gloo."""
    from domainbert.core.distributed import resolve_device

    if dist.is_initialized():
        return
    dev, _ = resolve_device(device, "fp32")  # before the group exists: 'cuda' or 'cpu'
    if dev.type == "cuda":
        torch.cuda.set_device(rank_device(dev))
    dist.init_process_group("nccl" if dev.type == "cuda" else "gloo")


def launch_dir(layout: RunLayout, job: Job) -> Path:
    return Path(layout.root) / "launch" / "finetune" / job.model_name / job.task_name / f"seed-{job.seed}"


def launch_log(layout: RunLayout, job: Job) -> Path:
    """Where a launched run's processes write their output (the Prefect task follows it)."""
    return launch_dir(layout, job) / LAUNCH_LOG


def launch_command(num_processes: int, args: list[str], python: str = sys.executable) -> list[str]:
    # --standalone: a rendezvous on a free local port, so parallel runs on one machine do not collide.
    return [
        python,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        str(num_processes),
        "-m",
        WORKER,
        *args,
    ]


def launch_run(cfg: DomainConfig, layout: RunLayout, job: Job) -> Path:
    """Run ``job`` under torchrun with ``cfg.finetune.num_processes`` ranks; returns the launch log.

    Raises:
        RuntimeError: a rank failed (the message holds the log's tail).
    """
    from domainbert.config.domain import save_run_config
    from domainbert.core.processes import run_command

    folder = launch_dir(layout, job)
    config_path = save_run_config(cfg, folder / "run_config.json")
    args = [
        "--config",
        str(config_path),
        "--run-dir",
        str(layout.root),
        "--model-name",
        job.model_name,
        "--model-ref",
        job.model_ref,
        "--task",
        job.task_name,
        "--seed",
        str(job.seed),
        "--mode",
        job.mode,
    ]
    log = launch_log(layout, job)
    logger.info(
        "%s/%s/seed-%d on %d processes (torchrun; log %s)",
        job.model_name,
        job.task_name,
        job.seed,
        cfg.finetune.num_processes,
        log,
    )
    run_command(launch_command(cfg.finetune.num_processes, args), log)
    return log
