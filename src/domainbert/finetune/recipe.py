"""Each task's learning rate chosen on validation (``finetune.lr_grid``), the same for every model compared.

A fixed rate under-trains some tasks and breaks others (bench/README, "pooling.py"), and a rate tuned per model
would let the tuning, not the pretraining, make a difference. So, as Don't Stop Pretraining did, the reference
chooses: ``base`` is fine-tuned once at each rate of the grid under the first seed, and the rate whose kept
weights score best on validation (runs that collapsed on validation last; a tie goes to the lower rate)
becomes the task's rate for every model, ``base`` included. The test split plays no part.

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
    """The tasks whose rate is searched: all without a rate of their own, when ``finetune.lr_grid`` is set."""
    if not cfg.finetune.lr_grid or cfg.finetune.mode == "frozen":
        return []
    return [task for task in cfg.finetune.tasks if task.lr is None]


def search_layout(layout: RunLayout) -> RunLayout:
    return RunLayout(layout.root / SEARCH_FOLDER)


def _at_rate(cfg: DomainConfig, task_name: str, lr: float) -> DomainConfig:
    """``cfg`` with ``task_name`` at ``lr`` (its own rate) and nothing chosen: the config a search run records,
    the same whether or not a search has been applied to ``cfg``."""
    tasks = [t.model_copy(update={"lr": lr}) if t.name == task_name else t for t in cfg.finetune.tasks]
    # Each rate's model is kept in its run folder when the comparison keeps models: the chosen rate's run becomes
    # base's first seed (``matrix.adopt``), model included.
    save = "none" if cfg.finetune.save_models == "none" else "all"
    ft = cfg.finetune.model_copy(update={"tasks": tasks, "lr_chosen": {}, "save_models": save, "mode": "finetune"})
    return cfg.model_copy(update={"finetune": ft})


def search_jobs(cfg: DomainConfig, layout: RunLayout, planned: bool = False) -> list[tuple[float, DomainConfig, Job]]:
    """(rate, the run's config, the job) of every search run: the reference at each rate, first seed, per task."""
    reference = references(cfg, layout, planned)["base"]
    seed = cfg.finetune.seeds[0]
    return [
        (lr, _at_rate(cfg, task.name, lr), Job(f"lr-{lr:g}", reference, task.name, seed, "finetune"))
        for task in searched_tasks(cfg)
        for lr in cfg.finetune.lr_grid
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
    """``cfg`` with ``finetune.lr_chosen`` read from the finished searches (a task whose search is incomplete
    gets none); ``cfg`` itself when nothing is searched."""
    if not searched_tasks(cfg):
        return cfg
    return with_chosen(cfg, search_state(cfg, layout, planned))


def with_chosen(cfg: DomainConfig, state: dict[str, dict[float, Any]]) -> DomainConfig:
    """``cfg`` with the rate each finished search in ``state`` (``search_state``) chose."""
    chosen = {task: choose(results) for task, results in state.items() if all(r is not None for r in results.values())}
    return cfg.model_copy(update={"finetune": cfg.finetune.model_copy(update={"lr_chosen": chosen})})


def chosen_line(task: str, results: dict[float, dict[str, Any]]) -> str:
    """One line: the task's chosen rate and every rate's validation score."""
    scores = ", ".join(f"{lr:g}: {r['validation'][r['primary_metric']]:.4f}" for lr, r in sorted(results.items()))
    return f"recipe {task}: lr {choose(results):g} chosen on validation ({scores})"


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
        "rates": len(cfg.finetune.lr_grid),
        "tasks": len(state),
        "todo_tasks": todo,
        "searched": list(state),
    }
