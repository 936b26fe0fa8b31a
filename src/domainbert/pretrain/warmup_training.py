"""The base warm-up's training loop: masked-LM steps on general text until general perplexity stops falling.

``train: full`` trains the whole model (the general masked-LM pretraining the arms build on, every
parameter); ``train: head`` trains the MLM head alone (transform and output bias; the decoder stays
tied to the frozen input embeddings; the encoder runs without dropout). Both train at a rate that warms up
and then stays constant, and stop at the step cap or once an evaluation of general-text perplexity improves on the last by
less than ``min_improvement``.
This module neither decides whether a warm-up is needed nor where its result lives (``base_warmup.py``).
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from domainbert.config.domain import DomainConfig
from domainbert.config.pretrain import PretrainConfig
from domainbert.core import signals
from domainbert.core.distributed import resolve_precision
from domainbert.core.errors import ConfigError
from domainbert.core.optim import adamw, linear_warmup_constant, param_groups
from domainbert.core.progress import ProgressLine, duration
from domainbert.pretrain.data import Batch, pack_texts
from domainbert.pretrain.engine import TorchEngine
from domainbert.pretrain.evaluation import evaluate, masking_spec
from domainbert.pretrain.forgetting_text import general_corpus_texts
from domainbert.pretrain.masking import MaskingSpec, apply_mask, step_generator
from domainbert.pretrain.model import training_attention
from domainbert.pretrain.objective import MLMObjective, prediction_head
from domainbert.pretrain.runtime import autocast_dtype, torch_threads

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

log = logging.getLogger(__name__)
WARMUP_RATIO = 0.1  # of the warm-up's step cap: the learning rate rises over it


@dataclass
class Convergence:
    """General-text perplexity during the warm-up: converged once ``patience`` evaluations in a row fail to
    improve on the best so far by ``min_improvement`` (relative); one noisy evaluation does not stop it. Not
    judged during the learning-rate warmup (``warmup_steps``), when the rate is still too small to move the
    model; without a general evaluation set the warm-up runs its cap."""

    min_improvement: float
    warmup_steps: int
    patience: int = 2
    best: float | None = None
    stale: int = 0
    curve: list[list[float]] = field(default_factory=list)
    converged: bool = False

    @property
    def last(self) -> float | None:
        return self.curve[-1][1] if self.curve else None

    def add(self, step: int, perplexity: float | None) -> None:
        if perplexity is None:
            return
        self.curve.append([step, round(perplexity, 3)])
        if step > self.warmup_steps and self.best is not None:
            self.stale = self.stale + 1 if perplexity > self.best * (1 - self.min_improvement) else 0
            self.converged = self.stale >= self.patience
        self.best = perplexity if self.best is None else min(self.best, perplexity)


def trainable_parameters(model: PreTrainedModel, train: str) -> set[int]:
    """Leave trainable what the warm-up trains (``full``: everything; ``head``: the MLM head but the tied input
    embeddings) and freeze the rest; the ids of the trainable parameters."""
    if train == "full":
        for q in model.parameters():
            q.requires_grad_(True)
        return {id(q) for q in model.parameters()}
    embeddings = model.get_input_embeddings().weight
    head = prediction_head(model)
    if head is None:
        raise ConfigError("the base model has no known MLM head to warm up", field="pretrain.base_warmup.train")
    trainable = {id(q) for q in head.parameters() if q is not embeddings}
    for q in model.parameters():
        q.requires_grad_(id(q) in trainable)
    return trainable


MASKING = ("mask_rate", "mask_token_prob", "random_token_prob", "whole_word_mask")


def warmup_masking(p: PretrainConfig) -> PretrainConfig:
    """``p`` with BERT's own masking (15% of the tokens, 80/10/10, token by token) whatever the domain's arms
    use: the warm-up makes the base every domain starts from and compares with, one per machine (tweets'
    whole-word masking gave that domain a warm-up of its own)."""
    return p.model_copy(update={k: PretrainConfig.model_fields[k].default for k in MASKING})


def warmup_data(cfg: DomainConfig, tokenizer: PreTrainedTokenizerBase, files: list[str]) -> Batch:
    """The warm-up corpus, shuffled with the run's seed and packed into sequences."""
    p = cfg.pretrain
    texts = general_corpus_texts(cfg, files)  # less the general-English task's glosses
    random.Random(p.seed).shuffle(texts)  # files are often sorted (by headword, part of speech): mix them
    data = pack_texts(tokenizer, texts, p.base_warmup.seq_len)
    if data is None:
        raise ConfigError("the base warm-up corpus fills no sequence", field="pretrain.base_warmup.corpus")
    return data


@dataclass
class Anchor:
    """L2-SP (Li et al. 2018): the encoder's weights as the checkpoint had them, and the penalty's weight."""

    weight: float
    params: list[torch.nn.Parameter]
    start: list[torch.Tensor]

    @classmethod
    def of(cls, model: PreTrainedModel, weight: float) -> Anchor | None:
        if weight <= 0:
            return None
        params = [q for q in model.base_model.parameters() if q.requires_grad]
        return cls(weight, params, [q.detach().clone() for q in params])

    def penalty(self) -> torch.Tensor:
        """``weight / 2`` x the squared distance from the start, summed over every encoder weight (Li et al.)."""
        total = torch.stack([((q - q0) ** 2).sum() for q, q0 in zip(self.params, self.start, strict=True)]).sum()
        return 0.5 * self.weight * total


def discriminative_optimizer(engine: TorchEngine, model: PreTrainedModel, p: PretrainConfig, scale: float) -> None:
    """Give ``engine`` an optimizer whose encoder groups train at ``scale`` x the peak rate (the head at the
    peak), before its schedule is built: the schedule multiplies each group's own rate."""
    encoder = {id(q) for q in model.base_model.parameters()}
    groups = []
    for group in param_groups(model, p.weight_decay):
        for inside in (True, False):
            params = [q for q in group["params"] if (id(q) in encoder) is inside]
            lr = p.base_warmup.peak_lr * (scale if inside else 1.0)
            if params:
                groups.append({**group, "params": params, "lr": lr})
    engine.optimizer = adamw(groups, lr=p.base_warmup.peak_lr, betas=p.adam_betas, eps=p.adam_eps)


def _step(
    engine: TorchEngine,
    objective: MLMObjective,
    model: PreTrainedModel,
    train: str,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    anchor: Anchor | None = None,
) -> float:
    """One optimizer step; its masked-LM loss (without the L2-SP penalty)."""
    objective.train()
    if train == "head":
        model.base_model.eval()  # a frozen encoder: no dropout, so the head learns what the arms will see
    # The whole model trains with its dropout, as it was pretrained and as it is fine-tuned (without it the
    # perplexity fell faster and the base fine-tuned no better: studies/general-mlm-base.md).
    loss = engine.forward(inputs, labels)
    engine.backward(loss if anchor is None else loss + anchor.penalty())
    engine.step()
    return round(float(loss.detach()), 5)


def _warmup_engine(
    p: PretrainConfig, model: PreTrainedModel, objective: MLMObjective
) -> tuple[TorchEngine, Anchor | None]:
    """The warm-up's engine (its own peak rate, the encoder's discriminative rate when the whole model trains,
    a rate constant after its warmup) and its L2-SP anchor (None: no penalty)."""
    hw = p.base_warmup
    own = {"lr": hw.peak_lr, "warmup_ratio": WARMUP_RATIO, "grad_accum": 1, "precision": hw.precision}
    engine = TorchEngine(objective, p.model_copy(update=own), hw.steps)
    gentle = hw.train == "full"  # the head alone never moves the encoder
    if gentle and hw.encoder_lr_scale < 1:
        discriminative_optimizer(engine, model, p, hw.encoder_lr_scale)
    anchor = Anchor.of(model, hw.l2sp) if gentle else None
    # The stop is the curve's: a rate that decays over the cap flattens the curve by itself (a 200-step warm-up
    # then stopped at 180 steps as "converged"), so after its warmup the rate stays at the peak.
    engine.scheduler = linear_warmup_constant(engine.optimizer, int(WARMUP_RATIO * hw.steps))
    return engine, anchor


def _run_steps(
    p: PretrainConfig,
    engine: TorchEngine,
    objective: MLMObjective,
    model: PreTrainedModel,
    data: Batch,
    spec: MaskingSpec,
    general: Batch | None,
    anchor: Anchor | None,
    device: torch.device,
) -> tuple[int, list[list[float]], Convergence]:
    """The warm-up's steps until the step cap or convergence on ``general``: the steps taken, ``[step, loss]``
    per step and the general-perplexity curve's watch."""
    hw = p.base_warmup
    n = data.input_ids.shape[0]
    losses: list[list[float]] = []
    watch = Convergence(hw.min_improvement, warmup_steps=int(WARMUP_RATIO * hw.steps))
    step, lines = 0, ProgressLine(hw.steps)
    while step < hw.steps and not watch.converged:
        # A stop (Ctrl-C, SIGTERM, a cancel) ends the warm-up at the next step, not after it: it keeps no
        # checkpoint (its steps take minutes, not hours), so the rerun warms up again.
        signals.check(f"in the base warm-up at step {step} of at most {hw.steps} (not kept: a rerun warms up again)")
        rows = torch.arange(step * hw.batch_size, (step + 1) * hw.batch_size) % n
        inputs, labels = apply_mask(
            data.input_ids[rows], data.special[rows], data.word_start[rows], spec, step_generator(p.seed, step)
        )
        step += 1
        losses.append([step, _step(engine, objective, model, hw.train, inputs, labels, anchor)])
        if step % hw.eval_every == 0 and step < hw.steps and general is not None:
            watch.add(step, evaluate(engine, general, spec, p.seed, device)["perplexity"])
            log.info("base warm-up: step %d of at most %d, general perplexity %.1f", step, hw.steps, watch.last)
        if lines.due(step):  # as the arms do: a line (and the Prefect progress bar) every 30 s or so
            log.info(
                "base warm-up: step %d/%d (%.0f%%), loss %.4f, ETA %s (at the step cap)",
                step,
                hw.steps,
                100 * step / hw.steps,
                losses[-1][1],
                duration(lines.eta_s(step)),
                extra={"progress": (step, hw.steps, "pretrain base-warmup")},
            )
    return step, losses, watch


def train_warmup(
    cfg: DomainConfig,
    model: PreTrainedModel,
    tokenizer: PreTrainedTokenizerBase,
    files: list[str],
    general: Batch | None,
) -> dict[str, Any]:
    """Train ``model`` in place on the warm-up corpus; returns what it cost and the general-perplexity curve
    (``general``: the held-out general text that decides the stop, packed at the warm-up's ``seq_len``, or None
    to run the step cap)."""
    p, hw = cfg.pretrain, cfg.pretrain.base_warmup
    trainable = trainable_parameters(model, hw.train)
    data = warmup_data(cfg, tokenizer, files)
    spec = masking_spec(warmup_masking(p), tokenizer)
    device = torch.device("cpu")
    # the arms' attention and dropout (under bf16 on a CPU: eager attention, cheaper dropout masks): with
    # PyTorch's own the warm-up's steps were a quarter slower than the arms' and than `plan`'s probe of them
    loaded = model.config._attn_implementation
    attention = training_attention(model, device, autocast_dtype(hw.precision))
    objective = MLMObjective(model, sparse=p.sparse_prediction, autocast_dtype=autocast_dtype(hw.precision))
    engine, anchor = _warmup_engine(p, model, objective)
    with torch_threads(p.torch_threads):
        t0, n = time.perf_counter(), data.input_ids.shape[0]
        step, losses, watch = _run_steps(p, engine, objective, model, data, spec, general, anchor, device)
        seconds, threads = time.perf_counter() - t0, torch.get_num_threads()
    for q in model.parameters():
        q.requires_grad_(True)
    if attention != loaded:  # evaluated next as the saved model will load: the two kernels round bf16 apart
        model.set_attn_implementation(loaded)
    objective.eval()
    return {
        "train": hw.train,
        "steps": step,
        "max_steps": hw.steps,
        "converged": watch.converged,
        "general_curve": watch.curve,
        "lr": hw.peak_lr,
        "encoder_lr_scale": hw.encoder_lr_scale,
        "l2sp": hw.l2sp,
        "tokens": step * hw.batch_size * hw.seq_len,
        "corpus": [Path(f).name for f in files],
        "sequences_available": n,
        "wall_seconds": seconds,
        "precision": resolve_precision(hw.precision, device),
        "attention": attention,
        "torch_threads": threads,
        "trainable_parameters": sum(q.numel() for q in model.parameters() if id(q) in trainable),
        "loss_curve": losses,
    }
