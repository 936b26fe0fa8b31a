"""Command lines that start the training processes: the ``deepspeed`` launcher (one machine or many, via a
hostfile) or ``torchrun``. Each process runs ``python -m domainbert.pretrain.worker`` on a saved, resolved
domain config, so every rank trains on exactly the config the stage validated.
For Slurm see ``deploy/slurm/pretrain.sbatch`` (it calls the same worker). This module only builds and runs
commands; it does not train.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

from domainbert.config import resolved_dict
from domainbert.errors import ConfigError

log = logging.getLogger(__name__)
WORKER = "domainbert.pretrain.worker"


def save_run_config(cfg, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(resolved_dict(cfg), indent=2, sort_keys=True) + "\n")
    return path


def worker_args(config_path: Path, arm: str, run_dir: Path, fingerprint: str, throttle_s: float = 0.0) -> list[str]:
    args = ["--config", str(config_path), "--arm", arm, "--run-dir", str(run_dir), "--fingerprint", fingerprint]
    return args + (["--throttle", str(throttle_s)] if throttle_s else [])


def build_command(launch, args: list[str], python: str = sys.executable) -> list[str]:
    """The full command for ``launch`` (a ``LaunchConfig``).

    Raises:
        ConfigError: a hostfile that does not exist.
    """
    if launch.launcher == "deepspeed":
        cmd = [python, "-m", "deepspeed.launcher.runner", "--master_port", str(launch.master_port)]
        if launch.hostfile:
            if not Path(launch.hostfile).is_file():
                raise ConfigError("hostfile not found", file=launch.hostfile, field="pretrain.launch.hostfile")
            cmd += ["--hostfile", str(launch.hostfile), "--num_nodes", str(launch.num_nodes),
                    "--num_gpus", str(launch.num_processes)]
        else:
            # --num_gpus works without GPUs (CPU ranks over gloo); localhost keeps it off any hostfile.
            cmd += ["--num_gpus", str(launch.num_processes)]
        return cmd + ["--module", WORKER] + args
    if launch.launcher == "torchrun":
        cmd = [python, "-m", "torch.distributed.run", "--nproc_per_node", str(launch.num_processes),
               "--nnodes", str(launch.num_nodes), "--master_port", str(launch.master_port)]
        return cmd + ["-m", WORKER] + args
    return [python, "-m", WORKER] + args


def run_command(cmd: list[str], log_path: Path, env: dict[str, str] | None = None) -> None:
    """Run ``cmd`` with output teed to ``log_path``; a non-zero exit raises RuntimeError with the log's tail."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log.info("launching: %s", " ".join(cmd))
    full_env = {**os.environ, **(env or {})}
    with open(log_path, "ab") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=full_env, check=False)
    if proc.returncode != 0:
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"training processes failed (exit {proc.returncode}); log {log_path}:\n{tail}")
