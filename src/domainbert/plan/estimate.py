"""How long a planned run will take on this machine (``domainbert plan``'s estimate, and ``plan --detect``'s
price of a design), stage by stage, from the plans ``plan.stage_plans`` makes.

The estimate is a calibration, not a promise: a few real steps of the base architecture (random weights, this
machine, ``torch_threads``; pretraining's own objective with sparse prediction, the encoder frozen for a
head-only base warm-up; ``plan.probes``, cached per machine and shape) give seconds per pretraining token, and a
short real run of each task gives a fine-tuning run's setup and its seconds per trained and per scored example.
Uncalibrated, it is an instant guess from the parameter count. Not included: the arms' evaluations at start and
end and their checkpoints, the floors, collapse retries, and corpus and vocabulary time (which depends on the
input files, not on the model). This module trains nothing that is kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domainbert.config.pretrain import ARMS, split_replicate
from domainbert.plan.stage_plans import StagePlan, TimeEstimate, base_architecture, stage_plans

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig


def _finetune_examples(cfg: DomainConfig, task: Any, once: bool) -> tuple[float, float]:
    """Examples one fine-tuning run of ``task`` trains on (every epoch) and scores (validation
    ``evals_per_epoch`` times an epoch from epoch ``eval_delay`` on and at the schedule's end, or just once for a
    run that stops at the reference's step: ``once``, and the test split once) over its schedule (its epochs, at
    least ``finetune.min_steps`` updates); early stopping not foreseen."""
    import math

    from domainbert.config.finetune import first_validated_step
    from domainbert.task_data.splits import load_task

    f, data = cfg.finetune, load_task(task)
    n_train, n_val, n_test = (len(data.splits[s]) for s in ("train", "validation", "test"))
    steps_per_epoch = max(1, math.ceil(n_train / f.batch_size))
    steps = max(math.ceil((task.epochs or f.epochs) * steps_per_epoch), f.min_steps)  # the trainer's schedule
    every = max(1, steps_per_epoch // f.evals_per_epoch)
    first = first_validated_step(task.eval_delay, steps_per_epoch)
    evals = 1 if once else sum(1 for k in range(every, steps + 1, every) if k >= first) + (steps % every != 0)
    return n_train * steps / steps_per_epoch, max(1, evals) * n_val + n_test


def _mean_tokens(cfg: DomainConfig, task: Any) -> float:
    """Tokens the base's tokenizer makes of an example of ``task``'s training split, on average, each capped at
    ``max_length`` (a run pads each batch to its own longest; a long document's further windows, ``chunks``,
    are not counted)."""
    from transformers import AutoTokenizer

    from domainbert.core.models import resolve_model_ref
    from domainbert.task_data.splits import load_task

    tok = AutoTokenizer.from_pretrained(resolve_model_ref(cfg.base_model.name_or_path))
    train = load_task(task).splits["train"]
    if task.type == "ner":
        ids = tok([ex.tokens for ex in train], is_split_into_words=True)["input_ids"]
    else:
        pairs = [ex.text_pair for ex in train]
        texts = [ex.text for ex in train]
        ids = (tok(texts, [p or "" for p in pairs]) if any(pairs) else tok(texts))["input_ids"]
    return sum(min(len(i), cfg.finetune.max_length) for i in ids) / max(1, len(ids))


def _finetune_seconds(
    cfg: DomainConfig,
    todo: list[str],
    once: list[bool],
    workers: int,
    calibrate: bool,
    guess: float,
    how: list[str],
    measured: dict[tuple[str, int], Any],
) -> float:
    """Seconds the fine-tuning runs of the ``todo`` tasks take over ``workers`` processes (``once``: which of them
    validate once, at the reference's step): each run its setup, training and scored examples at the rates a
    short real run of its task measured here (noted in ``how``), or without ``calibrate`` every example at its
    task's mean length (``_mean_tokens``) at ``guess`` seconds per training token. ``measured`` holds the short
    runs this command has timed, by task and runs at once (filled here): none is timed twice."""
    from domainbert.plan import probes as timing

    rates: dict[str, Any] = {}
    together = max(1, min(workers, len(todo)))  # runs that train side by side
    for task in cfg.finetune.tasks:
        if task.name in todo and calibrate:
            if (task.name, together) not in measured:
                measured[task.name, together] = timing.run_rates(cfg, task, together)
            rates[task.name] = r = measured[task.name, together]
            how.append(
                f"{task.name}: a short real run ({r.what}): {r.setup_s:.1f} s to load and encode, "
                f"{1000 * r.train_s_per_example:.0f} ms an example to train, {1000 * r.score_s_per_example:.1f} "
                "ms an example to score (timed now)"
            )
    from collections import Counter

    tasks = {t.name: t for t in cfg.finetune.tasks}
    lengths: dict[str, float] = {}  # per task, tokenized once whatever kinds of run it has
    total = 0.0
    # each kind of run sized once (a task's files are read once or twice, not once per run)
    for (name, validates_once), runs in Counter(zip(todo, once, strict=True)).items():
        train, scored = _finetune_examples(cfg, tasks[name], validates_once)
        if name in rates:
            r = rates[name]
            total += runs * (r.setup_s + train * r.train_s_per_example + scored * r.score_s_per_example)
        else:  # every example at its task's mean length, a third of a training token's cost to score one
            if name not in lengths:
                lengths[name] = _mean_tokens(cfg, tasks[name])
            total += runs * (train + scored / 3) * lengths[name] * guess
    return total / max(1, workers)


def estimate(
    cfg: DomainConfig,
    plans: list[StagePlan],
    workers: int = 1,
    calibrate: bool = True,
    measured: dict[tuple[str, int], Any] | None = None,
) -> TimeEstimate | None:
    """Seconds each model stage that will run should take on this machine, from probes timed here and now
    (``plan.probes``, cached per machine and shape) or, with ``calibrate`` off, an instant guess from the
    parameter count (``plan.probes.GUESS_FLOPS``); None when the base's architecture is unreachable (a Hub id
    offline): nothing to time. An arm is its training steps and its perplexity curve (``watch_share`` of them);
    the evaluations at its start and end and its checkpoints are not included. A fine-tuning run is its setup,
    its training examples and its scored ones, each at the cost a short real run of the task measured here
    (``plan.probes.run_rates``, as many at once as ``workers`` trains side by side; ``measured``: those a call
    before this one in the same command timed, which are reused)."""
    from domainbert.plan import probes as timing
    from domainbert.pretrain.base_warmup import NAME as WARMUP

    model = base_architecture(cfg)
    if model is None:
        return None
    params = sum(p.numel() for p in model.parameters())
    guess = 6 * params / timing.GUESS_FLOPS  # seconds per training token; a third of it to score one
    # a classifier reads its word embeddings, it does not multiply by them (a masked LM's tied decoder does)
    encoder = params - sum(p.numel() for p in model.get_input_embeddings().parameters())
    how: list[str] = []
    seen: dict[str, Any] = {}  # one probe per shape, whichever stages share it

    def per_token(key: str, found: Any) -> float:
        """Seconds per token of probe ``key``: the guess, or ``found()`` (a ``Rate``, noted once)."""
        if not calibrate:
            return guess / 3 if key.startswith("score") else guess
        if key not in seen:
            seen[key] = r = found()
            source = f"cached, measured at load {r.load:.1f}" if r.cached else f"measured now at load {r.load:.1f}"
            how.append(f"{key}: {timing.STEPS} steps of {r.what} at {r.tokens_per_s:,.0f} tokens/s ({source})")
        return float(seen[key].seconds_per_token)

    out: dict[str, float] = {}
    for p in plans:
        tokens = p.detail.get("tokens")
        if tokens is None or p.status == "up to date" or not p.name.startswith("pretrain "):
            continue
        if p.name == f"pretrain {WARMUP}":
            head = p.detail.get("train") == "head"
            key = "warm-up, head only" if head else "warm-up"
            out[p.name] = tokens * per_token(key, lambda h=head: timing.pretrain_rate(cfg, None, h))
        else:
            arm = split_replicate(p.name.removeprefix("pretrain "))[0]
            pcfg = cfg.pretrain.for_arm(arm)
            watch = 1 + (pcfg.watch_share if pcfg.watch_points else 0.0)  # the perplexity curve's budget
            key = f"pretrain {pcfg.objective(arm)}" + (" from scratch" if ARMS[arm].from_scratch else "")
            out[p.name] = tokens * watch * per_token(key, lambda a=arm: timing.pretrain_rate(cfg, a))
    ft = next(p for p in plans if p.name == "finetune")
    if ft.detail["todo_tasks"]:
        detail = ft.detail
        out["finetune"] = _finetune_seconds(
            cfg,
            detail["todo_tasks"],
            detail["todo_validate_once"],
            workers,
            calibrate,
            6 * encoder / timing.GUESS_FLOPS,
            how,
            {} if measured is None else measured,
        )
        if cfg.finetune.early_stopping == "each_run":  # where validation stops rising is unknown before the run
            how.append(
                "fine-tuning at most: each run is counted to the end of its schedule; early stopping ends a run "
                f"after {cfg.finetune.early_stopping_patience} evaluations without a gain on validation, sooner"
            )
        if factor := cfg.finetune.collapse_retry_lr_factor:  # a retry is a whole run again; how many, unknown
            how.append(
                f"not in it: collapse retries (finetune.collapse_retry_lr_factor {factor:g}): each run whose "
                f"validation predictions collapse trains once more, up to ~{out['finetune'] / 60:.1f} min more if "
                "every one did"
            )
    if not calibrate:
        how.append(
            f"uncalibrated guess: 6 FLOPs per parameter and token ({params / 1e6:.1f}M parameters; "
            f"fine-tuning {encoder / 1e6:.1f}M, without the word embeddings, each example at its task's mean "
            f"length) at {timing.GUESS_FLOPS:.0e} FLOP/s; drop --no-calibrate to time this machine"
        )
    return TimeEstimate(out, how, calibrate)


def estimate_seconds(cfg: DomainConfig, plans: list[StagePlan], workers: int = 1) -> dict[str, float] | None:
    """``estimate``'s seconds per stage, calibrated."""
    found = estimate(cfg, plans, workers)
    return found.seconds if found else None


def design_costs(
    cfg: DomainConfig, workers: int = 1, calibrate: bool = True, measured: dict[tuple[str, int], Any] | None = None
) -> tuple[float, float] | None:
    """Seconds on this machine that one pretraining replicate of every arm takes, and one fine-tuning run's share
    of the wall time with ``workers`` side by side (the mean over the tasks), whatever the run folder holds:
    ``estimate`` over the run planned from nothing (``measured``: the short runs the plan already timed); None
    where nothing can be timed. ``plan --detect`` prices seeds x replicates with them."""
    import tempfile
    from pathlib import Path

    from domainbert.core.paths import RunLayout
    from domainbert.pretrain.base_warmup import NAME as WARMUP

    one = cfg.model_copy(update={"pretrain": cfg.pretrain.model_copy(update={"replicates": 1})})
    with tempfile.TemporaryDirectory() as tmp:
        plans = stage_plans(one, RunLayout(Path(tmp)))
        timed = estimate(one, plans, workers, calibrate, measured)
    if timed is None:
        return None
    arms = sum(s for name, s in timed.seconds.items() if name.startswith("pretrain ") and name != f"pretrain {WARMUP}")
    runs = len(next(p for p in plans if p.name == "finetune").detail["todo_tasks"])
    return arms, timed.seconds.get("finetune", 0.0) / max(runs, 1)  # already shared over the workers
