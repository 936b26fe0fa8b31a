"""Entry point of one fine-tuning process under torchrun: ``python -m domainbert.finetune.worker --config ...``.

Started by ``parallel.launch_run`` (``finetune.num_processes`` above 1). It validates the saved config again
(every rank trains on exactly what the stage checked), joins the process group (``parallel.init_group``) and
runs ``stage.finetune_one`` for one model x task x seed; rank 0 writes the result, the other ranks log
warnings only. It exits with 128 + the signal number after a graceful stop on SIGTERM/SIGUSR1, as the
pretraining worker does. This module does nothing else.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path

from domainbert.config.domain import DomainConfig
from domainbert.core import logs, signals
from domainbert.core.errors import USER_ERROR_MARK, DomainbertError
from domainbert.core.paths import RunLayout


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="domainbert fine-tuning worker (one process of a run)")
    parser.add_argument("--config", required=True, type=Path, help="resolved DomainConfig JSON")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--model-name", required=True)
    parser.add_argument("--model-ref", required=True)
    parser.add_argument("--task", required=True)
    parser.add_argument("--seed", required=True, type=int)
    parser.add_argument("--mode", required=True, choices=["finetune", "frozen"])
    args = parser.parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    logs.configure(logging.INFO if rank == 0 else logging.WARNING, prefix=f"rank {rank} ")
    import torch.distributed as dist

    from domainbert.finetune.parallel import init_group
    from domainbert.finetune.stage import finetune_one

    cfg = DomainConfig.model_validate(json.loads(args.config.read_text()))
    init_group(cfg.finetune.device)
    try:
        with signals.graceful_stop():
            finetune_one(
                cfg, RunLayout(args.run_dir), args.model_name, args.model_ref, args.task, args.seed, mode=args.mode
            )
    except signals.StopRequested as exc:
        logging.getLogger(__name__).warning("%s", exc)
        return signals.exit_code(exc.signum)
    except DomainbertError as exc:  # one line the launching process raises again (core.processes)
        print(f"{USER_ERROR_MARK}{exc}", file=sys.stderr, flush=True)
        return 2
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()  # a clean exit, so torchrun does not wait on a lingering group
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
