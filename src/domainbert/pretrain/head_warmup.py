"""MLM-head warm-up: train a missing masked-LM head, encoder frozen, before any checkpoint-based arm.

Many published encoders (sentence-embedding models such as all-MiniLM, or checkpoints exported as a bare
``BertModel``) are saved without their MLM head. transformers then adds a random head, so a "before"
perplexity measured through it is worse than uniform, and the first steps of continued pretraining mostly
train that head while its large gradients flow into the encoder. This module trains the head alone
(transform and output bias; the decoder stays tied to the frozen input embeddings) on general-domain text
(by default the vocab stage's control corpus less the files used to measure forgetting) and writes the
result to ``pretrain/head-warmup/model`` with a ``summary.json`` (steps, tokens, seconds, domain and general
perplexity through the random and the warmed head).

The warmed model is the reference for the arms' "before" perplexities: ``continued`` starts from it and
``extended`` gets its head (new tokens' output bias: the mean of their pieces', as the vocab stage does).
With ``pretrain.head_warmup.enabled: auto`` nothing happens for a checkpoint that has its head.
This module does not train the arms (``trainer.py``) nor decide which arms run (``stage.py``).
"""

from __future__ import annotations

import json
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from domainbert import __version__
from domainbert.config.domain import DomainConfig, resolved_dict
from domainbert.core.artifacts import atomic_output, file_hash, fingerprint, is_complete, write_json_atomic
from domainbert.core.errors import ConfigError, ModelError
from domainbert.core.models import load_mlm_model_with_info, load_tokenizer, resolve_model_ref
from domainbert.core.paths import RunLayout
from domainbert.core.tokenizer_files import make_portable
from domainbert.pretrain.data import Batch, pack_texts, read_jsonl_texts
from domainbert.pretrain.engine import TorchEngine
from domainbert.pretrain.evaluation import eval_sets, evaluate, evaluate_all, masking_spec
from domainbert.pretrain.masking import apply_mask, step_generator
from domainbert.pretrain.objective import MLMObjective, prediction_head
from domainbert.pretrain.runtime import autocast_dtype, torch_threads

if TYPE_CHECKING:
    from torch import nn
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)
NAME = "head-warmup"
WARMUP_RATIO = 0.1  # of the warm-up's step cap: the head's learning rate rises over it
HEAD_KEYS = ("cls.predictions.", "lm_head.")


def warmup_dir(layout: RunLayout) -> Path:
    return Path(layout.pretrain(NAME))


def warm_model_folder(cfg: DomainConfig, layout: RunLayout) -> Path | None:
    """The warmed-up model folder when the warm-up is enabled and finished, else None."""
    folder = warmup_dir(layout) / "model"
    if cfg.pretrain.head_warmup.enabled == "off" or not is_complete(folder):
        return None
    return folder


def warmup_corpus(cfg: DomainConfig) -> list[str]:
    """Files to warm the head on: the configured globs, or the control corpus less the forgetting set."""
    import glob

    hw = cfg.pretrain.head_warmup
    if hw.corpus:
        return list(hw.corpus)
    held_out = {str(Path(p).resolve()) for pattern in cfg.pretrain.general_eval_corpus for p in glob.glob(pattern)}
    files = sorted({str(Path(p).resolve()) for pattern in cfg.vocab.control_corpus for p in glob.glob(pattern)})
    kept = [f for f in files if f not in held_out]
    if not kept:
        raise ConfigError(
            "no general-domain text left for the MLM-head warm-up once the forgetting set "
            "(pretrain.general_eval_corpus) is set aside; give pretrain.head_warmup.corpus",
            field="pretrain.head_warmup.corpus",
        )
    return kept


def head_missing(info: dict[str, Any]) -> bool:
    """True when loading left the MLM head's weights to random initialisation."""
    return any(k.startswith(HEAD_KEYS) or ".predictions.transform." in k for k in info.get("missing_keys", []))


def _fingerprint(cfg: DomainConfig, files: list[str]) -> str:
    p = cfg.pretrain
    config = {
        "head_warmup": resolved_dict(p.head_warmup),
        "base_model": cfg.base_model.recipe(),
        "batch_size": p.batch_size,
        "seq_len": p.seq_len,
        "precision": p.precision,
        "seed": p.seed,
        "mask": [p.mask_rate, p.mask_token_prob, p.random_token_prob, p.whole_word_mask],
    }
    return fingerprint(config, {f: file_hash(Path(f)) for f in files}, __version__)


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
    """What ``ensure_head_warmup`` will do, for ``domainbert plan`` (loads no model)."""
    hw = cfg.pretrain.head_warmup
    if hw.enabled == "off":
        return "off"
    if hw.enabled == "auto":
        has_head = checkpoint_has_head(cfg.base_model.name_or_path)
        if has_head:
            return "not needed (the base checkpoint has its MLM head)"
        if has_head is None:
            return "will run if the base checkpoint has no MLM head"
    if is_complete(warmup_dir(layout) / "model", _fingerprint(cfg, warmup_corpus(cfg))):
        return "up to date"
    return "will run"


def ensure_head_warmup(cfg: DomainConfig, layout: RunLayout) -> Path | None:
    """Warm the base checkpoint's MLM head up if it needs it (skipped when up to date).

    Returns:
        The warmed model folder, or None when the warm-up is off or the checkpoint has its own head.
    """
    hw = cfg.pretrain.head_warmup
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
    fp = _fingerprint(cfg, files)
    folder = warmup_dir(layout) / "model"
    if is_complete(folder, fp):
        log.info("MLM-head warm-up skipped: up to date (%s)", folder)
        return folder
    if model is None:
        model, _ = load_mlm_model_with_info(cfg.base_model.name_or_path)
    tokenizer = load_tokenizer(cfg.base_model.name_or_path)
    summary = train_head(cfg, layout, model, tokenizer, files)
    write_json_atomic(warmup_dir(layout) / "summary.json", summary)
    with atomic_output(folder, config={"head_warmup": resolved_dict(hw)}, fp=fp) as tmp:
        model.save_pretrained(tmp)
        tokenizer.save_pretrained(tmp)
        make_portable(Path(tmp))
    log.info(
        "MLM-head warm-up: %d steps in %.1f s, domain perplexity %.1f -> %.1f; wrote %s",
        summary["steps"],
        summary["wall_seconds"],
        summary["domain_perplexity_random_head"] or float("nan"),
        summary["domain_perplexity"] or float("nan"),
        folder,
    )
    return folder


def _freeze_all_but_head(model: PreTrainedModel) -> set[int]:
    """Freeze every parameter but the MLM head's (the tied input embeddings stay frozen); their ids."""
    embeddings = model.get_input_embeddings().weight
    head = prediction_head(model)
    if head is None:
        raise ConfigError("the base model has no known MLM head to warm up", field="pretrain.head_warmup.enabled")
    trainable = {id(q) for q in head.parameters() if q is not embeddings}
    for q in model.parameters():
        q.requires_grad_(id(q) in trainable)
    return trainable


def _warmup_data(cfg: DomainConfig, tokenizer: PreTrainedTokenizerBase, files: list[str]) -> Batch:
    """The warm-up corpus, shuffled with the run's seed and packed into sequences."""
    p = cfg.pretrain
    texts = read_jsonl_texts(files, p.head_warmup.max_documents)
    random.Random(p.seed).shuffle(texts)  # files are often sorted (by headword, part of speech): mix them
    data = pack_texts(tokenizer, texts, p.seq_len)
    if data is None:
        raise ConfigError("the MLM-head warm-up corpus fills no sequence", field="pretrain.head_warmup.corpus")
    return data


def train_head(
    cfg: DomainConfig, layout: RunLayout, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, files: list[str]
) -> dict[str, Any]:
    """Train the head in place; returns the warm-up summary (cost and perplexities before and after)."""
    p, hw = cfg.pretrain, cfg.pretrain.head_warmup
    trainable = _freeze_all_but_head(model)
    data = _warmup_data(cfg, tokenizer, files)
    spec = masking_spec(p, tokenizer)
    device = torch.device("cpu")
    objective = MLMObjective(model, sparse=p.sparse_prediction, autocast_dtype=autocast_dtype(p.precision))
    engine = TorchEngine(
        objective, p.model_copy(update={"lr": hw.lr, "warmup_ratio": WARMUP_RATIO, "grad_accum": 1}), hw.steps
    )
    evals = eval_sets(tokenizer, layout, p, p.seq_len)
    with torch_threads(p.torch_threads):
        before = evaluate_all(engine, evals, spec, p.seed, device)  # the random head
        t0, n, curve = time.perf_counter(), data.input_ids.shape[0], []
        watch = Convergence(hw.min_improvement, warmup_steps=int(WARMUP_RATIO * hw.steps))
        step = 0
        while step < hw.steps and not watch.converged:
            rows = torch.arange(step * p.batch_size, (step + 1) * p.batch_size) % n
            inputs, labels = apply_mask(
                data.input_ids[rows], data.special[rows], data.word_start[rows], spec, step_generator(p.seed, step)
            )
            objective.train()
            model.base_model.eval()  # a frozen encoder: no dropout, so the head learns what the arms will see
            loss = engine.forward(inputs, labels)
            engine.backward(loss)
            engine.step()
            step += 1
            curve.append([step, round(float(loss.detach()), 5)])
            if step % hw.eval_every == 0 and step < hw.steps and evals.get("general") is not None:
                watch.add(step, evaluate(engine, evals["general"], spec, p.seed, device))
        seconds = time.perf_counter() - t0
        after = evaluate_all(engine, evals, spec, p.seed, device)
    for q in model.parameters():
        q.requires_grad_(True)
    return {
        "steps": step,
        "max_steps": hw.steps,
        "converged": watch.converged,
        "general_curve": watch.curve,
        "lr": hw.lr,
        "tokens": step * p.batch_size * p.seq_len,
        "corpus": [Path(f).name for f in files],
        "sequences_available": n,
        "wall_seconds": seconds,
        "trainable_parameters": sum(q.numel() for q in model.parameters() if id(q) in trainable),
        "domain_perplexity_random_head": before.get("domain"),
        "domain_perplexity": after.get("domain"),
        "general_perplexity_random_head": before.get("general"),
        "general_perplexity": after.get("general"),
        "loss_curve": curve,
    }


@dataclass
class Convergence:
    """General-text perplexity during the warm-up: converged once an evaluation improves on the last by less
    than ``min_improvement`` (relative). Not judged during the learning-rate warmup (``warmup_steps``), when
    the rate is still too small to move the head; without a general evaluation set the warm-up runs its cap."""

    min_improvement: float
    warmup_steps: int
    last: float | None = None
    curve: list[list[float]] = field(default_factory=list)
    converged: bool = False

    def add(self, step: int, perplexity: float | None) -> None:
        if perplexity is None:
            return
        self.curve.append([step, round(perplexity, 3)])
        if step > self.warmup_steps and self.last is not None and perplexity > self.last * (1 - self.min_improvement):
            self.converged = True
        self.last = perplexity


def copy_warm_head(model: PreTrainedModel, warm_folder: Path, extended_folder: Path) -> None:
    """Give an extended model the warmed head: transform weights, and the output bias of the base ids; a new
    token's bias is the mean of its pieces' (``extension.json`` of the extended folder names the pieces)."""
    from safetensors.torch import load_file

    weights = load_file(str(warm_folder / "model.safetensors"))
    head = prediction_head(model)
    if head is None:
        raise ModelError("the extended model has no masked-LM head to warm", file=extended_folder)
    prefix = next(n for n in ("cls", "lm_head") if getattr(model, n, None) is head)
    own = head.state_dict()
    with torch.no_grad():
        for name, tensor in own.items():
            key = f"{prefix}.{name}"
            if key not in weights or "decoder.weight" in name:
                continue
            src = weights[key]
            if src.shape == tensor.shape:
                tensor.copy_(src)
            elif tensor.ndim == 1 and src.ndim == 1 and src.shape[0] < tensor.shape[0]:  # the output bias
                tensor[: src.shape[0]] = src
                tensor[src.shape[0] :] = src.mean()
        _pieces_bias(head, extended_folder, weights, prefix)


def _pieces_bias(head: nn.Module, folder: Path, weights: dict[str, torch.Tensor], prefix: str) -> None:
    ext = folder / "extension.json"
    bias = getattr(getattr(head, "predictions", head), "bias", None)
    if bias is None or not ext.is_file():
        return
    from transformers import AutoTokenizer

    base_bias = weights.get(f"{prefix}.predictions.bias")
    if base_bias is None:
        return
    tok = AutoTokenizer.from_pretrained(str(folder))
    for row in json.loads(ext.read_text()).get("tokens", []):
        # one token in, one id (or None) out; transformers' annotation covers lists as well
        ids = [cast("int | None", tok.convert_tokens_to_ids(piece)) for piece in row["base_pieces"]]
        ids = [i for i in ids if i is not None and 0 <= i < base_bias.shape[0]]
        if ids and row["id"] < bias.shape[0]:
            bias[row["id"]] = base_bias[ids].mean()
