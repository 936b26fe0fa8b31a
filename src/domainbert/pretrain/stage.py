"""The pretraining stage: ``pretrain_arm(cfg, arm, layout) -> summary``.

Before a checkpoint-based arm it warms up a missing MLM head (``head_warmup.py``, skipped when up to date).
Skips an arm whose model folder is complete with the same fingerprint (config, corpus hash, starting-point
hash); otherwise trains it, resuming from the newest checkpoint. With ``pretrain.launch.launcher: none``
(the offline default) it trains in this process; with ``deepspeed``/``torchrun`` it starts the processes
through ``launch.py`` and reads their summary. This module does not import Prefect (flows/ wraps it).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from domainbert import __version__
from domainbert.config.domain import DomainConfig, resolved_dict
from domainbert.core.artifacts import content_hash, fingerprint, is_complete, read_record
from domainbert.core.errors import ConfigError
from domainbert.core.models import resolve_model_ref
from domainbert.core.paths import RunLayout
from domainbert.pretrain.head_warmup import ensure_head_warmup
from domainbert.pretrain.start import arm_start

log = logging.getLogger(__name__)
RESULT_FIELDS = ("steps", "budget_tokens", "seq_len", "seq_len_schedule", "batch_size", "grad_accum", "lr")


def folder_hash(folder: Path) -> str:
    record = read_record(folder)
    return str(record["content_hash"]) if record else content_hash(folder)


def arm_fingerprint(cfg: DomainConfig, arm: str, layout: RunLayout) -> str:
    """What the arm's result depends on: the pretrain and base-model config, the corpus and the start point.

    The launch settings (process count, launcher) and the CPU thread count are left out: they change speed,
    not the recipe.
    """
    pretrain = resolved_dict(cfg.pretrain.for_arm(arm))
    # Speed, what is watched (eval_every draws nothing from the training RNG), or settings of other steps.
    for key in ("launch", "torch_threads", "eval_every", "arm_optim", "head_warmup"):
        pretrain.pop(key, None)
    start = arm_start(cfg, arm, layout)
    resolved = resolve_model_ref(start.source) if arm == "continued" else start.source
    inputs = {
        "corpus": folder_hash(Path(layout.corpus)),
        "start": folder_hash(Path(resolved)) if Path(resolved).is_dir() else resolved,
    }
    if arm == "extended" and start.warm_head is not None:
        inputs["head"] = folder_hash(start.warm_head)
    config = {
        "arm": arm,
        "pretrain": pretrain,
        "base_model": cfg.base_model.recipe(),
        "tokenizer": resolved_dict(cfg.tokenizer) if arm == "scratch" else None,
    }
    return fingerprint(config, inputs, __version__)


def read_summary(layout: RunLayout, arm: str) -> dict[str, Any]:
    return json.loads((Path(layout.pretrain(arm)) / "summary.json").read_text())


def pretrain_arm(cfg: DomainConfig, arm: str, layout: RunLayout) -> dict[str, Any]:
    """Pretrain one arm of a domain on its token budget.

    Args:
        cfg: the ``DomainConfig``.
        arm: ``continued``, ``extended`` or ``scratch`` (one of ``cfg.pretrain.arms``).
        layout: the ``RunLayout``; reads ``corpus``, ``tokenizer``/``extended_model``, writes ``pretrain(arm)``.

    Returns:
        The summary (also in ``layout.pretrain(arm)/summary.json``).

    Raises:
        ConfigError, ModelError, DataError: bad config, inconsistent model/tokenizer, missing corpus.
    """
    if arm not in cfg.pretrain.arms:
        raise ConfigError(f"arm {arm!r} is not in this domain's arms {cfg.pretrain.arms}", field="pretrain.arms")
    if arm != "scratch":
        ensure_head_warmup(cfg, layout)
    fp = arm_fingerprint(cfg, arm, layout)
    out_dir = Path(layout.pretrain(arm))
    if is_complete(Path(layout.pretrained_model(arm)), fp) and (out_dir / "summary.json").is_file():
        log.info("pretrain %s: skipped: up to date", arm)
        return read_summary(layout, arm)
    launch = cfg.pretrain.launch
    if launch.launcher == "none":
        from domainbert.pretrain.trainer import train_arm

        summary = train_arm(cfg, arm, layout, fingerprint=fp)
        assert summary is not None  # a single process is rank 0
        return summary
    from domainbert.config.domain import save_run_config
    from domainbert.core.processes import run_command
    from domainbert.pretrain.launch import build_command, worker_args

    config_path = save_run_config(cfg, out_dir / "run_config.json")
    cmd = build_command(launch, worker_args(config_path, arm, Path(layout.root), fp))
    run_command(cmd, out_dir / "launch.log")
    return read_summary(layout, arm)
