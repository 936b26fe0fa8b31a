"""The training loop of one arm: set-up, step-0 evaluation, MLM steps, checkpoints, final evaluation.

One loop serves every setting: a single CPU process (the offline demo), several processes under the
``deepspeed`` launcher or ``torchrun`` (each takes its slice of the same global batch, so the data position
and masks do not depend on the process count), DeepSpeed ZeRO 0-3 or plain PyTorch. What is built once
is an ``ArmSetup``; what changes each step and goes into a checkpoint is a ``TrainState``. Metrics go to
``metrics.jsonl`` and the configured trackers (rank 0); the final weights go to ``outputs.write_outputs``.
This module does not decide whether a run is needed (``stage.py``) nor start processes (``launch.py``).

Host-device syncs (issue 43): a step reads nothing from the device. Masked and real positions are found on the
host where the batch is built (``masking.host_positions``), batches go to a GPU pinned and non-blocking, and
the losses, gradient norm and objective figures stay on the device until a logging step, a checkpoint or a
stop reads them in one transfer (``LogWindow.read``); a progress line shows the last record's loss
(``tests/stage/pretrain/test_pretrain_host_reads.py`` counts the reads). Reads that remain, and why:
evaluation and checkpoints (they need the values); with several ranks, ``stop_agreed`` all-reduces the stop
flag on the host every step, so that every rank stops at the same step; inside transformers, a padded batch's
attention mask is checked for padding on the device by the SDPA path (packed batches, the default, carry no
mask) and DeBERTa-v2 called without a mask checks its first and last tokens for padding; under replaced-token
detection ``torch.multinomial`` checks its probabilities on the host; DeepSpeed's own step may read (its fp16
overflow check).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import torch

from domainbert import __version__
from domainbert.config.domain import DomainConfig
from domainbert.config.start_from import kept_steps
from domainbert.core import signals
from domainbert.core.distributed import barrier, replica_digests
from domainbert.core.paths import RunLayout
from domainbert.core.progress import ProgressLine, duration
from domainbert.pretrain import checkpoint as ckpt
from domainbert.pretrain.arm_summary import arm_summary
from domainbert.pretrain.engine import objective_of
from domainbert.pretrain.evaluation import watch_steps
from domainbert.pretrain.log_window import LogWindow
from domainbert.pretrain.masking import apply_mask, host_positions, step_generator
from domainbert.pretrain.outputs import loadable_view, write_outputs
from domainbert.pretrain.runtime import (
    stop_agreed,
    torch_threads,
)
from domainbert.pretrain.setup import ArmSetup, set_up
from domainbert.pretrain.step_plan import Phase
from domainbert.pretrain.train_state import TrainState
from domainbert.trackers import MetricsLog, Tracker

log = logging.getLogger(__name__)


def train_arm(
    cfg: DomainConfig, arm: str, layout: RunLayout, *, fingerprint: str, throttle_s: float = 0.0
) -> dict[str, Any] | None:
    """Train one arm to its budget (resuming from the newest checkpoint) and write its outputs.

    Args:
        cfg: the ``DomainConfig``.
        arm: one of ``config.pretrain.ARMS``.
        layout: the ``RunLayout``.
        fingerprint: recorded in the model folder (skip-if-complete key, from ``stage.py``).
        throttle_s: sleep after each step (tests use it to SIGKILL a run mid-way on a fast machine).

    Returns:
        The summary on rank 0, None on other ranks.
    """
    with torch_threads(cfg.pretrain.torch_threads), signals.graceful_stop():
        setup = set_up(cfg, arm, layout)
        state, resume_step = start(setup, fingerprint)
        metrics = MetricsLog(
            setup.out_dir, setup.rank == 0, resume_step, lambda: _tracker(cfg, setup, layout, fingerprint, resume_step)
        )
        if resume_step is None:
            metrics.write({"kind": "eval", "step": 0, **_perplexities(state.before)})
            _watch(setup, state, metrics)
        try:
            nsp_last = run_steps(setup, state, metrics, throttle_s)
            after = setup.evaluate()
            metrics.write({"kind": "eval", "step": state.step, **_perplexities(after)})
            _watch(setup, state, metrics)
        except signals.StopRequested:
            metrics.close("KILLED")  # a rerun continues the same tracked run
            raise
        except BaseException:
            metrics.close("FAILED")
            raise
        weights = setup.engine.export_state_dict()
        replicas = replica_digests(weights)  # every rank's weights, equal or the run fails here
        if setup.rank != 0:
            metrics.close()
            barrier()
            return None
        try:
            summary = {**arm_summary(cfg, setup, state, after, nsp_last, layout), "replica_digests": replicas}
            model = write_outputs(cfg, arm, layout, setup.model, setup.tokenizer, weights, summary, fingerprint)
        except BaseException:
            metrics.close("FAILED")
            raise
        # The tracked run keeps what the arm wrote: its summary, card and loss curve.
        metrics.close(artifacts=[setup.out_dir / "summary.json", model / "README.md", model / "loss_curve.png"])
        barrier()
        return summary


def start(setup: ArmSetup, fingerprint: str) -> tuple[TrainState, int | None]:
    """Resume from the newest checkpoint that verifies (a truncated or tampered one is skipped with a
    warning), or evaluate the start point. Returns the state and the step resumed from (None: fresh)."""
    resumed = ckpt.resume(setup.ckpt_root, setup.engine, fingerprint=fingerprint, rank=setup.rank, barrier=barrier)
    if resumed is not None:
        folder, saved = resumed
        state = TrainState.from_checkpoint(saved, setup.stream)
        log.info("resuming %s from %s (step %d)", setup.arm, folder, state.step)
        return state, state.step
    return TrainState(fingerprint=fingerprint, before=setup.evaluate()), None


def train_step(setup: ArmSetup, state: TrainState, phase: Phase, window: LogWindow) -> None:
    """One optimizer step of ``grad_accum`` micro-batches. Nothing is read from the device: the losses, the
    gradient norm and the objective's figures go to ``window`` unread (``LogWindow.read``)."""
    pcfg, engine, rank = setup.pcfg, setup.engine, setup.rank
    losses, real, general, grad_norm = [], 0, 0, None
    spec = replace(setup.spec, rate=pcfg.mask_rate_at(state.step, setup.plan.total_steps))  # mask_schedule
    sl = slice(rank * phase.batch_size, (rank + 1) * phase.batch_size)
    for micro in range(pcfg.grad_accum):
        batch = setup.stream.next_sequences(phase.batch_size * setup.world, phase.seq_len)
        inputs, labels = apply_mask(
            batch.input_ids, batch.special, batch.word_start, spec, step_generator(pcfg.seed, state.step, micro)
        )
        attn = batch.attention_mask[sl] if batch.attention_mask is not None else None
        extra = {}
        if batch.next_sentence_label is not None:  # sentence pairs carry segment ids with their labels
            extra = {
                "token_type_ids": cast(torch.Tensor, batch.token_type_ids)[sl],
                "next_sentence_label": batch.next_sentence_label[sl],
            }
        # the positions to gather, found on the host: a boolean mask on the device would wait for it
        extra.update(host_positions(labels[sl], attn))
        to = _to_device(setup.device)
        loss = engine.forward(
            to(inputs[sl]),
            to(labels[sl]),
            to(attn) if attn is not None else None,
            **{k: to(v) for k, v in extra.items()},
        )
        engine.backward(loss)
        grad_norm = engine.step()
        losses.append(loss.detach())
        window.add(objective_of(engine))
        real += batch.real_tokens
        general += batch.general_tokens
        state.positions += batch.input_ids.numel()
    state.step += 1
    state.real_tokens += real
    state.tokens += real
    state.general_tokens += general
    window.tokens += real
    window.add_step(state.step, losses, grad_norm)


def _to_device(device: torch.device) -> Callable[[torch.Tensor], torch.Tensor]:
    """Moving a host batch tensor to ``device``: pinned and without waiting on a GPU (a plain copy from pageable
    memory waits for the kernels queued before it); as it is on the CPU."""
    if device.type != "cuda":
        return lambda t: t.to(device)
    return lambda t: t.pin_memory().to(device, non_blocking=True)


def read_losses(state: TrainState, window: LogWindow) -> None:
    """Read the steps' losses left on the device into the loss curve (a logging step, a checkpoint, a stop)."""
    for step, value in window.read():
        state.loss_curve.append([step, round(value, 5)])


def save(setup: ArmSetup, state: TrainState) -> None:
    ckpt.save_checkpoint(
        setup.ckpt_root,
        state.step,
        setup.engine,
        state.to_checkpoint(setup.stream),
        rank=setup.rank,
        barrier=barrier,
        hf_view=loadable_view(setup.engine, setup.tokenizer, setup.rank),
    )
    if setup.rank == 0:
        # the steps other arms start from (pretrain.start_from) are kept whatever keep_checkpoints says
        kept = kept_steps(setup.pcfg.start_from, setup.arm)
        ckpt.prune_checkpoints(setup.ckpt_root, setup.pcfg.keep_checkpoints, kept)


def run_steps(setup: ArmSetup, state: TrainState, metrics: MetricsLog, throttle_s: float) -> dict[str, Any]:
    """Train from ``state.step`` to the plan's end; returns the last NSP figures (None without NSP).

    Raises:
        signals.StopRequested: after SIGTERM/SIGUSR1, once this step is checkpointed (a rerun resumes here).
    """
    pcfg, plan = setup.pcfg, setup.plan
    window = LogWindow()
    lines = ProgressLine(plan.total_steps, state.step) if setup.rank == 0 else None  # rank 0 speaks for all
    tokens_at_start = state.tokens
    watching = watch_steps(pcfg.watch_points, plan.total_steps) if setup.watch else set()
    setup.engine.module.train()
    while state.step < plan.total_steps:
        phase = plan.phase_at(state.step)
        t0 = time.perf_counter()
        train_step(setup, state, phase, window)
        logging = state.step % pcfg.log_every == 0 or state.step == plan.total_steps
        if logging:
            read_losses(state, window)  # the one read of the device between records (it waits for the device)
        state.train_seconds += time.perf_counter() - t0
        if logging:
            _write_train_metrics(setup, state, window, metrics, phase)
        if lines and lines.due(state.step):
            _log_progress(setup, state, lines, window.last_loss, tokens_at_start)
        if pcfg.eval_every and state.step % pcfg.eval_every == 0 and state.step < plan.total_steps:
            t0 = time.perf_counter()
            metrics.write({"kind": "eval", "step": state.step, **_perplexities(setup.evaluate())})
            window.pause_since(t0)
        if state.step in watching:
            t0 = time.perf_counter()
            _watch(setup, state, metrics)
            window.pause_since(t0)
        if throttle_s:
            time.sleep(throttle_s)
        saved = state.step % pcfg.checkpoint_every == 0 and state.step < plan.total_steps
        if saved:
            t0 = time.perf_counter()
            read_losses(state, window)  # the checkpoint holds the loss curve
            save(setup, state)
            window.pause_since(t0)
        if state.step < plan.total_steps and stop_agreed(setup.world):
            if not saved:  # SIGTERM/SIGUSR1: checkpoint this step and stop
                read_losses(state, window)
                save(setup, state)
            raise signals.StopRequested(signals.requested_signal() or 15, f"at pretraining step {state.step}")
    read_losses(state, window)  # the last step logs: nothing is left unread
    return window.nsp_last


def _log_progress(
    setup: ArmSetup, state: TrainState, lines: ProgressLine, loss: float | None, tokens_at_start: int
) -> None:
    """A progress line (in a terminal, a Prefect worker's log or Slurm's output alike). Its loss is the last
    record's (None before the first): reading this step's would wait for the device."""
    plan = setup.plan
    log.info(
        "pretrain %s: step %d/%d (%.0f%%), %s/%s tokens, loss %s, %s tokens/s, ETA %s",
        setup.arm,
        state.step,
        plan.total_steps,
        100 * state.step / plan.total_steps,
        f"{state.tokens:,}",
        f"{plan.planned_tokens:,}",
        "-" if loss is None else f"{loss:.4f}",
        f"{(state.tokens - tokens_at_start) / lines.elapsed():,.0f}",
        duration(lines.eta_s(state.step)),
        extra={"progress": (state.step, plan.total_steps, f"pretrain {setup.arm}")},
    )


def _write_train_metrics(
    setup: ArmSetup,
    state: TrainState,
    window: LogWindow,
    metrics: MetricsLog,
    phase: Phase,
) -> None:
    """Close the logging window (its losses read) and write its training record (loss, lr, throughput, MFU)."""
    tps = window.close()
    metrics.write(
        {
            "kind": "train",
            "step": state.step,
            "loss": window.last_loss,
            "lr": setup.engine.current_lr(),
            "grad_norm": window.grad_norm_value(),
            "tokens": state.tokens,
            "seq_len": phase.seq_len,
            "real_tokens_per_s": tps,
            "real_token_fraction": state.real_tokens / state.positions,
            "mfu": setup.mfu(tps),
            **(window.nsp_last if setup.pcfg.next_sentence_prediction else {}),
            **window.detection_last,
            **_mask_rate(setup, state),
        }
    )


def _mask_rate(setup: ArmSetup, state: TrainState) -> dict[str, float]:
    """The masking rate of the step just taken, logged only under a ``mask_schedule`` (else it never changes)."""
    pcfg = setup.pcfg
    return {"mask_rate": pcfg.mask_rate_at(state.step - 1, setup.plan.total_steps)} if pcfg.mask_schedule else {}


def _watch(setup: ArmSetup, state: TrainState, metrics: MetricsLog) -> None:
    """One point of the perplexity curve (``evaluation.watch_sets``), logged as ``watch/*``."""
    if setup.watch:
        metrics.write({"kind": "watch", "step": state.step, **_perplexities(setup.evaluate_watch())})


def _perplexities(values: dict[str, float | None]) -> dict[str, float | None]:
    """Metric names of ``evaluate_all``'s figures: ``domain`` -> ``domain_perplexity``; accuracies keep theirs."""
    return {name if name.endswith("_accuracy") else f"{name}_perplexity": value for name, value in values.items()}


def _tracker(
    cfg: DomainConfig, setup: ArmSetup, layout: RunLayout, fingerprint: str, resume_step: int | None
) -> Tracker:
    return Tracker(
        cfg.tracking,
        folder=setup.out_dir,
        store_root=Path(layout.root),
        domain=cfg.name,
        run_name=f"pretrain/{setup.arm}",
        fingerprint=fingerprint,
        resume_step=resume_step,
        params={
            "arm": setup.arm,
            "pretrain": setup.pcfg.model_dump(mode="json"),
            "base_model": cfg.base_model.recipe(),
            "world_size": setup.world,
        },
        tags={"domainbert.stage": "pretrain", "domainbert.arm": setup.arm, "domainbert.version": __version__},
    )
