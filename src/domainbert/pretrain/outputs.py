"""What a finished arm leaves behind: the Hugging Face model folder (config, safetensors, tokenizer, a model
card with data, budget and figures, a loss-curve plot) written atomically, and ``summary.json``.

``summary.json`` is written first and the model folder renamed into place last, so a complete model folder
always has its summary beside it. This module does not train.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from domainbert.config.domain import DomainConfig, resolved_dict
from domainbert.config.pretrain import ARMS
from domainbert.core.artifact_types import PretrainSummary, replaced_token_detection, validate_artifact
from domainbert.core.artifacts import atomic_output, write_json_atomic
from domainbert.core.paths import RunLayout
from domainbert.core.plotting import new_figure, save_png
from domainbert.core.tokenizer_files import make_portable
from domainbert.pretrain.engine import Engine, TorchEngine, objective_of

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)
EXTRA_PREFIXES = ("generator.", "detection_head.")  # ReplacedTokenObjective's modules beside ``model``


def strip_wrappers(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The Hugging Face model's weights, keyed as it names them: the wrappers' prefixes removed, an objective's
    other modules (a replaced-token detection generator and head, ``objective.extras``) left out."""
    out = {}
    for key, value in weights.items():
        if key.startswith("module."):
            key = key[len("module.") :]
        if key.startswith(EXTRA_PREFIXES):
            continue
        if key.startswith("model."):
            key = key[len("model.") :]
        out[key] = value
    return out


def model_card(
    cfg: DomainConfig, arm: str, summary: dict[str, Any], scores: list[dict[str, Any]] | None = None
) -> str:
    """README.md of the model folder (``cards.arm.model_card``), with the fine-tuning ``scores`` of the
    report's ``results.json`` once they exist (``push`` adds them to the card it uploads)."""
    import json

    from domainbert.cards.arm import model_card as hub_card

    ext = Path(str(summary["source"])) / "extension.json"  # the vocab stage's record of what extended adds
    extension = json.loads(ext.read_text()) if arm == "extended" and ext.is_file() else None
    return hub_card(cfg, arm, summary, scores, extension=extension)


def plot_loss(curve: list[list[float]], path: Path, label: str = "MLM loss") -> None:
    fig, ax = new_figure(figsize=(5, 3))
    if curve:
        ax.plot([c[0] for c in curve], [c[1] for c in curve])
    ax.set_xlabel("step")
    ax.set_ylabel(label)
    save_png(fig, path, dpi=80)


def base_pooler(cfg: DomainConfig, model: PreTrainedModel) -> dict[str, torch.Tensor]:
    """The base checkpoint's trained pooler weights, keyed as ``model`` names them; empty when it has none.

    A masked-LM model has no pooler, so an arm saved from one would give a sequence classifier a fresh pooler
    while the base model keeps its trained one. Carrying the base's pooler into the checkpoint-based arms keeps
    the classification comparison about the encoder.
    """
    from transformers import AutoModel

    from domainbert.core.models import quiet_transformers, resolve_model_ref

    with quiet_transformers():
        base, info = AutoModel.from_pretrained(
            resolve_model_ref(cfg.base_model.name_or_path), output_loading_info=True
        )
    pooler = getattr(base, "pooler", None)
    if pooler is None or any("pooler" in k for k in info.get("missing_keys", [])):
        return {}
    prefix = getattr(model, "base_model_prefix", "")
    return {
        f"{prefix}.pooler.{k}" if prefix else f"pooler.{k}": v.detach().clone() for k, v in pooler.state_dict().items()
    }


def write_outputs(
    cfg: DomainConfig,
    arm: str,
    layout: RunLayout,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    weights: dict[str, torch.Tensor],
    summary: dict[str, Any],
    fingerprint: str,
) -> Path:
    """summary.json, then the model folder (atomic, recorded with ``fingerprint``); the checkpoint-based arms
    keep the base checkpoint's pooler (``base_pooler``)."""
    out_dir = Path(layout.pretrain(arm))
    state_dict = strip_wrappers(weights)
    if not ARMS[arm].from_scratch and not any(".pooler." in k or k.startswith("pooler.") for k in state_dict):
        pooler = base_pooler(cfg, model)
        state_dict.update(pooler)
        summary["pooler"] = "base checkpoint's" if pooler else "none (the base has none)"
    else:
        summary["pooler"] = "trained" if any("pooler" in k for k in state_dict) else "new (initialised at fine-tuning)"
    write_json_atomic(out_dir / "summary.json", validate_artifact(PretrainSummary, summary).model_dump(mode="json"))
    with atomic_output(
        Path(layout.pretrained_model(arm)),
        config={"arm": arm, "domain": resolved_dict(cfg)},
        fp=fingerprint,
        root=layout.root,
    ) as tmp:
        model.save_pretrained(tmp, state_dict=state_dict)
        tokenizer.save_pretrained(tmp)
        make_portable(Path(tmp))
        weight = cfg.pretrain.rtd.discriminator_weight
        label = f"generator MLM + {weight:g} x detection loss" if replaced_token_detection(summary) else "MLM loss"
        plot_loss(summary["loss_curve"], tmp / "loss_curve.png", label)
        (tmp / "README.md").write_text(model_card(cfg, arm, summary))
    log.info("wrote %s", layout.pretrained_model(arm))
    return Path(layout.pretrained_model(arm))


def loadable_view(engine: Engine, tokenizer: PreTrainedTokenizerBase, rank: int) -> Callable[[Path], None]:
    """``save_checkpoint``'s ``hf_view``: config and tokenizer beside the weights (the torch engine saves them
    under the model's own key names); DeepSpeed's shards are gathered into a ``model.safetensors``."""

    def write(folder: Path) -> None:
        # Every rank takes part in DeepSpeed's gather (ZeRO-3 partitions); rank 0 writes.
        weights = None if isinstance(engine, TorchEngine) else strip_wrappers(engine.export_state_dict())
        if rank != 0:
            return
        objective_of(engine).model.config.save_pretrained(folder)
        if weights is not None:
            from safetensors.torch import save_file

            save_file(
                {k: v.contiguous() for k, v in weights.items()},
                str(folder / "model.safetensors"),
                metadata={"format": "pt"},
            )
        tokenizer.save_pretrained(folder)
        make_portable(Path(folder))

    return write
