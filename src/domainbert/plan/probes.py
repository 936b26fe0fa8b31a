"""Seconds on this machine, measured for ``domainbert plan``: short timed probes, cached per machine.

A pretraining probe is a handful of real steps of the base architecture (random weights) in the shape a stage
will run: pretraining at ``pretrain.batch_size`` x ``seq_len`` with the arm's objective, the precision it
resolves to on this CPU (bf16 only where the CPU computes it natively, ``resolve_precision``) and the attention
the trainer picks (``training_attention``); the base warm-up with its encoder frozen when it trains the head
alone. It times a few steps after one warm-up step and keeps the median, at the machine's current load: a loaded
machine gets a slower rate. Its results are cached under ``machine_cache()/plan-calibration/`` keyed by the
probe's shape, the torch version and the CPU; a cached rate is reused while the load is near the one it was
measured at (within half the CPU count) and for a day; one plan probes a shape once. A fine-tuning probe is a
real run of the task on the base cut short (``run_rates``), as many at once as ``--workers`` trains side by
side, timed each plan. Without calibration ``plan.estimate.estimate`` guesses instead, instantly: 6 FLOPs per
parameter and token at ``GUESS_FLOPS``. Corpus and vocabulary are not timed (they depend on the input files).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import platform
import statistics
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from domainbert.core.paths import machine_cache

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.config.finetune import TaskConfig
    from domainbert.config.pretrain import PretrainConfig

CACHE = "plan-calibration"
STEPS = 3  # timed steps per probe, after one warm-up step
# Real examples a fine-tuning probe trains on (8 steps at batch 16) and scores: fewer let a run's fixed costs
# (its first steps, each evaluation's setup) weigh on every example (bench/results/plan_accuracy_cpu_2026-11.md).
SAMPLE = (128, 256)
# Rounds of the fine-tuning probe: the median of three reads through a burst of load that one probe takes whole
# (four single probes within four minutes gave 77-171 ms an example under a changing load).
ROUNDS = 3
# Two rounds whose every part agrees within this ratio end the probe: with 2t of 3t reads known, the median
# of all 3t lies between the known ones' least and greatest, so a third round could not move it out of the band.
# 15% is half the plan's accuracy against real runs (bench/results/plan_accuracy_cpu_2026-11.md).
AGREE = 1.15
# The load-and-encode part varies by tenths of a second between reads; paid once a run, half a second is seconds
# of an estimate in minutes, so its reads agree within this too.
SETUP_SLACK_S = 0.5
MAX_AGE_S = 24 * 3600
GUESS_FLOPS = 5e10  # the uncalibrated guess: a 2020s CPU core pair in fp32, order of magnitude only
clock = time.perf_counter  # what a probe's steps are timed with (tests put a clock of their own here)
_timed_here: dict[Any, Rate] = {}  # probes this process ran, whatever the load does after


@dataclass(frozen=True)
class Rate:
    """Seconds per token of one probe, and what was timed (for the plan's "how" line)."""

    seconds_per_token: float
    what: str
    load: float
    cached: bool = False

    @property
    def tokens_per_s(self) -> float:
        return 1 / self.seconds_per_token


def current_load() -> float:
    """The 1-minute load average (0 where the platform has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return 0.0


def _machine() -> dict[str, Any]:
    import torch

    return {
        "torch": torch.__version__,
        "cpu": platform.processor() or platform.machine(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "cores": os.cpu_count(),
    }


def _cache_file(shape: dict[str, Any]) -> Any:
    key = hashlib.sha256(json.dumps({**shape, **_machine()}, sort_keys=True).encode()).hexdigest()[:24]
    return machine_cache() / CACHE / f"{key}.json"


def _cached(shape: dict[str, Any]) -> Rate | None:
    try:
        entry = json.loads(_cache_file(shape).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    fresh = time.time() - entry["measured_at"] < MAX_AGE_S
    near = abs(current_load() - entry["load"]) <= 0.5 * (os.cpu_count() or 1)
    return Rate(entry["seconds_per_token"], entry["what"], entry["load"], cached=True) if fresh and near else None


def _store(shape: dict[str, Any], rate: Rate) -> None:
    path = _cache_file(shape)
    entry = {"seconds_per_token": rate.seconds_per_token, "what": rate.what, "load": rate.load}
    try:  # a read-only cache only costs the next plan a new probe
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({**entry, "shape": shape, "measured_at": time.time()}), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass


def _timed(step: Any, tokens: int) -> float:
    """Median seconds per token of ``STEPS`` calls of ``step`` after one warm-up call."""
    times = []
    for _ in range(STEPS + 1):
        t0 = clock()
        step()
        times.append(clock() - t0)
    return statistics.median(times[1:]) / tokens


def measure(shape: dict[str, Any], probe: Any, what: str) -> Rate:
    """The cached rate of ``shape`` when still valid, else ``probe()`` (seconds per token) timed now, cached."""
    key = _cache_file(shape)
    found = _timed_here.get(key) or _cached(shape)  # one plan never probes a shape twice
    if found is not None:
        return found
    rate = Rate(probe(), what, current_load())
    _store(shape, rate)
    _timed_here[key] = Rate(rate.seconds_per_token, what, rate.load, cached=True)
    return rate


def _base_config(cfg: DomainConfig) -> Any:
    from transformers import AutoConfig

    from domainbert.core.models import resolve_model_ref

    return AutoConfig.from_pretrained(resolve_model_ref(cfg.base_model.name_or_path))


@dataclass(frozen=True)
class _PlannedVocabulary:
    """What ``pretrain.model.scratch_config`` reads of a tokenizer, before the domain's is trained: its size
    (the configured one, else the base's) and a padding id; no other special id."""

    size: int
    pad_token_id: int = 0

    def __len__(self) -> int:
        return self.size


def architecture(cfg: DomainConfig, arm: str | None) -> Any:
    """The architecture a pretraining step of ``arm`` trains: a from-scratch arm's own (BERT-mini is 2.5 times
    cheaper a token than the base's 6 x 384), sized to the configured domain vocabulary; else the base's."""
    from domainbert.config.pretrain import ARMS

    base = _base_config(cfg)
    if arm is None or not ARMS[arm].from_scratch:
        return base
    from domainbert.pretrain.model import scratch_config

    vocabulary: Any = _PlannedVocabulary(cfg.tokenizer.size_given(base.vocab_size))  # read as a tokenizer
    return scratch_config(cfg, vocabulary)


def scratch_model(cfg: DomainConfig) -> Any:
    """A from-scratch arm's model, random and sized to the configured vocabulary (its FLOPs and disk in plan)."""
    from transformers import AutoModelForMaskedLM

    return AutoModelForMaskedLM.from_config(architecture(cfg, "scratch"))


def _step_settings(p: PretrainConfig, arm: str | None) -> tuple[PretrainConfig, str, int, int]:
    """The settings a pretraining step of ``arm`` (None: the base warm-up) runs with: its masking settings,
    precision, batch size and sequence length."""
    if arm is None:  # the warm-up masks as BERT did, whatever the arms do
        from domainbert.pretrain.warmup_training import warmup_masking

        warmup = p.base_warmup
        return warmup_masking(p), warmup.precision, warmup.batch_size, warmup.seq_len
    pcfg = p.for_arm(arm)
    return pcfg, pcfg.precision, pcfg.batch_size, pcfg.seq_len


def pretrain_rate(cfg: DomainConfig, arm: str | None, head_only: bool = False) -> Rate:
    """Seconds per token of a pretraining step of ``arm`` (None: the base warm-up) as its stage runs it."""
    import torch

    from domainbert.core.distributed import resolve_precision
    from domainbert.pretrain.runtime import autocast_dtype, torch_threads

    config = architecture(cfg, arm)
    p = cfg.pretrain
    pcfg, precision, batch, seq_len = _step_settings(p, arm)
    resolved = resolve_precision(precision, torch.device("cpu"))
    objective = pcfg.objective(arm) if arm else "mlm"
    shape = {
        "probe": "pretrain",
        "config": config.to_dict(),
        "batch": batch,
        "seq_len": seq_len,
        "precision": resolved,
        "objective": objective,
        "sparse": pcfg.sparse_prediction,
        "mask_rate": pcfg.mask_rate,
        "head_only": head_only,
        "threads": p.torch_threads,
    }
    what = f"{batch} x {seq_len} tokens, {resolved}, {objective}" + (", head only" if head_only else "")
    what += f", {p.torch_threads or 'default'} thread(s)"

    def probe() -> float:
        from transformers import AutoModelForMaskedLM

        from domainbert.core.optim import adamw, param_groups
        from domainbert.pretrain.model import training_attention
        from domainbert.pretrain.setup import build_objective

        model = AutoModelForMaskedLM.from_config(config)
        dtype = autocast_dtype(precision)
        training_attention(model, torch.device("cpu"), dtype)
        if head_only:
            for param in model.base_model.parameters():
                param.requires_grad_(False)
        loss_of = build_objective(pcfg, arm or "continued", model, dtype)
        opt = adamw(param_groups(model, 0.01), lr=1e-5)
        ids = torch.randint(5, config.vocab_size, (batch, seq_len))
        labels = ids.clone()
        labels[torch.rand(ids.shape) >= pcfg.mask_rate] = -100

        def step() -> None:
            loss_of(ids, labels).backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            opt.zero_grad()

        with torch_threads(p.torch_threads):
            return _timed(step, batch * seq_len)

    return measure(shape, probe, what)


@dataclass(frozen=True)
class RunRates:
    """What one fine-tuning run of a task costs on this machine, from a short real run (``run_rates``)."""

    setup_s: float
    train_s_per_example: float
    score_s_per_example: float
    what: str


def run_rates(cfg: DomainConfig, task: TaskConfig, together: int = 1) -> RunRates:
    """A fine-tuning run of ``task`` on the base cut short and timed with the run's own code
    (``runner.timed_short_run``: the task loaded and encoded, one epoch on ``SAMPLE[0]`` training examples drawn
    at random, ``SAMPLE[1]`` validation examples predicted and scored), ``together`` such runs at once in threads
    (``--workers``), ``ROUNDS`` times (two when their every part agrees within ``AGREE``), the median of each
    part. Timing three synthetic steps at the mean length missed half of a run: its padding, its loop, decoding
    and the task's metrics. Not cached: it reads the task's files."""
    from concurrent.futures import ThreadPoolExecutor

    from domainbert.finetune.runner import timed_short_run
    from domainbert.finetune.stage import settings_for
    from domainbert.pretrain.runtime import torch_threads
    from domainbert.task_data.splits import load_task

    f, data = cfg.finetune, load_task(task)
    # a short run timed on its own: it stops on nothing, so no stopping step chosen by the reference is needed
    each_run = cfg.model_copy(update={"finetune": f.model_copy(update={"early_stopping": "each_run"})})
    settings = settings_for(each_run, 0, "finetune", task)
    quiet = logging.getLogger("domainbert.finetune")  # the short run's progress lines are not the plan's
    level = quiet.level
    quiet.setLevel(logging.WARNING)
    try:
        with torch_threads(f.torch_threads), ThreadPoolExecutor(together) as pool:
            one_load = threading.Lock()  # loads one at a time (``timed_short_run``), the runs side by side
            args = (data, cfg.base_model.name_or_path, settings, f.max_length, f.pooling, SAMPLE, clock, one_load)
            parts: list[tuple[float, float, float]] = []
            rounds = 0
            while rounds < ROUNDS and not (rounds == 2 and _agree(parts)):
                parts += pool.map(lambda _: timed_short_run(*args), range(together))
                rounds += 1
    finally:
        quiet.setLevel(level)
    setup, train, score = (statistics.median(p[k] for p in parts) for k in range(3))
    threads = f"{f.torch_threads or 'default'} thread(s)" + (f", {together} runs at once" if together > 1 else "")
    what = f"{SAMPLE[0]} examples trained and {SAMPLE[1]} scored, {threads}, the median of {rounds} rounds"
    return RunRates(setup, train, score, what)


def _agree(parts: list[tuple[float, float, float]]) -> bool:
    """Whether every part's reads lie within ``AGREE`` of each other (the setup's also within ``SETUP_SLACK_S``)."""
    low, high = [min(p[k] for p in parts) for k in range(3)], [max(p[k] for p in parts) for k in range(3)]
    setup_agrees = high[0] - low[0] <= SETUP_SLACK_S or high[0] <= AGREE * low[0]
    return setup_agrees and all(high[k] <= AGREE * low[k] for k in (1, 2))
