"""The fine-tuning matrix: which runs a configuration asks for (``run_list``) and what makes a stored result
current (``run_record``: its configuration, inputs and fingerprint).

The one list the stage, the Prefect flows, ``plan`` and the report's check all use. Nothing here trains.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.config.finetune import TaskConfig
from domainbert.config.pretrain import split_replicate
from domainbert.core.artifacts import read_record
from domainbert.core.errors import ConfigError
from domainbert.core.fingerprints import fingerprint, folder_identity
from domainbert.core.models import require_safetensors, resolve_model_ref
from domainbert.core.paths import RunLayout
from domainbert.task_data.split_overlap import EVAL_SPLITS, SplitOverlap, find_overlap, without_overlap
from domainbert.task_data.splits import TaskData, load_task, task_data_hash

logger = logging.getLogger(__name__)

RESULT = "result.json"


FROZEN_SUFFIX = "-frozen"


FLOOR = "floor"  # the floor baseline's model name and mode; one deterministic run, stored as seed 0


FLOOR_SEED = 0


# The configured checkpoint itself, fine-tuned beside ``base`` whenever the base warm-up made the base: the
# warm-up can cost the encoder, so an arm must beat the better of the two to count as an adaptation gain.
ORIGINAL = "original"


@dataclass(frozen=True)
class Job:
    """One entry of the fine-tuning matrix: what ``finetune_one`` runs and where its result is stored."""

    model_name: str
    model_ref: str
    task_name: str
    seed: int
    mode: str  # finetune, frozen or floor


def run_list(cfg: DomainConfig, layout: RunLayout, models: dict[str, str] | None = None) -> list[Job]:
    """The matrix in run order: per task, its floor, then models x modes x seeds (frozen runs stored under
    ``<model>-frozen``). The one list the stage, the Prefect flows and the report's check all use; ``models``
    defaults to ``models_to_compare``."""
    models = models if models is not None else models_to_compare(cfg, layout)
    modes = ["finetune", "frozen"] if cfg.finetune.mode == "both" else [cfg.finetune.mode]
    jobs = []
    for task in cfg.finetune.tasks:
        if cfg.finetune.floor:
            jobs.append(Job(FLOOR, FLOOR, task.name, FLOOR_SEED, FLOOR))
        jobs += [
            Job(name + FROZEN_SUFFIX if mode == "frozen" else name, ref, task.name, seed, mode)
            for name, ref in models.items()
            for mode in modes
            for seed in cfg.finetune.seeds
        ]
    return jobs


def references(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> dict[str, str]:
    """The references every arm is compared with: ``base`` (the warmed-up base when the run made one, else the
    checkpoint) and, when the base was warmed up, ``original`` (the checkpoint before the warm-up).
    ``planned``: also when ``domainbert run`` will warm the base up before fine-tuning (for ``plan``)."""
    from domainbert.config.pretrain import ARMS
    from domainbert.pretrain.base_warmup import warmup_dir, warmup_status
    from domainbert.pretrain.start import base_reference

    base = base_reference(cfg, layout)
    original = cfg.base_model.name_or_path
    # the warm-up runs before any checkpoint-based arm; "will run if ..." means its need is unknown here
    if base == original and planned and any(not ARMS[arm].from_scratch for arm in cfg.pretrain.arms):
        state = warmup_status(cfg, layout)
        if state == "will run" or state.startswith("cached"):
            base = str(warmup_dir(layout) / "model")
    return {"base": base} if base == original else {"base": base, ORIGINAL: original}


def models_to_compare(cfg: DomainConfig, layout: RunLayout) -> dict[str, str]:
    """Model name -> model reference: the references (``base``, and ``original`` after a warm-up), the arms
    with a model folder, then ``finetune.extra_models``."""
    models = references(cfg, layout)
    for arm in cfg.pretrain.replicate_names():
        folder = layout.pretrained_model(arm)
        if (folder / "config.json").is_file():
            models[arm] = str(folder)
    for name, ref in cfg.finetune.extra_models.items():
        if name in models:
            raise ConfigError(
                f"extra model name {name!r} clashes with a built-in model name", field="finetune.extra_models"
            )
        models[name] = ref
    chosen = only_models(cfg, models)
    _require_only_models(cfg, layout, models)
    for name in cfg.finetune.extra_models:
        if name in chosen and Path(chosen[name]).is_dir():
            require_safetensors(Path(chosen[name]))  # refused before any run, not when its turn comes
    return chosen


def require_planned_original(cfg: DomainConfig, layout: RunLayout) -> None:
    """``domainbert run``'s check before any stage: ``finetune.only_models`` may name ``original`` only where the
    run warms the base up (or did), not after the pretraining it would otherwise wait for (``_require_only_models``
    refuses it then)."""
    if ORIGINAL not in (cfg.finetune.only_models or []):
        return  # every run without the name: the warm-up's state is not read
    planned = references(cfg, layout, planned=True)
    if ORIGINAL not in planned:
        arms = {arm: str(layout.pretrained_model(arm)) for arm in cfg.pretrain.replicate_names()}
        _require_only_models(cfg, layout, {**planned, **arms, **cfg.finetune.extra_models})


def _require_only_models(cfg: DomainConfig, layout: RunLayout, models: dict[str, str]) -> None:
    """A ``finetune.only_models`` name this run has no model for is refused, not skipped: a run that trains
    nothing but the floor looks finished."""
    names = {split_replicate(name)[0] for name in models} | set(models)
    missing = [m for m in cfg.finetune.only_models or [] if m not in names]
    if not missing:
        return
    why = {
        ORIGINAL: "the checkpoint before a base warm-up; this run has no warm-up, so the checkpoint is `base`",
    }
    reasons = "; ".join(
        f"{m} is {why.get(m, f'an arm with no pretrained model at {layout.pretrained_model(m)} yet')}" for m in missing
    )
    raise ConfigError(
        f"names a model this run does not have ({reasons}); it has {', '.join(models)}",
        field="finetune.only_models",
    )


def only_models(cfg: DomainConfig, models: dict[str, str]) -> dict[str, str]:
    """``models`` less those ``finetune.only_models`` leaves out."""
    only = cfg.finetune.only_models
    if only is None:
        return models
    return {name: ref for name, ref in models.items() if name in only or split_replicate(name)[0] in only}


def task_config(cfg: DomainConfig, task_name: str) -> TaskConfig:
    for task in cfg.finetune.tasks:
        if task.name == task_name:
            return task
    known = ", ".join(t.name for t in cfg.finetune.tasks)
    raise ConfigError(f"unknown task {task_name!r}; this domain has: {known}", field="finetune.tasks")


def task_lr(cfg: DomainConfig, task: TaskConfig) -> float:
    """A task's fine-tuning learning rate: its own, else the one its search chose (``finetune.lr_chosen``),
    else ``finetune.lr``."""
    return task.lr or cfg.finetune.lr_chosen.get(task.name) or cfg.finetune.lr


def stops_on_reference(cfg: DomainConfig, mode: str) -> bool:
    """Whether runs of ``mode`` stop at the step the reference chose (``finetune.early_stopping: reference``):
    fine-tuning runs do; frozen runs (another rate, a head alone) and floors do not."""
    return cfg.finetune.early_stopping == "reference" and mode == "finetune"


def chosen_stop(cfg: DomainConfig, task: TaskConfig, mode: str) -> int | None:
    """The step a run of ``task`` stops at, chosen on the reference (``stops_on_reference``); None where each
    run stops on its own validation.

    Raises:
        ConfigError: the reference's choice for the task is not made yet (its recipe search has not run).
    """
    if not stops_on_reference(cfg, mode):
        return None
    if task.name not in cfg.finetune.stop_chosen:
        raise ConfigError(
            f"task {task.name!r}: the reference's stopping step is not chosen yet (its recipe search runs first: "
            "domainbert finetune or domainbert run)",
            field="finetune.stop_chosen",
        )
    return cfg.finetune.stop_chosen[task.name]


def model_input_hash(ref: str) -> str:
    """A model's identity: a local folder's content (the hash its record holds, else one over its files), else
    the reference itself (a hub id, or one that does not resolve: the run reports it)."""
    return _model_identity(ref)[0]


def _model_identity(ref: str) -> tuple[str, bool]:
    """(identity, whether the reference is a local folder: one identified by its content alone)."""
    try:
        resolved = resolve_model_ref(ref)
    except Exception:  # noqa: BLE001 - the run itself reports a bad reference with a clear error
        return ref, False
    if not Path(resolved).is_dir():
        return resolved, False
    record = read_record(Path(resolved))
    recorded = str(record["content_hash"]) if record else None
    return folder_identity(Path(resolved), recorded), True


def _task_identity(task: TaskConfig) -> dict[str, Any]:
    """The task's settings as a result records them; ``chunks: 1`` (the default, truncation), ``class_weights:
    none``, ``eval_delay: 0`` and ``group_field`` are left out so that results recorded before the settings
    existed stay current."""
    dump = task.model_dump(mode="json")
    for name, default in (("chunks", 1), ("class_weights", "none"), ("eval_delay", 0)):
        if dump.get(name) == default:
            del dump[name]
    del dump["group_field"]  # which examples the report groups: not what a run trains or scores
    del dump["role"]  # how the report reads the task: not what a run trains or scores
    return dump


def run_record(cfg: DomainConfig, job: Job, data_hash: str | None = None) -> tuple[dict, dict[str, str], str]:
    """(config, inputs, fingerprint) a run's result is recorded with: what makes a stored result current."""
    task = task_config(cfg, job.task_name)
    inputs = {"task_data": data_hash or task_data_hash(task)}
    if job.mode == FLOOR:
        validated_from = {"eval_delay"}  # the floor validates nothing: a task's delay is not what it computes
        run_cfg: dict[str, Any] = {
            "task": {k: v for k, v in _task_identity(task).items() if k not in validated_from},
            "model": FLOOR,
            "mode": FLOOR,
            "split_overlap": cfg.finetune.split_overlap,
        }
    else:
        run_cfg = {
            "finetune": cfg.finetune.model_dump(
                mode="json",
                exclude={
                    "tasks",
                    "only_tasks",
                    "only_models",
                    "seeds",
                    "extra_models",
                    "mode",
                    "torch_threads",
                    "eval_batch_size",
                    "eval_inference_mode",
                    "eval_length_sorted",
                    "device",
                    "num_processes",
                    "save_models",
                    "lr_grid",
                    "lr_chosen",
                    "early_stopping",
                    "stop_chosen",
                },
            ),
            "task": _task_identity(task),
            "model": job.model_name,
            "model_ref": job.model_ref,
            "seed": job.seed,
            "mode": job.mode,
        }
        if task.type == "ner":  # a token classifier pools nothing: the sequence head is not what it trains
            del run_cfg["finetune"]["pooling"]
        if not cfg.finetune.min_steps:  # epochs alone, as before the setting existed: stored runs stay current
            del run_cfg["finetune"]["min_steps"]
        if task.lr is None and task.name in cfg.finetune.lr_chosen:  # the rate it trains at, not the grid's
            run_cfg["chosen_lr"] = cfg.finetune.lr_chosen[task.name]
        if stops_on_reference(cfg, job.mode):  # trained to the reference's kept step, validated there only
            run_cfg["stop_step"] = cfg.finetune.stop_chosen.get(task.name, "not chosen yet")
        identity, local = _model_identity(job.model_ref)
        if local:
            run_cfg["model_ref"] = "local folder (by content)"  # where it lies is not what it is
        inputs["model"] = identity
    return run_cfg, inputs, fingerprint(run_cfg, inputs)


_said_overlaps: set[str] = set()
_said_by_caller: ContextVar[bool] = ContextVar("overlap_said_by_caller", default=False)


@contextmanager
def overlaps_said_by_caller() -> Iterator[None]:
    """Within it, ``load_task_data`` logs what a task's splits share at DEBUG: the caller said it once for every
    process that runs the task (the fine-tuning flow, ``overlap_lines``, before its runs start on its workers)."""
    token = _said_by_caller.set(True)
    try:
        yield
    finally:
        _said_by_caller.reset(token)


def overlap_lines(cfg: DomainConfig) -> list[str]:
    """One line per task whose validation or test split shares examples with its training split, as
    ``load_task_data`` would log it (each task read once); the caller says them, so this process's later reads
    of those tasks say them at DEBUG."""
    lines = []
    for task in cfg.finetune.tasks:
        data = load_task(task)
        overlap = find_overlap(data)
        if overlap.any:
            lines.append(_overlap_said(cfg, task, data, overlap))
    _said_overlaps.update(lines)
    return lines


def _overlap_said(cfg: DomainConfig, task: TaskConfig, data: TaskData, overlap: SplitOverlap) -> str:
    sizes = {split: len(examples) for split, examples in data.splits.items()}
    kept = cfg.finetune.split_overlap == "keep"  # called only where the splits share examples
    return f"{overlap.sentence(task.name, sizes)}; {'kept' if kept else 'left out of scoring'}"


def load_task_data(cfg: DomainConfig, task: TaskConfig) -> TaskData:
    """``task`` read as fine-tuning and its floor score it: examples its validation and test splits share with
    its training split are left out unless ``finetune.split_overlap`` is ``keep``; what was found and done is in
    ``data.split_overlap`` (and so in every result)."""
    data = load_task(task)
    overlap = find_overlap(data)
    excluded = overlap.any and cfg.finetune.split_overlap == "exclude"
    if overlap.any:
        said = _overlap_said(cfg, task, data, overlap)
        # every run of the task reads it: said once a process, not once a run (the report gives it too), and
        # not at all where the caller said it for all its workers
        quiet = said in _said_overlaps or _said_by_caller.get()
        logger.log(logging.DEBUG if quiet else logging.WARNING, "%s", said)
        _said_overlaps.add(said)
    if excluded:
        data = without_overlap(data, overlap)
    data.split_overlap = {
        **{split: {"exact": overlap.exact[split], "normalised": overlap.normalised[split]} for split in EVAL_SPLITS},
        "excluded": excluded,
    }
    return data
