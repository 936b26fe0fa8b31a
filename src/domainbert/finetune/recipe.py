"""Each task's recipe chosen on validation by the reference, the same for every model compared: the learning
rate (``finetune.lr_grid``) and, with ``finetune.early_stopping: reference``, the step every run stops at.

A fixed rate under-trains some tasks and breaks others (studies/pooling.md), and a rate tuned per model
would let the tuning, not the pretraining, make a difference. So, as Don't Stop Pretraining did, the reference
chooses: ``base`` is fine-tuned once at each rate of the grid under the first seed, and the rate whose kept
weights score best on validation (runs that collapsed on validation last; a tie goes to the lower rate)
becomes the task's rate for every model, ``base`` included. With ``early_stopping: reference`` every task is
searched (a task with a rate of its own, or without a grid, at its one rate), and the step the chosen run kept
(its best validation evaluation, ``best_step``) becomes the step every model's run trains to on the same
schedule (``finetune.stop_chosen``). The test split plays no part.

The search's runs are ordinary fine-tuning runs (their own records and fingerprints) in ``recipe/finetune/
lr-<rate>/<task>/seed-<seed>/`` of the run folder, out of the comparison's reach (each with its model when the
run keeps models); the fine-tuning stage runs the missing ones first, writes the chosen rate's run as ``base``'s
first seed (the same computation: ``matrix.adopt``), and ``applied`` reads them back into ``finetune.lr_chosen`` so that every stage (the matrix, the
report's expected runs, ``plan``) sees one recipe. A task whose search is incomplete keeps no chosen rate.
``plan_counts`` says what `plan` counts of them. This module trains nothing; it decides nothing about the models
compared.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.config.finetune import TaskConfig
from domainbert.core.artifacts import is_complete
from domainbert.core.paths import RunLayout
from domainbert.finetune.jobs import RESULT, Job, references, run_record

logger = logging.getLogger(__name__)

SEARCH_FOLDER = "recipe"


def searched_tasks(cfg: DomainConfig) -> list[TaskConfig]:
    """The tasks the reference chooses for: all when runs stop at its step (``early_stopping: reference``),
    else those without a rate of their own when ``finetune.lr_grid`` is set."""
    if cfg.finetune.mode == "frozen":
        return []
    if cfg.finetune.early_stopping == "reference":
        return list(cfg.finetune.tasks)
    if not cfg.finetune.lr_grid:
        return []
    return [task for task in cfg.finetune.tasks if task.lr is None]


def rate_searched(cfg: DomainConfig, task: TaskConfig) -> bool:
    """Whether ``task``'s rate is chosen from ``finetune.lr_grid`` (else it has one rate: its own, or
    ``finetune.lr``)."""
    return bool(cfg.finetune.lr_grid) and task.lr is None


def rates(cfg: DomainConfig, task: TaskConfig) -> list[float]:
    """The rates ``task``'s search tries: the grid, or its one rate."""
    return list(cfg.finetune.lr_grid) if rate_searched(cfg, task) else [task.lr or cfg.finetune.lr]


def search_layout(layout: RunLayout) -> RunLayout:
    return RunLayout(layout.root / SEARCH_FOLDER)


def _at_rate(cfg: DomainConfig, task_name: str, lr: float) -> DomainConfig:
    """``cfg`` with ``task_name`` at ``lr`` (its own rate) and nothing chosen: the config a search run records,
    the same whether or not a search has been applied to ``cfg``."""
    tasks = [t.model_copy(update={"lr": lr}) if t.name == task_name else t for t in cfg.finetune.tasks]
    # Each rate's model is kept in its run folder when the comparison keeps models: the chosen rate's run becomes
    # base's first seed (``matrix.adopt``), model included.
    save = "none" if cfg.finetune.save_models == "none" else "all"
    # the search run stops on its own validation: the step it keeps is the choice
    update = {"tasks": tasks, "lr_chosen": {}, "stop_chosen": {}, "early_stopping": "each_run"}
    ft = cfg.finetune.model_copy(update={**update, "save_models": save, "mode": "finetune"})
    return cfg.model_copy(update={"finetune": ft})


def search_jobs(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> list[tuple[float, DomainConfig, Job]]:
    """(rate, the run's config, the job) of every search run: the reference at each rate, first seed, per task."""
    reference = references(cfg, layout, planned)["base"]
    seed = cfg.finetune.seeds[0]
    return [
        (lr, _at_rate(cfg, task.name, lr), Job(f"lr-{lr:g}", reference, task.name, seed, "finetune"))
        for task in searched_tasks(cfg)
        for lr in rates(cfg, task)
    ]


def search_state(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> dict[str, dict[float, Any]]:
    """Task -> rate -> the search run's current result (None where it is missing or out of date)."""
    sub = search_layout(layout)
    out: dict[str, dict[float, Any]] = {}
    for rate, run_cfg, job in search_jobs(cfg, layout, planned):
        folder = sub.finetune(job.model_name, job.task_name, job.seed)
        fp = run_record(run_cfg, job)[2]
        current = (folder / RESULT).is_file() and is_complete(folder, fp)
        out.setdefault(job.task_name, {})[rate] = json.loads((folder / RESULT).read_text()) if current else None
    return out


def choose(results: dict[float, dict[str, Any]]) -> float:
    """The rate whose run scored best on validation; runs that collapsed on validation rank last; a tie goes to
    the lower rate."""

    def rank(lr: float) -> tuple[bool, float, float]:
        result = results[lr]
        collapsed = bool((result.get("collapse_validation") or {}).get("collapsed"))
        return (not collapsed, float(result["validation"][result["primary_metric"]]), -lr)

    return max(results, key=rank)


def applied(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> DomainConfig:
    """``cfg`` with ``finetune.lr_chosen`` and ``finetune.stop_chosen`` read from the finished searches (a task
    whose search is incomplete gets none); ``cfg`` itself when nothing is searched."""
    if not searched_tasks(cfg):
        return cfg
    return with_chosen(cfg, search_state(cfg, layout, planned))


def chosen_rates(state: dict[str, dict[float, Any]]) -> dict[str, float]:
    """Task -> the rate its finished search (``search_state``) chose; tasks still searching are left out."""
    return {task: choose(results) for task, results in state.items() if all(r is not None for r in results.values())}


def with_chosen(cfg: DomainConfig, state: dict[str, dict[float, Any]]) -> DomainConfig:
    """``cfg`` with what each finished search in ``state`` (``search_state``) chose: the rate of a task searched
    over the grid (``lr_chosen``) and, where runs stop on the reference, the chosen run's kept step
    (``stop_chosen``)."""
    chosen = chosen_rates(state)
    tasks = {task.name: task for task in cfg.finetune.tasks}
    lr_chosen = {name: lr for name, lr in chosen.items() if rate_searched(cfg, tasks[name])}
    update: dict[str, Any] = {"lr_chosen": lr_chosen}
    if cfg.finetune.early_stopping == "reference":
        update["stop_chosen"] = {name: int(state[name][lr]["best_step"]) for name, lr in chosen.items()}
    return cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update=update)})


def chosen_line(task: str, results: dict[float, dict[str, Any]], stops: bool = False) -> str:
    """One line: the task's chosen rate and every rate's validation score; with ``stops``, the step every run
    stops at."""
    scores = ", ".join(f"{lr:g}: {r['validation'][r['primary_metric']]:.4f}" for lr, r in sorted(results.items()))
    rate = choose(results)
    line = f"recipe {task}: lr {rate:g} chosen on validation ({scores})"
    if stops:
        kept = results[rate]
        epoch = next((h["epoch"] for h in kept.get("history", []) if h["step"] == kept["best_step"]), None)
        at = f" (epoch {epoch:g})" if epoch is not None else ""
        line += f"; every model's run stops at step {kept['best_step']}{at}, the reference's kept step"
    return line


def plan_counts(cfg: DomainConfig, layout: RunLayout, base_pending: bool) -> dict[str, Any]:
    """What ``plan`` says of the searches: their runs, rates and tasks, the tasks of the runs still to run (all
    of them when the base model is still to be made: ``base_pending``) and the tasks searched; {} for none."""
    state = search_state(cfg, layout, planned=True)
    if not state:
        return {}
    runs = [(task, result) for task, results in state.items() for result in results.values()]
    todo = [task for task, result in runs if result is None or base_pending]
    return {
        "runs": len(runs),
        "rates": max(len(rates(cfg, task)) for task in searched_tasks(cfg)),
        "stops": cfg.finetune.early_stopping == "reference",
        "tasks": len(state),
        "todo_tasks": todo,
        "searched": list(state),
    }
