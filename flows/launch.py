"""Launch the pretraining trainer as a subprocess and stream its output into the Prefect log.

The command is the ``domainbert pretrain`` CLI for one arm, run by plain ``python -m``, ``torchrun``
(``torch.distributed.run``) or the ``deepspeed`` launcher (GPU count, hostfile for several nodes). The
stage resumes from its own checkpoints, so a retried task simply launches the same command again. The
child runs in its own process group; its pid is written to ``<pretrain arm folder>/launcher.pid`` so an
operator (or a test) can find it, and the whole group is killed if the task is cancelled or fails.
What this leaves out: building the DeepSpeed JSON and the training loop (both in ``domainbert.pretrain``).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

from .options import LaunchOptions, RunSpec

PID_FILE = "launcher.pid"


def cli_args(spec: RunSpec, arm: str) -> list[str]:
    """Arguments of ``domainbert pretrain`` that train exactly this arm of this run."""
    return ["pretrain", spec.domain, *spec.overrides, "--profile", spec.profile, "--out", str(spec.out), "--arm", arm]


def trainer_command(spec: RunSpec, arm: str, opts: LaunchOptions) -> list[str]:
    """The full launch command for ``opts.launcher`` (not ``inprocess``)."""
    module = ["domainbert.cli", *cli_args(spec, arm)]
    if opts.launcher == "python":
        return [sys.executable, "-m", *module]
    if opts.launcher == "torchrun":
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={opts.gpus}", f"--nnodes={opts.nodes}"]
        if opts.rdzv_endpoint:
            cmd += ["--rdzv_backend=c10d", f"--rdzv_endpoint={opts.rdzv_endpoint}"]
        return [*cmd, *opts.extra_args, "-m", *module]
    if opts.launcher == "deepspeed":
        cmd = [sys.executable, "-m", "deepspeed.launcher.runner", "--num_gpus", str(opts.gpus)]
        if opts.hostfile:
            cmd += ["--hostfile", opts.hostfile, "--num_nodes", str(opts.nodes)]
        return [*cmd, *opts.extra_args, "--module", *module]
    raise ValueError(f"launcher {opts.launcher!r} has no command (inprocess runs in the task)")


def _kill_group(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()


def run_streaming(cmd: list[str], logger: logging.Logger | logging.LoggerAdapter, pid_dir: Path,
                  env: dict[str, str] | None = None) -> None:
    """Run ``cmd``, log each output line, and raise ``RuntimeError`` if it exits non-zero.

    Args:
        cmd: the command (first element an executable).
        logger: where each line goes (the Prefect run logger in a task).
        pid_dir: folder that receives ``launcher.pid`` while the child runs.
        env: extra environment variables for the child.
    """
    pid_dir.mkdir(parents=True, exist_ok=True)
    pid_file = pid_dir / PID_FILE
    logger.info("launching: %s", " ".join(cmd))
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
                            start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})})
    pid_file.write_text(f"{proc.pid}\n")
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            line = line.rstrip()
            if line:
                logger.info("%s", line)
        rc = proc.wait()
    except BaseException:
        _kill_group(proc)
        raise
    finally:
        pid_file.unlink(missing_ok=True)
    if rc != 0:
        raise RuntimeError(f"trainer exited with status {rc}: {' '.join(cmd)}")
