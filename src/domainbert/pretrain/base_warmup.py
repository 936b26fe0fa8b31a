"""The base warm-up: making the base a masked-language model before any checkpoint-based arm.

Many published encoders (sentence-embedding models such as all-MiniLM, or checkpoints exported as a bare
``BertModel``) are saved without their MLM head; transformers then adds a random head, so a "before"
perplexity measured through it is worse than uniform and fill-mask answers nonsense. ``train: full`` (the
default) runs the general masked-LM pretraining the literature starts from, the whole model on general-domain
text (by default the vocab stage's control corpus less the files used to measure forgetting); ``train: head``
trains the head alone on the frozen encoder (``warmup_training.py`` has the loop).

The result is content-addressed and cached once per machine (``machine_cache()/base-warmup/<fingerprint>``:
the base, the warm-up text's content and the settings, never a path), so every domain and every run folder
with the same base reuses it; each run folder gets a copy in ``pretrain/base-warmup/model`` and a
``summary.json`` (cost, whether the cache served it, domain and general perplexity through the random and
the warmed head). The warmed model is the ``base`` of every comparison and the start of the
checkpoint-based arms. With ``enabled: auto`` nothing happens for a checkpoint that has its head.
This module does not train the arms (``trainer.py``) nor decide which arms run (``stage.py``).
"""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from domainbert import __version__
from domainbert.config.domain import DomainConfig, resolved_dict
from domainbert.core.artifact_types import BaseWarmupSummary, validate_artifact
from domainbert.core.artifacts import RECORD, atomic_output, file_hash, fingerprint, is_complete, write_json_atomic
from domainbert.core.errors import ConfigError
from domainbert.core.models import load_mlm_model, load_mlm_model_with_info, load_tokenizer, resolve_model_ref
from domainbert.core.paths import RunLayout, machine_cache
from domainbert.core.tokenizer_files import make_portable
from domainbert.pretrain.engine import TorchEngine
from domainbert.pretrain.evaluation import eval_sets, evaluate_all, masking_spec, perplexity_change
from domainbert.pretrain.forgetting_text import forgetting_identity
from domainbert.pretrain.objective import MLMObjective
from domainbert.pretrain.runtime import autocast_dtype, torch_threads
from domainbert.pretrain.warmup_training import train_warmup, warmup_masking

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from domainbert.pretrain.data import Batch

log = logging.getLogger(__name__)
NAME = "base-warmup"
HEAD_KEYS = ("cls.predictions.", "lm_head.")
# The training recipe's version (``warmup_training.py``: schedule, dropout, stop rule), part of the fingerprint,
# so a machine's cache never serves a model an earlier recipe trained.
RECIPE = "base-warmup-v3"


def warmup_dir(layout: RunLayout) -> Path:
    return Path(layout.pretrain(NAME))


def warm_model_folder(cfg: DomainConfig, layout: RunLayout) -> Path | None:
    """The warmed-up model folder when the warm-up is enabled and finished, else None."""
    folder = warmup_dir(layout) / "model"
    if cfg.pretrain.base_warmup.enabled == "off" or not is_complete(folder):
        return None
    return folder


def warmup_corpus(cfg: DomainConfig) -> list[str]:
    """Files to warm the base up on: the configured globs, or the control corpus less the forgetting set."""
    import glob

    hw = cfg.pretrain.base_warmup
    if hw.corpus:
        return list(hw.corpus)
    held_out = {str(Path(p).resolve()) for pattern in cfg.pretrain.general_eval_corpus for p in glob.glob(pattern)}
    files = sorted({str(Path(p).resolve()) for pattern in cfg.vocab.control_corpus for p in glob.glob(pattern)})
    kept = [f for f in files if f not in held_out]
    if not kept:
        raise ConfigError(
            "no general-domain text left for the base warm-up once the forgetting set "
            "(pretrain.general_eval_corpus) is set aside; give pretrain.base_warmup.corpus",
            field="pretrain.base_warmup.corpus",
        )
    return kept


def head_missing(info: dict[str, Any]) -> bool:
    """True when loading left the MLM head's weights to random initialisation."""
    return any(k.startswith(HEAD_KEYS) or ".predictions.transform." in k for k in info.get("missing_keys", []))


def warmup_fingerprint(cfg: DomainConfig, files: list[str]) -> str:
    """What the warmed model depends on: the base, the settings and the content of the warm-up text and of the
    general text that decides the stop; no path, so every run folder and checkout on a machine shares it."""
    import glob

    p, w = cfg.pretrain, warmup_masking(cfg.pretrain)
    config = {
        "recipe": RECIPE,
        # the gentle-recipe settings at the values of the recipe before them (one rate, no L2-SP) are left out:
        # a cache made then is still found by `encoder_lr_scale: 1`
        "base_warmup": {
            k: v
            for k, v in resolved_dict(p.base_warmup).items()
            if not (k == "encoder_lr_scale" and v == 1.0 or k == "l2sp" and v == 0.0)
        },
        "base_model": cfg.base_model.recipe(),
        "seed": p.seed,
        "sparse_prediction": p.sparse_prediction,
        "eval_documents": p.eval_documents,
        "mask": [w.mask_rate, w.mask_token_prob, w.random_token_prob, w.whole_word_mask],
    }
    general = sorted({str(Path(f).resolve()) for pattern in p.general_eval_corpus for f in glob.glob(pattern)})
    inputs: dict[str, Any] = {
        "corpus": sorted(file_hash(Path(f)) for f in files),
        "general_eval": [file_hash(Path(f)) for f in general],
    }
    if held_out := forgetting_identity(cfg):  # only when on: a warm-up cached without the task stays current
        inputs["forgetting_task"] = held_out
    return fingerprint(config, inputs, __version__)


def cache_folder(fp: str) -> Path:
    """Where this machine keeps the warm-up with fingerprint ``fp``."""
    return machine_cache() / NAME / fp[:24]


def checkpoint_has_head(ref: str) -> bool | None:
    """Whether a checkpoint's safetensors hold MLM-head weights, read from the file headers only (no tensor
    is loaded); None when that cannot be told without loading (no safetensors, a Hub id offline)."""
    from safetensors import safe_open

    try:
        files = sorted(Path(resolve_model_ref(ref)).glob("*.safetensors"))
        keys = [k for f in files for k in safe_open(str(f), "pt").keys()]
    except Exception:  # noqa: BLE001 - the plan says "unknown" rather than failing
        return None
    return any(k.startswith(HEAD_KEYS) or ".cls.predictions." in k for k in keys) if keys else None


def warmup_status(cfg: DomainConfig, layout: RunLayout) -> str:
    """What ``ensure_base_warmup`` will do, for ``domainbert plan`` (loads no model)."""
    hw = cfg.pretrain.base_warmup
    if hw.enabled == "off":
        return "off"
    if hw.enabled == "auto":
        has_head = checkpoint_has_head(cfg.base_model.name_or_path)
        if has_head:
            return "not needed (the base checkpoint has its MLM head)"
        if has_head is None:
            return "will run if the base checkpoint has no MLM head"
    fp = warmup_fingerprint(cfg, warmup_corpus(cfg))
    if is_complete(warmup_dir(layout) / "model", fp):
        return "up to date"
    if is_complete(cache_folder(fp) / "model", fp):
        return "cached on this machine (copied, not trained again)"
    return "will run"


def ensure_base_warmup(cfg: DomainConfig, layout: RunLayout) -> Path | None:
    """Make the base a masked-LM if it needs it: up to date, copied from this machine's cache, or trained.

    Returns:
        The warmed model folder, or None when the warm-up is off or the checkpoint has its own head.
    """
    hw = cfg.pretrain.base_warmup
    if hw.enabled == "off":
        return None
    model = None
    # The missing head is initialised from torch's generator: seeded here, so it does not depend on what ran
    # earlier in the process (in `domainbert run` the vocabulary stage loads models first).
    torch.manual_seed(cfg.pretrain.seed)
    if hw.enabled == "auto":  # decided before anything else: a checkpoint with its head needs no warm-up corpus
        model, info = load_mlm_model_with_info(cfg.base_model.name_or_path)
        if not head_missing(info):
            log.info("the base checkpoint has its MLM head: no warm-up")
            return None
    files = warmup_corpus(cfg)
    fp = warmup_fingerprint(cfg, files)
    folder = warmup_dir(layout) / "model"
    if is_complete(folder, fp) and (warmup_dir(layout) / "summary.json").is_file():
        log.info("base warm-up skipped: up to date (%s)", folder)
        return folder
    if model is None:
        model, _ = load_mlm_model_with_info(cfg.base_model.name_or_path)
    tokenizer = load_tokenizer(cfg.base_model.name_or_path)
    evals = eval_sets(tokenizer, layout, cfg.pretrain, cfg.pretrain.seq_len)  # as the arms' before and after
    before = _perplexities(cfg, model, tokenizer, evals)  # through the random head
    cached = cache_folder(fp)
    served = is_complete(cached / "model", fp) and (cached / "training.json").is_file()
    model, training = _cached_or_trained(cfg, layout, model, tokenizer, files, fp, served)
    after = _perplexities(cfg, model, tokenizer, evals)
    summary = {
        **training,
        "from_machine_cache": served,
        "domain_perplexity_random_head": before.get("domain"),
        "domain_perplexity": after.get("domain"),
        "general_perplexity_random_head": before.get("general"),
        "general_perplexity": after.get("general"),
    }
    checked = validate_artifact(BaseWarmupSummary, summary, warmup_dir(layout) / "summary.json")
    write_json_atomic(warmup_dir(layout) / "summary.json", checked.model_dump(mode="json"))
    with atomic_output(folder, config={"base_warmup": resolved_dict(hw)}, fp=fp) as tmp:
        for path in (cached / "model").iterdir():
            if path.is_file() and path.name != RECORD:
                shutil.copy2(path, Path(tmp) / path.name)
    log.info(
        "base warm-up (%s): %d steps, %.1f s%s; perplexity general %s, domain %s; wrote %s",
        hw.train,
        summary["steps"],
        summary["wall_seconds"],
        " (this machine's cache)" if served else "",
        perplexity_change(summary["general_perplexity_random_head"], summary["general_perplexity"]),
        perplexity_change(summary["domain_perplexity_random_head"], summary["domain_perplexity"]),
        folder,
    )
    return folder


def _cached_or_trained(
    cfg: DomainConfig,
    layout: RunLayout,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    files: list[str],
    fp: str,
    served: bool,
) -> tuple[PreTrainedModel, dict[str, Any]]:
    """(warmed model, its training summary): this machine's cached result when ``served``, else trained now
    and cached."""
    hw, cached = cfg.pretrain.base_warmup, cache_folder(fp)
    what = "the whole encoder" if hw.train == "full" else "its MLM head alone"
    if served:
        log.info(
            "base warm-up (%s): the base as a masked LM on general text, which every arm starts from; paid "
            "once on this machine and reused now from its cache (%s)",
            what,
            cached,
        )
        return load_mlm_model(str(cached / "model")), json.loads((cached / "training.json").read_text())
    # Said before the first step, because on a CPU it is minutes that no later run or domain pays again.
    log.info(
        "base warm-up (%s): the base is trained as a masked LM on general text before any arm starts from it, "
        "at most %d steps on %d file(s); paid once on this machine, then reused by every run and domain with "
        "this base from %s",
        what,
        hw.steps,
        len(files),
        cached,
    )
    # the stop is decided on general text packed at the warm-up's own length, so every domain shares it
    general = eval_sets(tokenizer, layout, cfg.pretrain, hw.seq_len).get("general")
    training = train_warmup(cfg, model, tokenizer, files, general)
    write_json_atomic(cached / "training.json", training)
    _save(model, tokenizer, cached / "model", cfg, fp)
    return model, training


def _save(
    model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, folder: Path, cfg: DomainConfig, fp: str
) -> None:
    with atomic_output(folder, config={"base_warmup": resolved_dict(cfg.pretrain.base_warmup)}, fp=fp) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        make_portable(Path(tmp))


def _perplexities(
    cfg: DomainConfig, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, evals: dict[str, Batch | None]
) -> dict[str, float | None]:
    """Domain and general pseudo-perplexity of ``model`` (the arms' own evaluation code and masks)."""
    p = cfg.pretrain
    objective = MLMObjective(model, sparse=p.sparse_prediction, autocast_dtype=autocast_dtype(p.precision))
    engine = TorchEngine(objective, p.for_arm("continued"), 1)
    with torch_threads(p.torch_threads):
        return evaluate_all(engine, evals, masking_spec(p, tokenizer), p.seed, torch.device("cpu"))
