"""Scores per group (e.g. per language): for a classification task with ``group_field``, every model's test
score on each group's examples, mean and standard deviation over its seeds, beside the floor's.

The groups are read from the task's test split as fine-tuning scored it (``finetune.jobs.load_task_data``:
the same subsample and the same examples left out), so a result's i-th answer is the i-th example's; a result
whose gold answers are not the split's is skipped and said so. The whole-task comparisons and the verdict stay
``results.py``'s and ``headline.py``'s: a group's figures carry no interval, and a small group's are noise.
"""

from __future__ import annotations

import statistics
from collections import Counter, defaultdict
from typing import Any

from domainbert.config.domain import DomainConfig
from domainbert.config.finetune import TaskConfig
from domainbert.core.document import Section, Table
from domainbert.finetune.classification import classification_metrics
from domainbert.finetune.jobs import load_task_data
from domainbert.report.inputs import Record, RunArtifacts
from domainbert.report.sections import fmt

SMALL_GROUP = 30  # test examples under which a group's score is called too few to compare


def group_scores(
    task: TaskConfig, groups: list[str], gold: list[Any], label_list: list[str], results: list[Record]
) -> tuple[dict[str, dict[str, list[float]]], list[str]]:
    """``{model: {group: [primary score per seed]}}`` over ``results`` of one task, and the runs skipped
    because their answers are not those of the test examples ``groups`` and ``gold`` describe (another split,
    subsample or exclusion)."""
    scores: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    skipped = []
    for r in results:
        if r.get("gold") != gold:
            skipped.append(f"{r['model']} seed {r['seed']}")
            continue
        for group in dict.fromkeys(groups):
            rows = [i for i, g in enumerate(groups) if g == group]
            answers, pred = [r["gold"][i] for i in rows], [r["pred"][i] for i in rows]
            metric = classification_metrics(answers, pred, label_list, task.multi_label)[r["primary_metric"]]
            scores[r["model"]][group].append(float(metric))
    return scores, skipped


def _cell(values: list[float]) -> str:
    if not values:
        return "-"
    mean = fmt(100 * statistics.fmean(values), 1)
    return mean if len(values) < 2 else f"{mean} ± {fmt(100 * statistics.stdev(values), 1)}"


def _task_table(cfg: DomainConfig, task: TaskConfig, arts: RunArtifacts) -> tuple[Table, list[str]] | None:
    results = [r for r in arts.finetune if r["task"] == task.name]
    if not results:
        return None
    data = load_task_data(cfg, task)
    groups = [str(ex.group) for ex in data.splits["test"]]
    gold = [sorted(ex.labels) if task.multi_label else ex.labels[0] for ex in data.splits["test"]]
    scores, skipped = group_scores(task, groups, gold, data.label_list, results)
    counts = Counter(groups)
    models = sorted(scores, key=lambda m: (m != "floor", m != "base", m))
    rows = []
    for group, n in counts.most_common():
        labels = Counter(ex.labels[0] for ex in data.splits["test"] if ex.group == group)
        rows.append(
            [
                group + (" (too few to compare)" if n < SMALL_GROUP else ""),
                f"{n} ({', '.join(f'{label} {k}' for label, k in labels.most_common())})",
                *(_cell(scores[m].get(group, [])) for m in models),
            ]
        )
    caption = (
        f"{task.name} by {task.group_field}: test score ({results[0]['primary_metric']}, points) on each group's "
        "examples, mean ± sd over seeds; no interval: the task-level comparisons above are the test of a difference"
    )
    return Table([task.group_field or "group", "test examples", *models], rows, caption), skipped


def groups_section(cfg: DomainConfig, arts: RunArtifacts) -> Section | None:
    """Per-group scores of every classification task with a ``group_field``; None when no task has one."""
    tasks = [t for t in cfg.finetune.tasks if t.group_field and t.type == "classification"]
    if not tasks:
        return None
    sec = Section("Scores per group")
    for task in tasks:
        made = _task_table(cfg, task, arts)
        if made is None:
            sec.add(f"{task.name}: no results yet.")
            continue
        table, skipped = made
        sec.add(table)
        if skipped:
            sec.add(f"Left out (answers of another test split): {', '.join(skipped)}.")
    return sec
