"""What an arm's ``summary.json`` records at the end of its training (``trainer.train_arm`` writes it): budget and
tokens, speed, perplexities before and after with their unigram bar, the settings as run (precision, engine, attention, threads), the
task text of a task-adaptive arm, the objective's own figures and the start it came from. The report and the
benchmarks read these fields; this module computes none of them, it gathers them."""

from __future__ import annotations

from typing import Any, cast

import torch

from domainbert.config.domain import DomainConfig
from domainbert.core.distributed import resolve_precision
from domainbert.core.paths import RunLayout
from domainbert.pretrain.engine import DeepSpeedEngine, objective_of
from domainbert.pretrain.evaluation import unigram_bar
from domainbert.pretrain.objective import count_parameters
from domainbert.pretrain.replaced_tokens import ReplacedTokenObjective
from domainbert.pretrain.setup import ArmSetup
from domainbert.pretrain.start import warmup_record
from domainbert.pretrain.train_state import TrainState


def _task_text_fields(setup: ArmSetup, layout: RunLayout) -> dict[str, Any]:
    """What a task-adaptive arm pretrained on: the text (``data``), its tokens and the passes configured."""
    from domainbert.config.pretrain import ARMS
    from domainbert.pretrain.task_text import read_manifest

    kind = ARMS[setup.arm]
    if not kind.on_task_text:
        return {"data": kind.data}
    manifest = read_manifest(layout, kind.data == "curated") or {}
    return {"data": kind.data, "task_text_tokens": manifest.get("task_tokens"), "tapt_epochs": setup.pcfg.tapt.epochs}


def _token_sources(setup: ArmSetup, state: TrainState) -> dict[str, Any]:
    """The arm's tokens by source: the domain's (its corpus or task text) and general text's (the control's
    whole stream, or what ``pretrain.replay`` mixed in), and the replay share configured."""
    from domainbert.config.pretrain import ARMS

    general = state.tokens if ARMS[setup.arm].on_general_text else state.general_tokens
    replay = setup.pcfg.replay.fraction if setup.pcfg.replay.replays(setup.arm) else 0.0
    return {"domain_tokens": state.tokens - general, "general_tokens": general, "replay_fraction": replay}


def arm_summary(
    cfg: DomainConfig,
    setup: ArmSetup,
    state: TrainState,
    after: dict[str, float | None],
    nsp_last: dict[str, Any],
    layout: RunLayout,
) -> dict[str, Any]:
    """The arm's ``summary.json``: what it trained on and how long, how fast, its perplexities before and after,
    its settings as run, and where it started."""
    pcfg, plan, engine = setup.pcfg, setup.plan, setup.engine
    tps = state.real_tokens / max(state.train_seconds, 1e-9)
    return {
        "arm": setup.arm,
        "source": setup.start.source,
        "steps": state.step,
        "planned_steps": plan.total_steps,
        "budget_tokens": pcfg.budget_tokens,
        "tokens_consumed": state.tokens,
        **_task_text_fields(setup, layout),
        **_token_sources(setup, state),
        "real_tokens_per_s": tps,
        "real_token_fraction": state.real_tokens / max(state.positions, 1),
        "final_loss": state.loss_curve[-1][1] if state.loss_curve else None,
        "domain_perplexity": after.get("domain"),
        "domain_perplexity_before": state.before.get("domain"),
        "unigram_perplexity": unigram_bar(setup.tokenizer, layout.corpus, setup.evals.get("domain")),
        "general_perplexity": after.get("general"),
        "general_perplexity_before": state.before.get("general"),
        "flops_per_token": setup.flops_per_token,
        "peak_tflops": pcfg.peak_tflops,
        "mfu": setup.mfu(tps),
        "wall_seconds": state.train_seconds,
        "loss_curve": state.loss_curve,
        "seq_len_phases": [[p.start, p.end, p.seq_len, p.batch_size] for p in plan.phases],
        "precision": resolve_precision(pcfg.precision, setup.device),
        "sparse_prediction": pcfg.sparse_prediction,
        "packing": pcfg.packing,
        "whole_word_mask": pcfg.whole_word_mask,
        "world_size": setup.world,
        "next_sentence_prediction": pcfg.next_sentence_prediction,
        **nsp_last,
        "engine": "deepspeed" if pcfg.deepspeed.enabled else "torch",
        "attention": setup.attention,
        "torch_threads": torch.get_num_threads(),
        "zero_stage": (  # a user's file may set it
            engine.ds_config.get("zero_optimization", {}).get("stage", 0)
            if isinstance(engine, DeepSpeedEngine)
            else None
        ),
        "parameters": count_parameters(setup.model),
        "vocab_size": len(setup.tokenizer),
        "resumed_from": state.resumed_from,
        "lr": pcfg.lr,
        "warmup_ratio": pcfg.warmup_ratio,
        "start_head": setup.start.head_origin,
        "base_warmup": warmup_record(setup.start),
        **_objective_fields(setup, state, after),
    }


def _objective_fields(setup: ArmSetup, state: TrainState, after: dict[str, float | None]) -> dict[str, Any]:
    """The objective, and under replaced-token detection what stands beside perplexity (the generator's): the
    discriminator's accuracy before and after, and the generator's depth."""
    objective = setup.pcfg.objective(setup.arm)
    if objective != "rtd":
        return {"objective": objective}
    generator = cast(ReplacedTokenObjective, objective_of(setup.engine)).generator
    return {
        "objective": objective,
        "perplexity_of": "generator",
        "generator_layers": int(generator.config.num_hidden_layers),
        "discriminator_accuracy_before": state.before.get("domain_discriminator_accuracy"),
        "discriminator_accuracy": after.get("domain_discriminator_accuracy"),
        "discriminator_floor_accuracy_before": state.before.get("domain_discriminator_floor_accuracy"),
        "discriminator_floor_accuracy": after.get("domain_discriminator_floor_accuracy"),
        "general_discriminator_accuracy": after.get("general_discriminator_accuracy"),
    }
