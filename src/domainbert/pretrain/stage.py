"""The pretraining stage: ``pretrain_arm(cfg, arm, layout) -> summary``.

Before a checkpoint-based arm it makes a base without an MLM head a masked-LM (``base_warmup.py``), before a
task-adaptive arm it builds the task text (``task_text.py``); both are skipped when up to date.
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
from domainbert.config.pretrain import ARMS, LrScheduleConfig, split_replicate
from domainbert.config.start_from import start_of
from domainbert.core.artifacts import fingerprint, is_complete, read_record
from domainbert.core.errors import ConfigError
from domainbert.core.fingerprints import folder_identity
from domainbert.core.models import resolve_model_ref
from domainbert.core.paths import RunLayout
from domainbert.pretrain.base_warmup import ensure_base_warmup
from domainbert.pretrain.checkpoint import STATE
from domainbert.pretrain.general_text import ensure_general_text
from domainbert.pretrain.replay_text import ensure_replay_text, replay_text_dir
from domainbert.pretrain.start import arm_start
from domainbert.pretrain.task_text import data_dir, ensure_task_text

log = logging.getLogger(__name__)
RESULT_FIELDS = ("steps", "budget_tokens", "seq_len", "seq_len_schedule", "batch_size", "grad_accum", "lr")


def folder_hash(folder: Path) -> str:
    record = read_record(folder)
    return folder_identity(folder, str(record["content_hash"]) if record else None)


def arm_fingerprint(cfg: DomainConfig, arm: str, layout: RunLayout) -> str:
    """What the arm's result depends on: the pretrain and base-model config, the corpus and the start point.

    The launch settings (process count, launcher) and the CPU thread count are left out: they change speed,
    not the recipe.
    """
    arm, replicate = split_replicate(arm)
    layout = layout.for_replicate(replicate) if replicate > 1 else layout
    kind = ARMS[arm]
    pretrain = resolved_dict(cfg.pretrain.for_arm(arm, layout.replicate))
    pretrain.pop("replicates")  # how many replicates the run trains is not this one's recipe (its seed is)
    # Which other arms the run trains is not this arm's recipe: adding an arm to a finished run, or running
    # fewer (the demo), must not retrain every arm.
    pretrain.pop("arms")
    # Speed, what is watched (eval_every draws nothing from the training RNG), or settings of other steps.
    for key in ("launch", "torch_threads", "eval_every", "watch_points", "watch_share", "arm_optim", "base_warmup"):
        pretrain.pop(key, None)
    if pretrain.get("scratch_model") is None or not kind.from_scratch:
        pretrain.pop("scratch_model", None)  # unset, or not this arm's: fingerprints from before it stay current
    _drop_default_recipes(pretrain, cfg.pretrain.replay.replays(arm))
    own_start = pretrain.pop("start_from", {}).get(arm)  # other arms' starts are not this arm's recipe
    if own_start is not None:
        pretrain["start_from"] = own_start
    if cfg.pretrain.objective(arm) == "mlm":
        pretrain.pop("rtd", None)  # fingerprints of masked-LM arms stay those from before the setting
    else:
        pretrain["rtd"].pop("arms")  # which other arms use it is not this arm's recipe
    if kind.on_task_text:
        pretrain.pop("budget_tokens")  # the task text's tokens x tapt.epochs: its folder and tapt are here
    else:
        pretrain.pop("tapt")
    data = data_dir(layout, arm)
    inputs = {"corpus": folder_hash(data) if data.is_dir() else "not built", **_start_inputs(cfg, arm, layout)}
    if cfg.pretrain.replay.replays(arm):
        replayed = replay_text_dir(layout)
        inputs["replay"] = folder_hash(replayed) if replayed.is_dir() else "not built"
    config = {
        "arm": arm,
        "pretrain": pretrain,
        "base_model": cfg.base_model.recipe(),
        "tokenizer": resolved_dict(cfg.tokenizer) if kind.from_scratch else None,
    }
    return fingerprint(config, inputs, __version__)


def _start_inputs(cfg: DomainConfig, arm: str, layout: RunLayout) -> dict[str, str]:
    """The arm's start point among its fingerprint's inputs. An arm started from another arm's checkpoint
    (``pretrain.start_from``) names that arm's fingerprint and the step: known before the source has trained
    (``plan``), and changed when the source's recipe or the step does."""
    checkpoint = start_of(cfg.pretrain.start_from, arm)
    if checkpoint is not None:
        return {"start": f"{arm_fingerprint(cfg, checkpoint.arm, layout)}@{checkpoint.step}"}
    start = arm_start(cfg, arm, layout)
    resolved = resolve_model_ref(start.source) if ARMS[arm].start == "base" else start.source
    inputs = {"start": folder_hash(Path(resolved)) if Path(resolved).is_dir() else resolved}
    if ARMS[arm].start == "extended" and start.warm_head is not None:
        inputs["head"] = folder_hash(start.warm_head)
    return inputs


def _drop_default_recipes(pretrain: dict[str, Any], replays: bool) -> None:
    """Leave the schedule, masking-schedule and replay settings out of ``pretrain`` (an arm's fingerprinted
    recipe) where they are the defaults, so that fingerprints from before the settings stay current; keep a
    replaying arm's fraction and source (which other arms replay is not its recipe)."""
    if pretrain.get("lr_schedule") == LrScheduleConfig().model_dump(mode="json"):
        pretrain.pop("lr_schedule")
    if not pretrain.get("mask_schedule"):
        pretrain.pop("mask_schedule", None)
    replay = pretrain.pop("replay", None)
    if replays and replay is not None:
        pretrain["replay"] = {"fraction": replay["fraction"], "source": replay["source"]}


def _check_start(cfg: DomainConfig, arm: str, layout: RunLayout) -> None:
    """Refuse to start ``arm`` from a checkpoint its source arm made under another recipe (the source's config
    changed and it has not trained again): the arm would start from weights its fingerprint does not name.

    Raises:
        ConfigError: the checkpoint is missing, damaged or stale (one line naming the field).
    """
    start = start_of(cfg.pretrain.start_from, arm)
    if start is None:
        return
    folder = arm_start(cfg, arm, layout).source  # kept and intact, or ConfigError
    made_by = json.loads((Path(folder) / STATE).read_text()).get("fingerprint")
    if made_by != arm_fingerprint(cfg, start.arm, layout):
        raise ConfigError(
            f"{start.arm}'s checkpoint at step {start.step} is from another configuration of {start.arm}: "
            f"pretrain {start.arm} first",
            field=f"pretrain.start_from.{arm}.arm",
        )


def read_summary(layout: RunLayout, arm: str) -> dict[str, Any]:
    return json.loads((Path(layout.pretrain(arm)) / "summary.json").read_text())


def pretrain_arm(cfg: DomainConfig, arm: str, layout: RunLayout) -> dict[str, Any]:
    """Pretrain one arm of a domain on its token budget.

    Args:
        cfg: the ``DomainConfig``.
        arm: ``continued``, ``extended`` or ``scratch`` (one of ``cfg.pretrain.arms``), or ``<arm>@r<r>`` for its
            pretraining replicate ``r`` (``pretrain.replicates``): the same start and text under its own seed.
        layout: the ``RunLayout``; reads ``corpus``, ``tokenizer``/``extended_model``, writes ``pretrain(arm)``.

    Returns:
        The summary (also in ``layout.pretrain(arm)/summary.json``).

    Raises:
        ConfigError, ModelError, DataError: bad config, inconsistent model/tokenizer, missing corpus.
    """
    arm, replicate = split_replicate(arm)
    if arm not in cfg.pretrain.arms:
        raise ConfigError(f"arm {arm!r} is not in this domain's arms {cfg.pretrain.arms}", field="pretrain.arms")
    if replicate > cfg.pretrain.replicates:
        raise ConfigError(
            f"{arm} has {cfg.pretrain.replicates} replicate(s), not {replicate}", field="pretrain.replicates"
        )
    layout = layout.for_replicate(replicate) if replicate > 1 else layout
    kind = ARMS[arm]
    if not kind.from_scratch:
        ensure_base_warmup(cfg, layout)
    if kind.on_task_text:
        ensure_task_text(cfg, layout, curated=kind.data == "curated")
    if kind.on_general_text:
        ensure_general_text(cfg, layout)
    if cfg.pretrain.replay.replays(arm):
        ensure_replay_text(cfg, layout)
    fp = arm_fingerprint(cfg, arm, layout)
    _check_start(cfg, arm, layout)
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
    cmd = build_command(launch, worker_args(config_path, arm, Path(layout.root), fp, replicate=layout.replicate))
    run_command(cmd, out_dir / "launch.log")
    return read_summary(layout, arm)
