"""What a run will do before it starts (``domainbert plan``): stages, budgets, run counts and a time estimate.

For each stage it says whether it will run, is up to date (skipped) or will rerun because its recorded
fingerprint no longer matches the config and inputs; a stage after one that will run is listed as running
after it (its inputs do not exist yet). Per pretraining arm: optimizer steps, tokens and training FLOPs (the
same per-token estimate the trainer reports). Fine-tuning: the number of runs and how many are current.

How long the stages that will run should take on this machine is ``plan.estimate``'s (it reads these plans);
``render`` prints both. This module trains nothing and times nothing."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from domainbert.config.pretrain import ARMS, ArmKind, replicate_name, split_replicate
from domainbert.config.start_from import start_of

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from domainbert.config.domain import DomainConfig
    from domainbert.config.pretrain import PretrainConfig
    from domainbert.core.paths import RunLayout


@dataclass
class StagePlan:
    name: str
    status: str  # "will run", "up to date", "will rerun: ..." or "after <stage>"
    detail: dict[str, Any] = field(default_factory=dict)


def base_architecture(cfg: DomainConfig) -> PreTrainedModel | None:
    """The base architecture on the meta device (no weights read, no memory), or None when unreachable."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    from domainbert.core.models import resolve_model_ref

    try:
        config = AutoConfig.from_pretrained(resolve_model_ref(cfg.base_model.name_or_path))
    except Exception:  # noqa: BLE001 - offline with a Hub id: the plan says n/a instead of failing
        return None
    with torch.device("meta"):
        return AutoModelForMaskedLM.from_config(config)


def stage_plans(cfg: DomainConfig, layout: RunLayout) -> list[StagePlan]:
    """Every stage of a ``domainbert run`` with its status (``plan.stage_state``, as the flows decide) and sizes."""
    from domainbert.finetune import recipe
    from domainbert.finetune.jobs import FLOOR, stops_on_reference
    from domainbert.finetune.stage import expected_results
    from domainbert.plan.stage_state import corpus_state, status, vocab_state

    plans = [StagePlan("corpus", status(corpus_state(cfg, layout), layout.corpus))]
    upstream = None if plans[0].status == "up to date" else "corpus"
    vocab = f"after {upstream}" if upstream else status(vocab_state(cfg, layout), layout.vocab)
    plans.append(StagePlan("vocab", vocab))
    corpus_pending = upstream
    vocab_pending = upstream or (None if vocab == "up to date" else "vocab")
    model = base_architecture(cfg)
    plans.append(_warmup_plan(cfg, layout))
    warm_pending = plans[-1].name if plans[-1].status.startswith(("will run", "cached")) else None
    upstream = vocab_pending or warm_pending  # fine-tuning follows every model
    for arm in cfg.pretrain.replicate_names():
        waits_for = _start_upstream(cfg, arm, plans) or _arm_upstream(
            ARMS[split_replicate(arm)[0]], corpus_pending, vocab_pending, warm_pending, plans
        )
        plans.append(_arm_plan(cfg, layout, arm, model, waits_for))
    states = [r for r in expected_results(cfg, layout, planned=True) if r["model"] != FLOOR]
    counts = {
        s: sum(r["state"] == s for r in states)
        for s in ("current", "stale", "damaged", "missing", "unrecorded", "no model")
    }
    # an arm that will be (re)trained changes, so do its fine-tuning runs; the base model's stay current
    retrained = {
        p.name.removeprefix("pretrain ") for p in plans if p.name.startswith("pretrain ") and p.status != "up to date"
    }
    search = recipe.plan_counts(cfg, layout, warm_pending is not None)
    # the search's run at the chosen rate becomes base's first seed (matrix.adopt): not trained twice
    adopted = {("base", task, cfg.finetune.seeds[0]) for task in search.get("searched", [])}
    pending = [
        r
        for r in states
        if (r["state"] != "current" or r["model"] in retrained) and (r["model"], r["task"], r["seed"]) not in adopted
    ]
    todo = [r["task"] for r in pending] + search.get("todo_tasks", [])
    # which of them validate once, at the reference's step; frozen runs and the search's own runs validate
    # every epoch
    once = [stops_on_reference(cfg, r["mode"]) for r in pending] + [False] * len(search.get("todo_tasks", []))
    ft_status = "up to date" if not todo else f"will run {len(todo)} of {len(states) + search.get('runs', 0)}"
    ft_status += f" (after {upstream})" if upstream and todo else ""
    plans.append(
        StagePlan(
            "finetune",
            ft_status,
            {
                "runs": len(states),
                "floors": len(cfg.finetune.tasks),
                "todo_tasks": todo,
                "todo_validate_once": once,
                **counts,
                **({"search": search} if search else {}),
                **_forgetting_detail(cfg, states, todo),
            },
        )
    )
    return plans


def _start_upstream(cfg: DomainConfig, name: str, plans: list[StagePlan]) -> str | None:
    """The arm whose checkpoint ``name`` starts from (``pretrain.start_from``), while that arm will train."""
    arm, replicate = split_replicate(name)
    start = start_of(cfg.pretrain.start_from, arm)
    if start is None:
        return None
    source = next((p for p in plans if p.name == f"pretrain {replicate_name(start.arm, replicate)}"), None)
    return None if source is None or source.status == "up to date" else source.name


def _arm_upstream(
    kind: ArmKind, corpus: str | None, vocab: str | None, warm: str | None, plans: list[StagePlan]
) -> str | None:
    """The stage an arm waits for: what its start and its text are built from (``ArmKind``)."""
    if kind.start == "continued":
        continued = next((p for p in plans if p.name == "pretrain continued"), None)
        return None if continued is None or continued.status == "up to date" else "pretrain continued"
    if kind.from_scratch:
        return vocab
    start = vocab if kind.start == "extended" else None
    data = corpus if kind.data in ("corpus", "curated") else None
    return start or data or warm


def _arm_plan(cfg: DomainConfig, layout: RunLayout, arm: str, model: Any, waits_for: str | None) -> StagePlan:
    """One arm: its steps, tokens, rate and FLOPs (a task-text arm's estimated from the task files until its
    task text is built) and status."""
    from domainbert.core.errors import ModelError
    from domainbert.plan.stage_state import pretrain_state, status
    from domainbert.pretrain.step_plan import make_plan
    from domainbert.pretrain.task_text import arm_config, read_manifest

    name, (arm, replicate) = arm, split_replicate(arm)
    kind = ARMS[arm]
    estimated = kind.on_task_text and read_manifest(layout, kind.data == "curated") is None
    try:
        pcfg = arm_config(cfg, arm, layout.for_replicate(replicate), estimate=True)
    except ModelError:  # the base tokenizer is out of reach (a Hub id offline): the task text cannot be sized
        detail: dict[str, Any] = {
            "epochs": cfg.pretrain.tapt.epochs,
            "tokens": None,
            "lr": cfg.pretrain.for_arm(arm).lr,
        }
        return StagePlan(f"pretrain {name}", f"after {waits_for}" if waits_for else "will run", detail)
    plan = make_plan(pcfg, pcfg.launch.num_processes * pcfg.launch.num_nodes)
    detail = {
        "steps": plan.total_steps,
        "tokens": plan.planned_tokens,
        "lr": pcfg.lr,
        "objective": pcfg.objective(arm),
        "estimated": estimated,
        "schedule": _schedule_line(pcfg, arm),
    }
    if model is not None and kind.from_scratch:
        from domainbert.plan.probes import scratch_model

        model = scratch_model(cfg)
    if model is not None:
        from domainbert.pretrain.objective import detection_flops, flops_per_token

        seq_len = plan.phases[0].seq_len
        per_token = (
            detection_flops(model, seq_len, pcfg.mean_mask_rate, pcfg.rtd.generator_layers)
            if pcfg.objective(arm) == "rtd"
            else flops_per_token(model, seq_len, pcfg.mean_mask_rate, pcfg.sparse_prediction)
        )
        detail["flops"] = per_token * plan.planned_tokens
        from domainbert.pretrain.checkpoint import disk_needed

        # The base architecture's size (an extended vocabulary differs by a few percent) or the scratch model's.
        one, peak = disk_needed(sum(p.numel() for p in model.parameters()), pcfg.keep_checkpoints)
        detail["disk"] = {"checkpoint": one, "peak": peak, "checkpoints": pcfg.keep_checkpoints + 1}
    folder = layout.pretrained_model(name)
    arm_status = f"after {waits_for}" if waits_for else status(pretrain_state(cfg, layout, name), folder)
    return StagePlan(f"pretrain {name}", arm_status, detail)


def _schedule_line(pcfg: PretrainConfig, arm: str) -> str:
    """The arm's schedules in one line: its start when it starts from another arm's checkpoint (with no
    re-warm-up, no warm-up of its own), the rates, the replay."""
    start = start_of(pcfg.start_from, arm)
    if start is not None and not start.rewarm:
        pcfg = pcfg.model_copy(update={"warmup_ratio": 0.0})
    line = pcfg.schedule_line() + (
        f"; replay {pcfg.replay.fraction:.0%} general text" if pcfg.replay.replays(arm) else ""
    )
    return f"{start.line()}; {line}" if start is not None else line


def _warmup_plan(cfg: DomainConfig, layout: RunLayout) -> StagePlan:
    """The base warm-up (before the arms; ``base_warmup.warmup_status``), sized as full training steps."""
    from domainbert.pretrain.base_warmup import NAME, warmup_status

    hw = cfg.pretrain.base_warmup
    state = warmup_status(cfg, layout)
    if state in ("up to date", "off") or state.startswith("not needed"):
        return StagePlan(f"pretrain {NAME}", "up to date" if state == "up to date" else state)
    if state.startswith("cached"):  # a copy and four evaluations, no training
        return StagePlan(f"pretrain {NAME}", state, {"train": hw.train})
    detail = {
        "steps": hw.steps,
        "tokens": hw.steps * hw.batch_size * hw.seq_len,
        "lr": hw.peak_lr,
        "train": hw.train,
        **({"encoder_lr": hw.peak_lr * hw.encoder_lr_scale} if hw.train == "full" and hw.encoder_lr_scale < 1 else {}),
        "flops": None,
    }
    return StagePlan(f"pretrain {NAME}", state, detail)


@dataclass
class TimeEstimate:
    """Seconds per model stage that will run, and how they were estimated (one line per probe or guess)."""

    seconds: dict[str, float]
    how: list[str]
    calibrated: bool


def _forgetting_detail(cfg: DomainConfig, states: list[dict[str, Any]], todo: list[str]) -> dict[str, Any]:
    """The general-English task's share of the fine-tuning runs (``finetune.forgetting_task``), if it is on."""
    names = [t.name for t in cfg.finetune.tasks if t.role == "general"]
    if not names:
        return {}
    runs = sum(r["task"] in names for r in states)
    return {"forgetting": {"tasks": names, "runs": runs, "todo": sum(t in names for t in todo)}}


def forgetting_line(detail: dict[str, Any]) -> str:
    """One line: what the forgetting meter adds to fine-tuning (its runs, and how many are still to run)."""
    f = detail["forgetting"]
    return (
        f"  forgetting meter: {', '.join(f['tasks'])}, {f['runs']} of the {detail['runs']} runs (every model and "
        f"seed), {f['todo']} to run; finetune.forgetting_task.enabled: false drops it"
    )


def render(plans: list[StagePlan], seconds: dict[str, float] | None, how: TimeEstimate | None = None) -> str:
    """The plan as plain text, one line per stage, and how the time was estimated."""
    lines = []
    for p in plans:
        d = p.detail
        sizes = ""
        if "steps" in d:
            flops = (
                f", {d['flops']:.2e} FLOPs"
                if d.get("flops")
                else ""
                if "flops" in d
                else ", FLOPs n/a (base config unreachable)"
            )
            objective = ", replaced-token detection" if d.get("objective") == "rtd" else ""
            estimated = " (task text estimated from the task files)" if d.get("estimated") else ""
            lr = f"lr {d['lr']:g}" + (f" (encoder {d['encoder_lr']:g})" if "encoder_lr" in d else "")
            sizes = f"  {d['steps']:,} steps, {d['tokens']:,} tokens{estimated}, {lr}{objective}{flops}"
            if "disk" in d:
                disk = d["disk"]
                sizes += (
                    f", disk {_size(disk['peak'])} ({disk['checkpoints']} checkpoints of "
                    f"{_size(disk['checkpoint'])}: keep_checkpoints + 1, and the model)"
                )
        elif "epochs" in d:
            sizes = f"  {d['epochs']:g} passes over the task text (sized once it is built), lr {d['lr']:g}"
        elif "runs" in d:
            sizes = (
                f"  {d['runs']} runs + {d['floors']} floor(s): {d['current']} current, {d['stale']} stale, "
                f"{d['missing']} missing"
                + (f", {d['damaged']} damaged" if d.get("damaged") else "")
                + (f", {d['no model']} without their model" if d.get("no model") else "")
            )
            if "search" in d:
                search = d["search"]
                what = {
                    (True, True): "the learning-rate search and the reference's stopping step",
                    (False, True): "the reference's stopping step",
                }.get((search["rates"] > 1, bool(search.get("stops"))), "the learning-rate search")
                stops = "; its kept step is every run's stop" if search.get("stops") else ""
                sizes += (
                    f"; {what} first: {search['runs']} runs of the base ({search['rates']} rate{'s' if search['rates'] > 1 else ''} x "
                    f"{search['tasks']} task(s), first seed; the chosen rate's run is base's first seed{stops}), "
                    f"{len(search['todo_tasks'])} to run"
                )
        est = f"  ~{seconds[p.name] / 60:.1f} min" if seconds and p.name in seconds else ""
        schedule = f"; schedule: {d['schedule']}" if "schedule" in d else ""
        lines.append(f"{p.name:<20} {p.status}{sizes}{schedule}{est}")
        if "forgetting" in d:
            lines.append(forgetting_line(d))
    peaks = [p.detail["disk"]["peak"] for p in plans if "disk" in p.detail]
    if peaks:
        lines.append(
            f"disk: pretraining needs up to {_size(sum(peaks))} free under the run folder (every arm's "
            "checkpoints and model; estimated from the base model's parameters)"
        )
    if seconds:
        calibrated = how is None or how.calibrated
        lines.append(
            f"estimated model time: ~{sum(seconds.values()) / 60:.1f} min on this machine ("
            + ("calibrated with timed steps of the base architecture" if calibrated else "an uncalibrated guess")
            + "; corpus and vocabulary not included)"
        )
        lines.extend(f"  {line}" for line in (how.how if how else []))
    return "\n".join(lines)


def _size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1000:
            return f"{n:.3g} {unit}"
        n /= 1000
    return f"{n:.3g} TB"
