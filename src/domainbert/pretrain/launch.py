"""Command lines that start the training processes: the ``deepspeed`` launcher (one machine or many, via a
hostfile) or ``torchrun``. Each process runs ``python -m domainbert.pretrain.worker`` on a saved, resolved
domain config, so every rank trains on exactly the config the stage validated.
For Slurm see ``deploy/slurm/pretrain.sbatch`` (it calls the same worker). This module only builds and runs
commands; it does not train.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

from domainbert.config.launch import LaunchConfig
from domainbert.core.errors import ConfigError

log = logging.getLogger(__name__)
WORKER = "domainbert.pretrain.worker"


def worker_args(
    config_path: Path, arm: str, run_dir: Path, fingerprint: str, throttle_s: float = 0.0, replicate: int = 1
) -> list[str]:
    args = ["--config", str(config_path), "--arm", arm, "--run-dir", str(run_dir), "--fingerprint", fingerprint]
    args += ["--replicate", str(replicate)] if replicate > 1 else []
    return args + (["--throttle", str(throttle_s)] if throttle_s else [])


def build_command(launch: LaunchConfig, args: list[str], python: str = sys.executable) -> list[str]:
    """The full command for ``launch`` (a ``LaunchConfig``).

    Raises:
        ConfigError: a hostfile that does not exist.
    """
    if launch.launcher == "deepspeed":
        cmd = [python, "-m", "deepspeed.launcher.runner", "--master_port", str(launch.master_port)]
        if launch.hostfile:
            if not Path(launch.hostfile).is_file():
                raise ConfigError("hostfile not found", file=launch.hostfile, field="pretrain.launch.hostfile")
            cmd += [
                "--hostfile",
                str(launch.hostfile),
                "--num_nodes",
                str(launch.num_nodes),
                "--num_gpus",
                str(launch.num_processes),
            ]
        else:
            # --num_gpus works without GPUs (CPU ranks over gloo); localhost keeps it off any hostfile.
            cmd += ["--num_gpus", str(launch.num_processes)]
        return cmd + ["--module", WORKER] + args
    if launch.launcher == "torchrun":
        cmd = [
            python,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            str(launch.num_processes),
            "--nnodes",
            str(launch.num_nodes),
            "--master_port",
            str(launch.master_port),
        ]
        return cmd + ["-m", WORKER] + args
    return [python, "-m", WORKER] + args
