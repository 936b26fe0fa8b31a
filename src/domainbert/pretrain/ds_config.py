"""The DeepSpeed JSON config: generated from the ``pretrain:`` section, or a user's file with the batch
fields reconciled.

The optimizer and scheduler are built in ``engine.py`` (AdamW, linear warmup/decay) and handed to
``deepspeed.initialize``, so the generated config carries no ``optimizer``/``scheduler`` blocks; a user's
file that has them keeps them. Precision follows ``pretrain.precision`` only on CUDA: on CPU the trainer uses
bf16 autocast around an fp32 DeepSpeed engine. This module does not launch anything (``launch.py`` does).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

from domainbert.errors import ConfigError


def build_ds_config(pcfg, world_size: int) -> dict[str, Any]:
    """The DeepSpeed config of a run.

    Args:
        pcfg: the ``PretrainConfig``.
        world_size: number of training processes (for ``train_batch_size``).

    Raises:
        ConfigError: the user's JSON cannot be read.
    """
    ds = pcfg.deepspeed
    batch = {
        "train_micro_batch_size_per_gpu": pcfg.batch_size,
        "gradient_accumulation_steps": pcfg.grad_accum,
        "train_batch_size": pcfg.batch_size * pcfg.grad_accum * world_size,
    }
    if ds.config_file:
        try:
            config = json.loads(Path(ds.config_file).read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise ConfigError(f"cannot read DeepSpeed config: {exc}", file=ds.config_file,
                              field="pretrain.deepspeed.config_file") from None
        # "auto" values (HF Trainer style) and the batch fields are ours to fill so budgets stay exact.
        config.update(batch)
        config.setdefault("gradient_clipping", pcfg.max_grad_norm)
        return config
    zero: dict[str, Any] = {"stage": ds.zero_stage}
    if ds.zero_stage >= 1:
        zero.update({"contiguous_gradients": True, "overlap_comm": torch.cuda.is_available(),
                     "reduce_scatter": True})
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
        if pcfg.precision == "bf16":
            config["bf16"] = {"enabled": True}
        elif pcfg.precision == "fp16":
            config["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    return config


def write_ds_config(pcfg, world_size: int, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(build_ds_config(pcfg, world_size), indent=2, sort_keys=True) + "\n")
    return path
