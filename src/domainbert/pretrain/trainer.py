"""The training loop of one arm: preflight, step-0 evaluation, MLM steps, checkpoints, final evaluation.

One loop serves every setting: a single CPU process (the offline demo), several processes under the
``deepspeed`` launcher or ``torchrun`` (each takes its slice of the same global batch, so the data position
and masks do not depend on the process count), DeepSpeed ZeRO 0-3 or plain PyTorch. Metrics go to
``metrics.jsonl`` and TensorBoard (rank 0); the final weights are handed to ``outputs.write_outputs``.
This module does not decide whether a run is needed (``stage.py`` does) nor start processes (``launch.py``).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import math
import os
import random
import time
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch
import torch.distributed as dist

from domainbert import signals
from domainbert.pretrain import checkpoint as ckpt
from domainbert.pretrain.data import Batch, TokenStream, pack_texts, read_jsonl_texts
from domainbert.pretrain.masking import MaskingSpec, apply_mask, step_generator
from domainbert.pretrain.model import MLMObjective, count_parameters, flops_per_token, load_arm, training_attention
from domainbert.pretrain.pairs import PairStream
from domainbert.pretrain.plan import make_plan
from domainbert.pretrain.preflight import run_preflight
from domainbert.progress import ProgressLine, duration, stderr_is_terminal

log = logging.getLogger(__name__)
EVAL_BATCH = 16
EVAL_SEED_OFFSET = 7919  # evaluation masks differ from training masks but are equal before and after


def _dist_info() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


def _barrier() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _mean_across(value: float) -> float:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    t = torch.tensor([value], dtype=torch.float64)
    dist.all_reduce(t)
    return float(t.item()) / dist.get_world_size()


def _sum_across(values: list[float]) -> list[float]:
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return list(values)
    t = torch.tensor(values, dtype=torch.float64)
    dist.all_reduce(t)
    return t.tolist()


def _stop_agreed(world: int) -> bool:
    """Whether any rank got a stop signal (all ranks must stop at the same step)."""
    stop = float(signals.stop_requested())
    return (_sum_across([stop])[0] if world > 1 else stop) > 0


def init_distributed(use_deepspeed: bool) -> None:
    """Join the process group the launcher set up (gloo on CPU); a lone DeepSpeed process gets a world of 1."""
    if dist.is_initialized():
        return
    if use_deepspeed:
        for key, value in (("RANK", "0"), ("WORLD_SIZE", "1"), ("LOCAL_RANK", "0"), ("MASTER_ADDR", "127.0.0.1")):
            os.environ.setdefault(key, value)
        if "MASTER_PORT" not in os.environ:
            import socket

            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                os.environ["MASTER_PORT"] = str(s.getsockname()[1])
        from domainbert.extras import require

        deepspeed = require("deepspeed", "deepspeed", "pretrain.deepspeed.enabled")
        deepspeed.init_distributed(dist_backend="nccl" if torch.cuda.is_available() else "gloo")
    elif int(os.environ.get("WORLD_SIZE", "1")) > 1:
        dist.init_process_group("nccl" if torch.cuda.is_available() else "gloo")


def seed_everything(seed: int, rank: int) -> None:
    random.seed(seed + rank)
    np.random.seed(seed + rank)
    torch.manual_seed(seed + rank)


def autocast_dtype(precision: str) -> torch.dtype | None:
    return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(precision)


def masking_spec(pcfg, tokenizer) -> MaskingSpec:
    return MaskingSpec(mask_token_id=tokenizer.mask_token_id, vocab_size=len(tokenizer), rate=pcfg.mask_rate,
                       mask_token_prob=pcfg.mask_token_prob, random_token_prob=pcfg.random_token_prob,
                       whole_word=pcfg.whole_word_mask)


@torch.no_grad()
def evaluate(engine, batch: Batch | None, spec: MaskingSpec, seed: int, device: torch.device) -> float | None:
    """MLM perplexity (exp of the mean loss over masked tokens) on fixed, identically masked sequences."""
    if batch is None:
        return None
    engine.module.eval()
    total, count = 0.0, 0
    for i in range(0, batch.input_ids.shape[0], EVAL_BATCH):
        sl = slice(i, i + EVAL_BATCH)
        gen = step_generator(seed + EVAL_SEED_OFFSET, i)
        inputs, labels = apply_mask(batch.input_ids[sl], batch.special[sl], batch.word_start[sl], spec, gen)
        n = int((labels != -100).sum())
        loss = engine.forward(inputs.to(device), labels.to(device))
        total += float(loss) * n
        count += n
    engine.module.train()
    return math.exp(min(total / max(count, 1), 50.0))


class MetricsLog:
    """metrics.jsonl + TensorBoard, rank 0 only; each record gets ``time`` (UTC, ISO 8601).

    On resume from step N, records after N are dropped from metrics.jsonl and TensorBoard hides its events
    from step N + 1 on (``purge_step``), so the steps the resumed run replays are not shown twice.
    """

    def __init__(self, folder: Path, enabled: bool, resume_step: int | None) -> None:
        self.enabled = enabled
        self.path = folder / "metrics.jsonl"
        self.writer = None
        if not enabled:
            return
        folder.mkdir(parents=True, exist_ok=True)
        kept = []
        if resume_step is not None and self.path.is_file():
            kept = [line for line in self.path.read_text().splitlines()
                    if line.strip() and json.loads(line).get("step", 0) <= resume_step]
        self.path.write_text("".join(line + "\n" for line in kept))
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError:  # TensorBoard is the [tracking] extra; metrics.jsonl is written either way
            log.info("TensorBoard is not installed (pip install 'domainbert[tracking]'): metrics.jsonl only")
            return
        purge = resume_step + 1 if resume_step is not None else None
        self.writer = SummaryWriter(log_dir=str(folder / "tensorboard"), purge_step=purge)

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {**record, "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")}
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        for key, value in record.items():
            if self.writer and key != "step" and isinstance(value, (int, float)) and value is not None:
                self.writer.add_scalar(f"{record.get('kind', 'train')}/{key}", value, record["step"])

    def close(self) -> None:
        if self.writer:
            self.writer.close()


def loadable_view(engine, tokenizer, rank: int):
    """``save_checkpoint``'s ``hf_view``: config and tokenizer beside the weights (the torch engine saves them
    under the model's own key names); DeepSpeed's shards are gathered into a ``model.safetensors``."""
    from domainbert.pretrain.engine import TorchEngine
    from domainbert.pretrain.outputs import strip_wrappers
    from domainbert.vocab.train import make_portable

    def write(folder: Path) -> None:
        # Every rank takes part in DeepSpeed's gather (ZeRO-3 partitions); rank 0 writes.
        weights = None if isinstance(engine, TorchEngine) else strip_wrappers(engine.export_state_dict())
        if rank != 0:
            return
        objective_of(engine).model.config.save_pretrained(folder)
        if weights is not None:
            from safetensors.torch import save_file

            save_file({k: v.contiguous() for k, v in weights.items()}, str(folder / "model.safetensors"),
                      metadata={"format": "pt"})
        tokenizer.save_pretrained(folder)
        make_portable(Path(folder))

    return write


def objective_of(engine) -> MLMObjective:
    """The ``MLMObjective`` inside an engine's module (under a DDP wrapper when there is one)."""
    module = engine.module
    while not isinstance(module, MLMObjective) and hasattr(module, "module"):
        module = module.module
    return module


def build_engine(objective, pcfg, total_steps: int, world: int):
    from domainbert.pretrain.engine import DeepSpeedEngine, TorchEngine

    if pcfg.deepspeed.enabled:
        from domainbert.pretrain.ds_config import build_ds_config

        ds_config = build_ds_config(pcfg, world, total_steps=total_steps,
                                    hidden_size=objective.model.config.hidden_size)
        return DeepSpeedEngine(objective, ds_config, pcfg, total_steps)
    if world > 1:
        objective = torch.nn.parallel.DistributedDataParallel(objective)
    return TorchEngine(objective, pcfg, total_steps)


@contextlib.contextmanager
def torch_threads(threads: int | None):
    """Run with ``threads`` CPU threads for torch (None: unchanged), restoring the previous count after."""
    previous = torch.get_num_threads()
    if threads:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def train_arm(cfg, arm: str, layout, *, fingerprint: str, throttle_s: float = 0.0) -> dict[str, Any] | None:
    """Train one arm to its budget (resuming from the newest checkpoint) and write its outputs.

    Args:
        cfg: the ``DomainConfig``.
        arm: ``continued``, ``extended`` or ``scratch``.
        layout: the ``RunLayout``.
        fingerprint: recorded in the model folder (skip-if-complete key, from ``stage.py``).
        throttle_s: sleep after each step (tests use it to SIGKILL a run mid-way on a fast machine).

    Returns:
        The summary on rank 0, None on other ranks.
    """
    with torch_threads(cfg.pretrain.torch_threads), signals.graceful_stop():
        return _train_arm(cfg, arm, layout, fingerprint=fingerprint, throttle_s=throttle_s)


def _train_arm(cfg, arm: str, layout, *, fingerprint: str, throttle_s: float) -> dict[str, Any] | None:
    from domainbert.pretrain.outputs import write_outputs

    pcfg = cfg.pretrain.for_arm(arm)  # the arm's own lr and warmup
    init_distributed(pcfg.deepspeed.enabled)
    rank, world = _dist_info()
    seed_everything(pcfg.seed, rank)
    device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0))) if torch.cuda.is_available() else torch.device("cpu")
    model, tokenizer, source = load_arm(cfg, arm, layout)
    plan = make_plan(pcfg, world)
    lowercase, field = ((cfg.tokenizer.lowercase, "tokenizer.lowercase") if arm == "scratch"
                        else (cfg.base_model.lowercase, "base_model.lowercase"))
    run_preflight(model, tokenizer, source=source, seq_len=max(p.seq_len for p in plan.phases),
                  lowercase=lowercase, lowercase_field=field, whole_word=pcfg.whole_word_mask,
                  nsp=pcfg.next_sentence_prediction)
    model.to(device)  # type: ignore[arg-type]  # transformers wraps PreTrainedModel.to, hiding its signature
    attention = training_attention(model, device, autocast_dtype(pcfg.precision))
    if pcfg.compile:
        model.base_model.forward = torch.compile(model.base_model.forward)
    objective = MLMObjective(model, sparse=pcfg.sparse_prediction, autocast_dtype=autocast_dtype(pcfg.precision),
                             nsp=pcfg.next_sentence_prediction)
    engine = build_engine(objective, pcfg, plan.total_steps, world)
    hf_view = loadable_view(engine, tokenizer, rank)
    spec = masking_spec(pcfg, tokenizer)
    stream: PairStream | TokenStream
    if pcfg.next_sentence_prediction:
        stream = PairStream(tokenizer, Path(layout.corpus), "train", shuffle_seed=pcfg.seed, seed=pcfg.seed)
    else:
        stream = TokenStream(tokenizer, Path(layout.corpus), "train", packing=pcfg.packing, shuffle_seed=pcfg.seed)
    out_dir = Path(layout.pretrain(arm))
    ckpt_root = out_dir / "checkpoints"

    eval_len = plan.phases[0].seq_len
    eval_sets = {"domain": pack_texts(tokenizer, _validation_texts(layout, pcfg.eval_documents), eval_len)}
    if pcfg.general_eval_corpus:
        eval_sets["general"] = pack_texts(tokenizer, read_jsonl_texts(pcfg.general_eval_corpus, pcfg.eval_documents),
                                          eval_len)

    state: dict[str, Any] = {"step": 0, "tokens": 0, "real_tokens": 0, "positions": 0, "loss_curve": [],
                             "train_seconds": 0.0, "before": {}, "resumed_from": [], "fingerprint": fingerprint}
    # The newest checkpoint that verifies (a truncated or tampered one is skipped with a warning).
    resumed = ckpt.resume(ckpt_root, engine, fingerprint=fingerprint, rank=rank, barrier=_barrier)
    latest = resumed[0] if resumed else None
    if resumed is not None:
        state = resumed[1]
        stream.load_state_dict(state.pop("data"))
        state["resumed_from"] = state.get("resumed_from", []) + [state["step"]]
        log.info("resuming %s from %s (step %d)", arm, latest, state["step"])
    metrics = MetricsLog(out_dir, rank == 0, state["step"] if latest is not None else None)
    if latest is None:
        for name, batch in eval_sets.items():
            state["before"][name] = evaluate(engine, batch, spec, pcfg.seed, device)
        metrics.write({"kind": "eval", "step": 0, **{f"{k}_perplexity": v for k, v in state["before"].items()}})

    fpt = flops_per_token(model, plan.phases[0].seq_len, pcfg.mask_rate, pcfg.sparse_prediction)
    peak = pcfg.peak_tflops * 1e12 if pcfg.peak_tflops else None
    window_tokens, window_start = 0, time.perf_counter()
    nsp_window = [0.0, 0.0, 0]  # NSP loss sum (per pair), correct, pairs since the last log
    nsp_last: dict[str, float | None] = {"nsp_loss": None, "nsp_accuracy": None}
    progress = _progress(rank == 0, plan.total_steps, state["step"], arm)
    # Not a terminal (a Prefect worker, Slurm, a pipe): a progress line every so often instead of tqdm's bar.
    lines = ProgressLine(plan.total_steps, state["step"]) if rank == 0 and not stderr_is_terminal() else None
    tokens_at_start = state["tokens"]
    engine.module.train()
    while state["step"] < plan.total_steps:
        step = state["step"]
        phase = plan.phase_at(step)
        t0 = time.perf_counter()
        losses, real = [], 0
        for micro in range(pcfg.grad_accum):
            batch = stream.next_sequences(phase.batch_size * world, phase.seq_len)
            inputs, labels = apply_mask(batch.input_ids, batch.special, batch.word_start, spec,
                                        step_generator(pcfg.seed, step, micro))
            sl = slice(rank * phase.batch_size, (rank + 1) * phase.batch_size)
            attn = batch.attention_mask[sl].to(device) if batch.attention_mask is not None else None
            pair = {}
            if batch.next_sentence_label is not None:
                # sentence pairs carry segment ids with their labels
                pair = {"token_type_ids": cast(torch.Tensor, batch.token_type_ids)[sl].to(device),
                        "next_sentence_label": batch.next_sentence_label[sl].to(device)}
            loss = engine.forward(inputs[sl].to(device), labels[sl].to(device), attn, **pair)
            engine.backward(loss)
            grad_norm = engine.step()
            losses.append(float(loss.detach()))
            nsp = objective_of(engine).last_nsp
            if nsp is not None:
                nsp_window[0] += float(nsp[0]) * nsp[2]
                nsp_window[1] += float(nsp[1])
                nsp_window[2] += nsp[2]
            real += batch.real_tokens
            state["positions"] += batch.input_ids.numel()
        state["step"] = step + 1
        state["real_tokens"] += real
        state["tokens"] += real
        loss_value = _mean_across(sum(losses) / len(losses))
        state["loss_curve"].append([state["step"], round(loss_value, 5)])
        elapsed = time.perf_counter() - t0
        state["train_seconds"] += elapsed
        window_tokens += real
        if progress:
            progress.update(1)
            progress.set_postfix(loss=f"{loss_value:.3f}")
        if lines and lines.due(state["step"]):
            log.info("pretrain %s: step %d/%d (%.0f%%), %s/%s tokens, loss %.4f, %s tokens/s, ETA %s", arm,
                     state["step"], plan.total_steps, 100 * state["step"] / plan.total_steps, f"{state['tokens']:,}",
                     f"{plan.planned_tokens:,}", loss_value,
                     f"{(state['tokens'] - tokens_at_start) / lines.elapsed():,.0f}",
                     duration(lines.eta_s(state["step"])),
                     extra={"progress": (state["step"], plan.total_steps, f"pretrain {arm}")})
        if state["step"] % pcfg.log_every == 0 or state["step"] == plan.total_steps:
            now = time.perf_counter()
            tps = window_tokens / max(now - window_start, 1e-9)
            if nsp_window[2]:
                pairs = _sum_across(nsp_window)
                nsp_last = {"nsp_loss": pairs[0] / pairs[2], "nsp_accuracy": pairs[1] / pairs[2]}
                nsp_window = [0.0, 0.0, 0]
            metrics.write({"kind": "train", "step": state["step"], "loss": loss_value, "lr": engine.current_lr(),
                           "grad_norm": grad_norm, "tokens": state["tokens"], "seq_len": phase.seq_len,
                           "real_tokens_per_s": tps, "real_token_fraction": state["real_tokens"] / state["positions"],
                           "mfu": (fpt * tps / peak) if peak else None,
                           **(nsp_last if pcfg.next_sentence_prediction else {})})
            window_tokens, window_start = 0, time.perf_counter()
        if throttle_s:
            time.sleep(throttle_s)
        if state["step"] % pcfg.checkpoint_every == 0 and state["step"] < plan.total_steps:
            ckpt.save_checkpoint(ckpt_root, state["step"], engine, {**state, "data": stream.state_dict()},
                                 rank=rank, barrier=_barrier, hf_view=hf_view)
            if rank == 0:
                ckpt.prune_checkpoints(ckpt_root, pcfg.keep_checkpoints)
            window_start = time.perf_counter()  # saving time is not training time
        if state["step"] < plan.total_steps and _stop_agreed(world):
            # SIGTERM/SIGUSR1: checkpoint this step (unless just saved) and stop; a rerun resumes here.
            if state["step"] % pcfg.checkpoint_every:
                ckpt.save_checkpoint(ckpt_root, state["step"], engine, {**state, "data": stream.state_dict()},
                                     rank=rank, barrier=_barrier, hf_view=hf_view)
                if rank == 0:
                    ckpt.prune_checkpoints(ckpt_root, pcfg.keep_checkpoints)
            metrics.close()
            raise signals.StopRequested(signals.requested_signal() or 15, f"at pretraining step {state['step']}")
    if progress:
        progress.close()

    after = {name: evaluate(engine, batch, spec, pcfg.seed, device) for name, batch in eval_sets.items()}
    metrics.write({"kind": "eval", "step": state["step"], **{f"{k}_perplexity": v for k, v in after.items()}})
    metrics.close()
    weights = engine.export_state_dict()
    if rank != 0:
        _barrier()
        return None
    tps = state["real_tokens"] / max(state["train_seconds"], 1e-9)
    summary = {
        "arm": arm, "source": source, "steps": state["step"], "planned_steps": plan.total_steps,
        "budget_tokens": pcfg.budget_tokens, "tokens_consumed": state["tokens"],
        "real_tokens_per_s": tps, "real_token_fraction": state["real_tokens"] / max(state["positions"], 1),
        "final_loss": state["loss_curve"][-1][1] if state["loss_curve"] else None,
        "domain_perplexity": after.get("domain"), "domain_perplexity_before": state["before"].get("domain"),
        "general_perplexity": after.get("general"), "general_perplexity_before": state["before"].get("general"),
        "flops_per_token": fpt, "peak_tflops": pcfg.peak_tflops, "mfu": (fpt * tps / peak) if peak else None,
        "wall_seconds": state["train_seconds"], "loss_curve": state["loss_curve"],
        "seq_len_phases": [[p.start, p.end, p.seq_len, p.batch_size] for p in plan.phases],
        "precision": pcfg.precision, "sparse_prediction": pcfg.sparse_prediction, "packing": pcfg.packing,
        "whole_word_mask": pcfg.whole_word_mask, "world_size": world,
        "next_sentence_prediction": pcfg.next_sentence_prediction, **nsp_last,
        "engine": "deepspeed" if pcfg.deepspeed.enabled else "torch", "attention": attention,
        "torch_threads": torch.get_num_threads(),
        "zero_stage": (engine.ds_config.get("zero_optimization", {}).get("stage", 0)  # a user's file may set it
                       if pcfg.deepspeed.enabled else None),
        "parameters": count_parameters(model), "vocab_size": len(tokenizer),
        "resumed_from": state.get("resumed_from", []), "lr": pcfg.lr, "warmup_ratio": pcfg.warmup_ratio,
        "start_head": start_head(cfg, arm, layout),
    }
    write_outputs(cfg, arm, layout, model, tokenizer, weights, summary, fingerprint)
    _barrier()
    return summary


def start_head(cfg, arm: str, layout) -> str:
    """Where the arm's MLM head came from, so that the report knows whether "before" figures mean anything."""
    from domainbert.pretrain.head_warmup import warm_model_folder

    if arm == "scratch":
        return "random"
    if warm_model_folder(cfg, layout) is not None:
        return "warmed-up"
    return "checkpoint" if cfg.pretrain.head_warmup.enabled == "auto" else "checkpoint or random (warm-up off)"


def _validation_texts(layout, limit: int) -> list[str]:
    from domainbert.corpus.store import iter_texts

    texts = []
    for text in iter_texts(Path(layout.corpus), "validation"):
        texts.append(text)
        if len(texts) >= limit:
            break
    return texts


def _progress(enabled: bool, total: int, initial: int, arm: str):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=f"pretrain {arm}", unit="step", disable=None)
