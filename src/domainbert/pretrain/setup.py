"""Everything one arm's loop needs, built once: the process group, the arm's start point loaded and checked
(preflight), the engine, the token stream, masking and the evaluation sets (``set_up`` -> ``ArmSetup``).

The loop itself, and what changes each step, is ``trainer.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, cast

import torch

from domainbert.config.domain import DomainConfig
from domainbert.config.pretrain import ARMS
from domainbert.core.distributed import dist_info
from domainbert.core.paths import RunLayout
from domainbert.pretrain.data import Batch, TokenStream
from domainbert.pretrain.ds_config import read_user_config
from domainbert.pretrain.engine import Engine, build_engine
from domainbert.pretrain.evaluation import eval_sets, evaluate_all, masking_spec, watch_sets
from domainbert.pretrain.masking import MaskingSpec
from domainbert.pretrain.model import training_attention
from domainbert.pretrain.objective import MLMObjective, detection_flops, flops_per_token
from domainbert.pretrain.pairs import PairStream
from domainbert.pretrain.preflight import run_preflight
from domainbert.pretrain.read_ahead import default_workers
from domainbert.pretrain.replaced_tokens import ReplacedTokenObjective, build_generator
from domainbert.pretrain.replay import ReplayStream
from domainbert.pretrain.replay_text import replay_text_dir
from domainbert.pretrain.runtime import (
    autocast_dtype,
    init_distributed,
    local_device,
    seed_everything,
)
from domainbert.pretrain.start import ArmStart, arm_start, load_arm
from domainbert.pretrain.step_plan import Plan, make_plan
from domainbert.pretrain.task_text import arm_config, data_dir
from domainbert.pretrain.token_store import stored_reader

if TYPE_CHECKING:
    from transformers import PreTrainedModel, PreTrainedTokenizerBase
from domainbert.config.pretrain import PretrainConfig


@dataclass
class ArmSetup:
    """Everything one arm's loop needs, built once (``set_up``)."""

    arm: str
    pcfg: PretrainConfig  # the arm's own (lr, warm-up and a task-text arm's budget: task_text.arm_config)
    rank: int
    world: int
    device: torch.device
    model: PreTrainedModel
    tokenizer: PreTrainedTokenizerBase
    start: ArmStart
    plan: Plan
    engine: Engine
    spec: MaskingSpec
    stream: PairStream | TokenStream | ReplayStream
    out_dir: Path
    evals: dict[str, Batch | None]
    watch: dict[str, Batch | None] | None  # the curve's subsets (evaluation.watch_sets), None: no curve
    attention: str
    flops_per_token: float
    eval_seed: int  # the run's own seed: every replicate of an arm is measured on the same masks

    @property
    def ckpt_root(self) -> Path:
        return self.out_dir / "checkpoints"

    @property
    def peak_flops(self) -> float | None:
        return self.pcfg.peak_tflops * 1e12 if self.pcfg.peak_tflops else None

    def mfu(self, tokens_per_s: float) -> float | None:
        return self.flops_per_token * tokens_per_s / self.peak_flops if self.peak_flops else None

    def evaluate(self) -> dict[str, float | None]:
        return evaluate_all(self.engine, self.evals, self.spec, self.eval_seed, self.device)

    def evaluate_watch(self) -> dict[str, float | None]:
        return evaluate_all(self.engine, self.watch or {}, self.spec, self.eval_seed, self.device)


def set_up(cfg: DomainConfig, arm: str, layout: RunLayout) -> ArmSetup:
    """Join the process group, load the arm's start point, check it (preflight) and build the engine."""
    pcfg = arm_config(cfg, arm, layout)
    if pcfg.deepspeed.enabled and pcfg.deepspeed.config_file:
        read_user_config(pcfg.deepspeed.config_file)  # a bad file is one line before DeepSpeed's long import
    init_distributed(pcfg.deepspeed.enabled)
    rank, world = dist_info()
    seed_everything(pcfg.seed, rank)
    device = local_device()
    start = arm_start(cfg, arm, layout)
    model, tokenizer = load_arm(cfg, start)
    source = start.source
    plan = make_plan(pcfg, world)
    lowercase, lowercase_field = (
        (cfg.tokenizer.lowercase, "tokenizer.lowercase")
        if ARMS[arm].from_scratch
        else (cfg.base_model.lowercase, "base_model.lowercase")
    )
    run_preflight(
        model,
        tokenizer,
        source=source,
        seq_len=max(p.seq_len for p in plan.phases),
        lowercase=lowercase,
        lowercase_field=lowercase_field,
        whole_word=pcfg.whole_word_mask,
        nsp=pcfg.next_sentence_prediction,
    )
    model.to(device)  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to, hiding its signature
    attention = training_attention(model, device, autocast_dtype(pcfg.precision, device))
    if pcfg.compile:
        model.base_model.forward = torch.compile(model.base_model.forward)
    objective = build_objective(pcfg, arm, model, autocast_dtype(pcfg.precision, device))
    objective.to(device)
    stream: PairStream | TokenStream | ReplayStream = _train_stream(pcfg, tokenizer, data_dir(layout, arm), device)
    if pcfg.replay.replays(arm) and isinstance(stream, TokenStream):  # the config refuses replay with NSP
        general = _train_stream(pcfg, tokenizer, replay_text_dir(layout), device)
        stream = ReplayStream(stream, cast(TokenStream, general), pcfg.replay.fraction)
    return ArmSetup(
        arm=arm,
        pcfg=pcfg,
        eval_seed=cfg.pretrain.seed,
        rank=rank,
        world=world,
        device=device,
        model=model,
        tokenizer=tokenizer,
        start=start,
        plan=plan,
        engine=build_engine(objective, pcfg, plan.total_steps, world, start.checkpoint),
        spec=masking_spec(pcfg, tokenizer),
        stream=stream,
        out_dir=Path(layout.pretrain(arm)),
        evals=(evals := eval_sets(tokenizer, layout, pcfg, plan.phases[0].seq_len)),
        watch=watch_sets(evals, pcfg.watch_points, pcfg.watch_share, plan.planned_tokens),
        attention=attention,
        flops_per_token=objective_flops(objective, plan.phases[0].seq_len, pcfg),
    )


def _train_stream(
    pcfg: PretrainConfig, tokenizer: PreTrainedTokenizerBase, folder: Path, device: torch.device
) -> PairStream | TokenStream:
    """The training split's stream: sentence pairs with next-sentence prediction, else blocks read from the
    split's token ids, tokenized once per corpus and tokenizer (token_store.py)."""
    if pcfg.next_sentence_prediction:
        return PairStream(tokenizer, folder, "train", shuffle_seed=pcfg.seed, seed=pcfg.seed)
    return TokenStream(
        tokenizer,
        folder,
        "train",
        packing=pcfg.packing,
        shuffle_seed=pcfg.seed,
        encode_workers=default_workers(device),
        blocks=stored_reader(tokenizer, folder, "train", shuffle_seed=pcfg.seed),
    )


def build_objective(pcfg: PretrainConfig, arm: str, model: PreTrainedModel, dtype: torch.dtype | None) -> MLMObjective:
    """The arm's objective (``pretrain.objective(arm)``): masked-LM (with NSP when configured), or
    replaced-token detection with a new generator drawn from the arm's seed."""
    if pcfg.objective(arm) == "rtd":
        generator = build_generator(model, pcfg.rtd.generator_layers)
        return ReplacedTokenObjective(model, generator, pcfg.rtd.discriminator_weight, autocast_dtype=dtype)
    return MLMObjective(model, sparse=pcfg.sparse_prediction, autocast_dtype=dtype, nsp=pcfg.next_sentence_prediction)


def objective_flops(objective: MLMObjective, seq_len: int, pcfg: PretrainConfig) -> float:
    """Training FLOPs per token: the masked-LM model's; for replaced-token detection the discriminator's
    encoder (no vocabulary projection) plus the generator's sparse masked-LM."""
    if isinstance(objective, ReplacedTokenObjective):
        return detection_flops(objective.model, seq_len, pcfg.mean_mask_rate, pcfg.rtd.generator_layers)
    return flops_per_token(objective.model, seq_len, pcfg.mean_mask_rate, pcfg.sparse_prediction)
