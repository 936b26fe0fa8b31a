"""The DeepSpeed JSON config: generated from the ``pretrain:`` section, or a user's file resolved against it.

The optimizer and scheduler are built in ``engine.py`` (AdamW, ``pretrain.lr_schedule``) and handed to
``deepspeed.initialize``, so the generated config carries no ``optimizer``/``scheduler`` blocks. A user's file
(``pretrain.deepspeed.config_file``, for example one written for the Hugging Face Trainer) is resolved the way
transformers' ``HfTrainerDeepSpeedConfig`` does (``trainer_config_process`` and ``trainer_config_finalize``):
every ``"auto"`` is filled from the domain config (batch fields, clipping, the optimizer's lr, betas, eps and
weight decay, the scheduler's warmup and total steps, fp16/bf16, and ZeRO bucket sizes from the hidden size),
an ``"auto"`` nothing fills, or a value that contradicts the domain config where DeepSpeed would not use it
(the client optimizer and scheduler win), is refused in one line naming the key. The batch fields are always
ours, so the token budget stays exact. Precision follows ``pretrain.precision`` only on CUDA: on CPU the
trainer uses bf16 autocast around an fp32 DeepSpeed engine. This module does not launch anything.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch

from domainbert.config.pretrain import PretrainConfig
from domainbert.core.distributed import resolve_precision
from domainbert.core.errors import ConfigError

log = logging.getLogger(__name__)


def build_ds_config(pcfg: PretrainConfig, world_size: int, *, total_steps: int, hidden_size: int) -> dict[str, Any]:
    """The DeepSpeed config of a run.

    Args:
        pcfg: the arm's ``PretrainConfig`` (``for_arm``: lr and warmup_ratio resolved).
        world_size: number of training processes (for ``train_batch_size``).
        total_steps: optimizer steps of the run (the scheduler's ``total_num_steps``).
        hidden_size: the model's hidden size (ZeRO bucket sizes given as ``"auto"``).

    Raises:
        ConfigError: the user's JSON cannot be read, has an ``"auto"`` nothing fills, or contradicts the
            domain config; one line naming the keys.
    """
    ds = pcfg.deepspeed
    batch = {
        "train_micro_batch_size_per_gpu": pcfg.batch_size,
        "gradient_accumulation_steps": pcfg.grad_accum,
        "train_batch_size": pcfg.batch_size * pcfg.grad_accum * world_size,
    }
    if ds.config_file:
        from_file = read_user_config(ds.config_file)
        from_file.update(batch)  # ours whatever the file says, so budgets stay exact
        return resolve_auto(from_file, pcfg, total_steps=total_steps, hidden_size=hidden_size, source=ds.config_file)
    zero: dict[str, Any] = {"stage": ds.zero_stage}
    if ds.zero_stage >= 1:
        zero.update({"contiguous_gradients": True, "overlap_comm": torch.cuda.is_available(), "reduce_scatter": True})
    if ds.offload_optimizer and ds.zero_stage >= 1:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    if ds.offload_params and ds.zero_stage == 3:
        zero["offload_param"] = {"device": "cpu", "pin_memory": torch.cuda.is_available()}
    if ds.zero_stage == 3:
        zero["stage3_gather_16bit_weights_on_model_save"] = True
    config: dict[str, Any] = {
        **batch,
        "gradient_clipping": pcfg.max_grad_norm,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,  # torch AdamW under ZeRO (as the HF Trainer does)
        "steps_per_print": 10**9,  # the trainer logs
        "wall_clock_breakdown": False,
    }
    if torch.cuda.is_available():
        precision = resolve_precision(pcfg.precision, torch.device("cuda"))
        if precision == "bf16":
            config["bf16"] = {"enabled": True}
        elif precision == "fp16":
            config["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return config


def _auto_values(
    config: dict[str, Any], pcfg: PretrainConfig, total_steps: int, hidden_size: int
) -> dict[str, tuple[Any, str, bool]]:
    """Key -> (value, the domain-config field it comes from, must a given value match)."""
    on_cuda = resolve_precision(pcfg.precision, torch.device("cuda"))
    cuda = torch.cuda.is_available()
    warmup = int(pcfg.warmup_share * total_steps)
    zero3 = (config.get("zero_optimization") or {}).get("stage") == 3
    wanted: dict[str, tuple[Any, str, bool]] = {
        "gradient_clipping": (pcfg.max_grad_norm, "pretrain.max_grad_norm", True),
        "optimizer.params.lr": (pcfg.lr, "pretrain.lr", True),
        "optimizer.params.betas": (list(pcfg.adam_betas), "pretrain.adam_betas", True),
        "optimizer.params.eps": (pcfg.adam_eps, "pretrain.adam_eps", True),
        "optimizer.params.weight_decay": (pcfg.weight_decay, "pretrain.weight_decay", True),
        "scheduler.params.warmup_min_lr": (0, "(linear warmup from 0)", False),
        "scheduler.params.warmup_max_lr": (pcfg.lr, "pretrain.lr", True),
        "scheduler.params.warmup_num_steps": (max(1, warmup), "pretrain.warmup_ratio x steps", True),
        "scheduler.params.total_num_steps": (total_steps, "the run's optimizer steps", True),
        "fp16.enabled": (cuda and on_cuda == "fp16", "pretrain.precision (on CUDA)", False),
        "bf16.enabled": (cuda and on_cuda == "bf16", "pretrain.precision (on CUDA)", False),
        "zero_optimization.reduce_bucket_size": (hidden_size * hidden_size, "hidden size squared", False),
    }
    if zero3:
        wanted["zero_optimization.stage3_prefetch_bucket_size"] = (
            int(0.9 * hidden_size * hidden_size),
            "0.9 x hidden size squared",
            False,
        )
        wanted["zero_optimization.stage3_param_persistence_threshold"] = (10 * hidden_size, "10 x hidden size", False)
    return wanted


def _warn_unused_types(config: dict[str, Any], source: str | Path) -> None:
    """An optimizer or scheduler type in the file that the trainer does not use is named in the log."""
    for block, allowed, ours in (
        ("optimizer", ("adamw", "adam"), "AdamW"),
        ("scheduler", ("warmupdecaylr",), "linear warmup then linear decay"),
    ):
        kind = config[block].get("type") if isinstance(config.get(block), dict) else None
        if kind is not None and str(kind).lower() not in allowed:  # e.g. the HF examples' WarmupLR
            log.warning(
                "%s: %s.type %s is not used: the trainer's %s is (its values filled from the domain config)",
                source,
                block,
                kind,
                ours,
            )


def resolve_auto(
    config: dict[str, Any],
    pcfg: PretrainConfig,
    *,
    total_steps: int,
    hidden_size: int,
    source: str | Path = "DeepSpeed config",
) -> dict[str, Any]:
    """Fill a Hugging Face-style DeepSpeed config's ``"auto"`` values from ``pcfg`` (in place; returned).

    The keys and the values they take follow transformers' ``HfTrainerDeepSpeedConfig``; warmup steps are
    ``int(warmup_ratio * total_steps)`` as in ``engine.py`` (at least 1 for DeepSpeed's scheduler, as the
    Trainer does). A value that is not ``"auto"`` must agree with ``pcfg`` for the clipping, optimizer and
    scheduler keys (DeepSpeed clips with the file's value; it ignores the file's optimizer and scheduler for the
    ones ``engine.py`` passes in, so a different value there would be silently unused).

    Raises:
        ConfigError: one line naming every ``"auto"`` left and every contradicting key.
    """
    if pcfg.lr is None or pcfg.warmup_ratio is None:
        raise ValueError("resolve_auto needs an arm's config (PretrainConfig.for_arm): lr and warmup_ratio")
    wanted = _auto_values(config, pcfg, total_steps, hidden_size)
    mismatches = []
    for key, (value, origin, must_match) in wanted.items():
        *parents, leaf = key.split(".")
        node: Any = config
        for part in parents:
            node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict) or leaf not in node:
            continue
        if node[leaf] == "auto":
            node[leaf] = value
        elif must_match and not _same(node[leaf], value):
            mismatches.append(f"{key}={node[leaf]!r} but {origin} gives {value!r}")
    config.setdefault("gradient_clipping", pcfg.max_grad_norm)
    _warn_unused_types(config, source)
    left = _auto_keys(config)
    problems = (
        [f'"auto" that nothing in the domain config fills: {", ".join(left)} (give values)'] if left else []
    ) + (
        [f'contradicts the domain config: {"; ".join(mismatches)} (use "auto" or change the domain config)']
        if mismatches
        else []
    )
    if problems:
        raise ConfigError("; ".join(problems), file=source, field="pretrain.deepspeed.config_file")
    return config


def _same(given: object, value: object) -> bool:
    """Do two JSON values agree (numbers within rounding, lists item by item)?"""
    if isinstance(value, list):
        return (
            isinstance(given, list | tuple)
            and len(given) == len(value)
            and all(_same(g, v) for g, v in zip(given, value, strict=True))
        )
    if isinstance(value, bool) or isinstance(given, bool):
        return given == value
    if isinstance(value, int | float) and isinstance(given, int | float):
        return abs(float(given) - float(value)) <= 1e-12 * max(1.0, abs(float(value)))
    return given == value


def _auto_keys(node: object, prefix: str = "") -> list[str]:
    """Dotted keys of every ``"auto"`` left in a JSON value."""
    if isinstance(node, dict):
        return [k for key, v in node.items() for k in _auto_keys(v, f"{prefix}{key}.")]
    if isinstance(node, list):
        return [k for i, v in enumerate(node) for k in _auto_keys(v, f"{prefix}{i}.")]
    return [prefix.rstrip(".")] if node == "auto" else []


def write_ds_config(pcfg: PretrainConfig, world_size: int, path: Path, *, total_steps: int, hidden_size: int) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    config = build_ds_config(pcfg, world_size, total_steps=total_steps, hidden_size=hidden_size)
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    return path


def read_user_config(path: str) -> dict[str, Any]:
    """A user's DeepSpeed JSON (``pretrain.deepspeed.config_file``) as a dict; read before DeepSpeed is imported
    (``setup.set_up``), so a missing or broken file is one line at once rather than after its long import.

    Raises:
        ConfigError: the file cannot be read, is not JSON, or is not a JSON object.
    """
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(
            f"cannot read DeepSpeed config: {exc}", file=path, field="pretrain.deepspeed.config_file"
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            "a DeepSpeed config must be a JSON object", file=path, field="pretrain.deepspeed.config_file"
        )
    return data
