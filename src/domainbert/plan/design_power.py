"""A run's power before its compute is spent: per task, the smallest difference between an arm and its reference
that the configured seeds, pretraining replicates and test split can detect, for ``domainbert plan``.

One formula serves ``plan`` and the report (``power.detectable_difference``: a noncentral t at the comparison's
df, at Holm's first threshold over every comparison the report will make). What goes into it:

* where this run folder already holds results of the task under the configured seeds and replicates, the
  report's own comparisons of them (``compare.compare_tables``: paired se and df), so that ``plan`` and the
  report say the same for the same design; the smallest of the arms' comparisons with the better reference, as
  the report's power line;
* where it holds results of another design (say, 5 seeds where the config now asks for 10), their measured
  noise (``measured_priors``) through ``power.design_se`` at the configured seeds and replicates;
* else the task's stated prior (``power.task_prior``: its type's noise measured on a shipped task, scaled to its
  test split) through ``power.design_se``.

``solve_design`` finds the fewest seeds x replicates whose detectable difference is at most a target on every
task, each with its own prior, the weakest deciding (``plan --detect``). This module trains nothing and reads no
model.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from domainbert.finetune.expectations import expected_runs, result_state
from domainbert.literature import PUBLISHED_GAINS, PUBLISHED_GAINS_SOURCE
from domainbert.report.power import WHOLE_SCALE, DesignPrior, design_se, detectable_difference, task_prior
from domainbert.report.references import against_best_reference, references_row
from domainbert.report.results import comparison_pairs, model_order
from domainbert.report.rows import Comparison
from domainbert.task_data.splits import load_task

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.config.finetune import TaskConfig
    from domainbert.core.paths import RunLayout

MAX_SEEDS, MAX_REPLICATES = 50, 8  # where solve_design stops looking


@dataclass(frozen=True)
class TaskPower:
    """One task's design: test examples, seeds, replicates, the paired se and df used (and whence), the
    comparisons of the page and the detectable difference."""

    task: str
    test_examples: int
    seeds: int
    replicates: int
    se: float
    df: float
    source: str
    comparisons: int
    detectable: float

    @property
    def can_answer(self) -> bool:
        return self.detectable <= PUBLISHED_GAINS[1]

    def line(self) -> str:
        high = PUBLISHED_GAINS[1]
        df = "inf" if math.isinf(self.df) else f"{self.df:.1f}"
        text = (
            f"power {self.task}: {self.test_examples:,} test examples, {self.seeds} seed(s) x {self.replicates} "
            f"pretraining replicate(s), paired: se {100 * self.se:.2f} points on {df} df ({self.source}): detects "
            f"a difference of {100 * self.detectable:.1f} points with 80% power over the report's "
            f"{self.comparisons} comparisons"
        )
        if self.detectable >= WHOLE_SCALE:
            text += ", more than the metric's whole range: no difference it can show"
        if not self.can_answer:
            text += (
                f"; more than {PUBLISHED_GAINS_SOURCE} (up to {100 * high:.1f} points): this design cannot answer "
                "whether adaptation helped (`plan --detect 1.0` says what would)"
            )
        if self.replicates == 1:
            text += "; with one pretraining replicate a verdict is about this checkpoint, not the procedure"
        return text


def planned_family(cfg: DomainConfig, layout: RunLayout) -> int:
    """How many comparisons the report will make (Holm's family), from the runs the config expects."""
    expected = expected_runs(cfg, layout, planned=True)
    names = model_order({r.model for r in expected}, list(cfg.pretrain.arms), list(cfg.finetune.extra_models))
    return len(comparison_pairs(names)) * len(cfg.finetune.tasks)


def _measured(cfg: DomainConfig, layout: RunLayout) -> dict[str, list[Comparison]]:
    """Per task, the report's comparisons of the arms with the better reference over this run's results; for a
    task without one, the references' own comparison (base - original). Only the results this configuration
    expects and would use, as the report does (``compare.checked_run``): a stale result, made under another
    recipe or by a model this configuration leaves out, is not this design's noise."""
    from domainbert.report.compare import compare_tables
    from domainbert.report.inputs import finetune_results

    results = [result for _, result in finetune_results(layout)]
    if not results:
        return {}
    usable = {
        (run.model, run.task, run.seed)
        for run in expected_runs(cfg, layout, planned=True)
        if result_state(layout, run) in ("current", "unrecorded")
    }
    results = [r for r in results if (r["model"], r["task"], r["seed"]) in usable]
    if not results:
        return {}
    scores, rows = compare_tables(
        results,
        cfg.compare,
        [t.name for t in cfg.finetune.tasks],
        list(cfg.pretrain.arms),
        list(cfg.finetune.extra_models),
    )
    out: dict[str, list[Comparison]] = {}
    for arm in cfg.pretrain.arms:
        for row in against_best_reference(scores, rows, arm):
            if row.se is not None and row.paired:
                out.setdefault(row.task, []).append(row)
    # A task no arm ran on: the references' own comparison, paired over the same seeds, measured its noise
    # (on R8 the seed moved base and original apart, and a stated prior said a third of what it measured).
    for task in dict.fromkeys(r.task for r in scores):
        refs = references_row(rows, task)
        if task not in out and refs is not None and refs.se is not None and refs.paired:
            out[task] = [refs]
    return out


def _test_sizes(cfg: DomainConfig) -> list[tuple[TaskConfig, int]]:
    """Each task with its test split's size; a task whose files cannot be read here is left out."""
    out: list[tuple[TaskConfig, int]] = []
    for task in cfg.finetune.tasks:
        try:
            out.append((task, len(load_task(task).splits["test"])))
        except Exception:  # noqa: BLE001 - a hub task offline: plan says nothing of it rather than failing
            continue
    return out


def design_power(cfg: DomainConfig, layout: RunLayout) -> list[TaskPower]:
    """Per task, the design's detectable difference: the report's where this run holds results of the task, else
    from the task's prior (a task whose files cannot be read here is left out)."""
    family = planned_family(cfg, layout)
    alpha = 1 - cfg.compare.confidence
    seeds, replicates = len(cfg.finetune.seeds), cfg.pretrain.replicates
    measured = _measured(cfg, layout)
    out = []
    for task, n_test in _test_sizes(cfg):
        rows = measured.get(task.name, [])
        if rows and all(_same_design(r, seeds, replicates) for r in rows):
            found = [(detectable_difference(_se(r), r.df, alpha, family), r) for r in rows]
            detect, row = max(found, key=lambda x: x[0])  # the least favourable, as the page names it
            source = f"measured: {row.model} vs {row.reference} in this run"
            df = row.df if row.df is not None else math.inf  # None: a normal statistic
            out.append(TaskPower(task.name, n_test, seeds, replicates, _se(row), df, source, family, detect))
            continue
        stated = task_prior(task.type, n_test)
        projected = _projected(rows, stated, (seeds, replicates, n_test), alpha, family)
        if projected is not None:
            se, df, detect, source = projected
            out.append(TaskPower(task.name, n_test, seeds, replicates, se, df, source, family, detect))
            continue
        prior = stated
        se, df = design_se(prior, seeds, replicates, n_test)
        detect = detectable_difference(se, df, alpha, family)
        out.append(TaskPower(task.name, n_test, seeds, replicates, se, df, _prior_text(prior), family, detect))
    return out


def _projected(
    rows: list[Comparison], stated: DesignPrior, design: tuple[int, int, int], alpha: float, family: int
) -> tuple[float, float, float, str] | None:
    """Results of another design (fewer seeds, say): each seed-paired comparison's own noise taken to ``design``
    (seeds, replicates, test examples); the smallest detectable difference, as for the run's own design, with its
    se, df and whence. None where no comparison is paired by seed."""
    best: tuple[float, float, float, str] | None = None
    for row in rows:
        prior = _row_prior(row, stated)
        if prior is None:
            continue
        se, df = design_se(prior, *design)
        detect = detectable_difference(se, df, alpha, family)
        if best is None or detect < best[2]:
            best = (se, df, detect, f"{row.model} vs {row.reference}'s noise in this run, at this design")
    return best


def _se(row: Comparison) -> float:
    """A measured comparison's se (``_measured`` keeps only those that have one)."""
    assert row.se is not None
    return row.se


def _same_design(row: Comparison, seeds: int, replicates: int) -> bool:
    """Whether a measured comparison (an arm against a reference) ran the configured seeds and replicates: the
    arm's runs are seeds x replicates, the reference's (one checkpoint) the seeds; then its se is the design's."""
    return row.runs.get(row.model) == seeds * replicates and row.runs.get(row.reference) == seeds


def _prior_text(prior: DesignPrior) -> str:
    return (
        f"{prior.source}: paired sd {100 * prior.pair_sd:.1f} points per seed, replicate sd "
        f"{100 * prior.replicate_sd:.1f} points"
    )


@dataclass(frozen=True)
class Design:
    """Seeds and replicates that reach a target, and the detectable difference of its weakest task."""

    seeds: int
    replicates: int
    detectable: float


def solve_design(target: float, tasks: Sequence[tuple[DesignPrior, int]], family: int, alpha: float) -> list[Design]:
    """For each replicate count, the fewest seeds whose detectable difference is at most ``target`` on every task
    (``tasks``: each one's prior and test examples; the weakest task decides); empty when none up to
    ``MAX_SEEDS`` x ``MAX_REPLICATES`` does, or when there is no task."""
    out: list[Design] = []
    if not tasks:
        return out
    per_se: dict[float, float] = {}  # the detectable difference is se times a factor of the df alone
    for replicates in range(1, MAX_REPLICATES + 1):
        for seeds in range(2, MAX_SEEDS + 1):
            # one df for every task (it is the design's), so the largest se is the weakest task
            se, df = max((design_se(prior, seeds, replicates, n) for prior, n in tasks), key=lambda x: x[0])
            if df not in per_se:
                per_se[df] = detectable_difference(1.0, df, alpha, family)
            detect = per_se[df] * se
            if detect <= target:
                out.append(Design(seeds, replicates, detect))
                break
    return out


def measured_priors(
    cfg: DomainConfig, layout: RunLayout, tasks: list[tuple[TaskConfig, int]]
) -> dict[str, DesignPrior]:
    """Per task of ``tasks`` (with its test examples) that has results in this run, a prior from its own paired
    comparisons of arms with the better reference, or where no arm ran, of its two references (the median over
    them of the per-seed differences' sd and of the test sampling left); the replicate sd stays the task's stated
    prior's."""
    sizes = {task.name: (task, n) for task, n in tasks}
    out: dict[str, DesignPrior] = {}
    for name, found in _measured(cfg, layout).items():
        if name not in sizes:
            continue
        stated = task_prior(sizes[name][0].type, sizes[name][1])
        priors = [p for p in (_row_prior(r, stated) for r in found) if p is not None]
        if not priors:
            continue
        pair_sd = sorted(p.pair_sd for p in priors)[len(priors) // 2]
        examples = sorted(p.example_var for p in priors)[len(priors) // 2]
        source = f"measured on this run's {len(priors)} paired comparison(s)"
        out[name] = DesignPrior(pair_sd, stated.replicate_sd, examples, source)
    return out


def _row_prior(row: Comparison, stated: DesignPrior) -> DesignPrior | None:
    """A seed-paired comparison's own noise as a prior (its per-seed differences' sd, the test sampling left);
    the replicate sd is ``stated``'s. None for a comparison not paired by seed."""
    d = row.design
    if d is None or d.pairing != "seed" or d.unit_sd is None or not d.units or d.n_examples is None:
        return None
    examples = max(_se(row) ** 2 - d.unit_sd**2 / d.units, 0.0) * d.n_examples
    return DesignPrior(float(d.unit_sd), stated.replicate_sd, float(examples), "measured")


def detect_lines(cfg: DomainConfig, layout: RunLayout, target: float, costs: tuple[float, float] | None) -> list[str]:
    """What ``plan --detect`` prints: per replicate count, the fewest seeds that detect ``target`` on every task,
    each task with its own prior (this run's measurement where it has results, else the stated one; the weakest
    task decides), with what it costs here (``plan.estimate.design_costs``: seconds per replicate of the arms, per
    fine-tuning run); once at the report's family-wise level, once for a single preregistered comparison."""
    family, alpha = planned_family(cfg, layout), 1 - cfg.compare.confidence
    sizes = _test_sizes(cfg)
    measured = measured_priors(cfg, layout, sizes)
    tasks = [(task.name, n, measured.get(task.name) or task_prior(task.type, n)) for task, n in sizes]
    lines = [f"detect {100 * target:.1f} points with 80% power on every task (the weakest decides):"]
    lines += [f" {name}, {n:,} test examples ({_prior_text(prior)})" for name, n, prior in tasks]
    for m, what in ((family, f"over the report's {family} comparisons"), (1, "as one preregistered comparison")):
        designs = solve_design(target, [(prior, n) for _, n, prior in tasks], m, alpha)
        lines.append(f" {what}:")
        if not designs:
            lines.append(
                f"  none up to {MAX_SEEDS} seeds x {MAX_REPLICATES} replicates: more seeds, fewer comparisons or "
                "a larger test split would"
                if tasks
                else "  no task's test split can be read here"
            )
            continue
        lines += [_design_line(cfg, layout, d, costs) for d in designs]
        seeds = ", ".join(map(str, range(1, designs[0].seeds + 1)))
        lines.append(f'  to run the first: "finetune.seeds=[{seeds}]" "pretrain.replicates={designs[0].replicates}"')
    return lines


def _design_line(cfg: DomainConfig, layout: RunLayout, d: Design, costs: tuple[float, float] | None) -> str:
    expected = expected_runs(cfg, layout, planned=True)
    arms = len(cfg.pretrain.arms)
    others = len({r.model for r in expected if r.model != "floor"} - set(cfg.pretrain.replicate_names()))
    runs = len(cfg.finetune.tasks) * d.seeds * (others + arms * d.replicates)
    text = (
        f"  {d.replicates} replicate(s) x {d.seeds} seeds: detects {100 * d.detectable:.1f} points; "
        f"{runs} fine-tuning runs and {d.replicates} pretraining run(s) of each of {arms} arm(s)"
    )
    if costs is not None:
        text += f", about {(d.replicates * costs[0] + runs * costs[1]) / 3600:.1f} h of model time here"
    return text + ("; a verdict about one checkpoint" if d.replicates == 1 else "; a verdict about the procedure")
