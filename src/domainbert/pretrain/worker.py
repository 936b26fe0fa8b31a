"""Entry point of one training process: ``python -m domainbert.pretrain.worker --config resolved.json ...``.

Started by the ``deepspeed`` launcher, ``torchrun``, Slurm (deploy/slurm/pretrain.sbatch) or ``stage.py``.
It validates the saved config again (so each rank trains on exactly what the stage checked) and runs
``trainer.train_arm``. It exits with 128 + the signal number after a graceful stop on SIGTERM/SIGUSR1
(``domainbert.core.signals``). This module does nothing else.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from domainbert.config.domain import DomainConfig
from domainbert.config.pretrain import ARMS
from domainbert.core import logs
from domainbert.core.errors import USER_ERROR_MARK, DomainbertError
from domainbert.core.paths import RunLayout
from domainbert.core.signals import StopRequested, exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="domainbert pretraining worker (one process of a run)")
    parser.add_argument("--config", required=True, type=Path, help="resolved DomainConfig JSON")
    parser.add_argument("--arm", required=True, choices=list(ARMS))
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--replicate", type=int, default=1, help="the arm's pretraining replicate")
    parser.add_argument("--fingerprint", required=True)
    parser.add_argument("--throttle", type=float, default=0.0, help="seconds to sleep per step (tests)")
    parser.add_argument("--local_rank", type=int, default=None, help=argparse.SUPPRESS)  # deepspeed launcher
    args = parser.parse_args(argv)
    logs.configure(logging.INFO)
    from domainbert.pretrain.trainer import train_arm

    cfg = DomainConfig.model_validate(json.loads(args.config.read_text()))
    try:
        train_arm(
            cfg,
            args.arm,
            RunLayout(args.run_dir, args.replicate),
            fingerprint=args.fingerprint,
            throttle_s=args.throttle,
        )
    except StopRequested as exc:  # SIGTERM/SIGUSR1: checkpointed at a step boundary
        logging.getLogger(__name__).warning("%s", exc)
        return exit_code(exc.signum)
    except DomainbertError as exc:  # one line the launching process raises again (core.processes)
        print(f"{USER_ERROR_MARK}{exc}", file=sys.stderr, flush=True)
        return 2
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()  # a clean exit, so the launcher does not wait on a lingering group
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
