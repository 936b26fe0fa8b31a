"""The report's opening: one table (models x tasks, mean ± sd over seeds, a significantly best model in bold,
the floor row, collapsed runs marked) and one plain-language verdict with its caveats.

The verdict is assembled from the comparison rows (``results.build_tables``) and the run's artifacts only:
which adaptation arm beat the base model on how many tasks, which models sat below the floor, how many runs
collapsed, the seeds, whether the MLM head was warmed up, and the pretraining budget as a share of the corpus
and of published domain-adaptation budgets. When that budget is far below the published ones the verdict says
in words that the run cannot confirm or refute them. This module decides nothing statistical.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any

from domainbert.core.artifact_types import replaced_token_detection
from domainbert.core.document import Figure, Section, Table
from domainbert.literature import smallest_published, too_small
from domainbert.report.adequacy import task_adequacy
from domainbert.report.answer_figure import answer_figure
from domainbert.report.forgetting import forgetting_paragraph
from domainbert.report.inputs import ResultCheck, RunArtifacts
from domainbert.report.references import (
    arm_verdicts,
    control_sentences,
    power_sentences,
    reference_sentences,
    scratch_sentences,
    seed_warning,
)
from domainbert.report.results import FLOOR_MODEL, model_order
from domainbert.report.rows import Comparison, ScoreRow
from domainbert.report.scratch_curve import curves_of, scratch_curve_sentences
from domainbert.report.summary import floor_lead, metric_label, points
from domainbert.report.verdict import (
    RecipeSearch,
    decide,
    failure_notes,
    incomplete_models,
    judged,
    recipe_notes,
    rising_notes,
)


def score_cell(row: ScoreRow, best: bool) -> str:
    """``57.2 ± 1.3``; bold when best; the collapsed runs are marked (``collapsed 2/3``)."""
    text = points(row.mean) + (f" ± {points(row.std)}" if row.n_seeds > 1 else "")
    if best:
        text = f"**{text}**"
    if row.collapsed:
        text += f" (collapsed {row.collapsed}/{row.n_seeds})"
    if row.retried:
        text += f" (retried {row.retried})"
    return text


def _significantly_best(task: str, model: str, others: list[str], comparisons: list[Comparison]) -> bool:
    """Whether the comparisons call ``model`` significantly better than each of ``others`` on ``task``."""

    def beats(other: str) -> bool:
        return any(
            c.task == task
            and (
                (c.model, c.reference, c.verdict) == (model, other, "better")
                or (c.model, c.reference, c.verdict) == (other, model, "worse")
            )
            for c in comparisons
        )

    return all(beats(o) for o in others)


def headline_table(
    scores: list[ScoreRow],
    arms: list[str],
    extra: list[str],
    uninformative: set[str] | None = None,
    comparisons: list[Comparison] | None = None,
) -> Table:
    """Models x tasks; in bold the model with the highest mean when the comparisons call it significantly better
    than every other model on the task (never on a task that cannot separate the arms)."""
    tasks = list(dict.fromkeys(r.task for r in scores))
    models = model_order({r.model for r in scores}, arms, extra)
    best: dict[str, str | None] = {}
    for task in tasks:
        rows = [r for r in scores if r.task == task and r.model != FLOOR_MODEL]
        top = max(rows, key=lambda r: r.mean, default=None)
        others = [r.model for r in rows if top is not None and r.model != top.model]
        best[task] = (
            top.model
            if top is not None
            and task not in (uninformative or set())
            and _significantly_best(task, top.model, others, comparisons or [])
            else None
        )
    table_rows = []
    for model in models:
        cells = [model]
        for task in tasks:
            row = next((r for r in scores if r.task == task and r.model == model), None)
            cells.append("-" if row is None else score_cell(row, model == best[task]))
        table_rows.append(cells)
    labels = [f"{t} ({metric_label(next(r.metric for r in scores if r.task == t))})" for t in tasks]
    return Table(
        ["model", *labels],
        table_rows,
        "Test score (x100), mean ± sample standard deviation over seeds; in bold the highest mean where it is "
        "significantly above every other model's on that task (none in bold: no model is); floor: a simple "
        "baseline trained on the same examples",
    )


def caveats(scores: list[ScoreRow], arts: RunArtifacts, arms: list[str]) -> list[str]:
    """The conditions a reader needs before trusting the verdict."""
    out = []
    seeds = sorted({r.n_seeds for r in scores if r.model != FLOOR_MODEL})
    if seeds:
        out.append(
            f"Seeds: {'/'.join(map(str, seeds))} per model and task; the intervals include seed-to-seed "
            "variance and test-set sampling, and compare models in pairs under the same seeds where they can."
        )
    out += replicate_caveat(scores, arms)
    collapsed = [(r.model, r.task, r.collapsed, r.n_seeds) for r in scores if r.collapsed]
    if collapsed:
        out.append(
            "Collapsed runs (constant predictions or a loss that did not fall): "
            + "; ".join(f"{m} on {t}: {k} of {n}" for m, t, k, n in collapsed)
            + ". Differences involving them describe failed runs, not encoders."
        )
    else:
        out.append("No fine-tuning run collapsed.")
    out.append(result_check_text(arts.result_check))
    warm = arts.base_warmup
    if warm:
        how = (
            "until its general-text perplexity stopped falling"
            if warm["converged"]
            else "for its whole cap without its general-text perplexity levelling off (not converged)"
        )
        out.append(warmup_sentence(warm, how))
        out += head_training_caveats(arts, arms)
    out += budget_caveats(arts, arms)
    out += overlap_caveats(arts)
    return out


def replicate_caveat(scores: list[ScoreRow], arms: list[str]) -> list[str]:
    """One line on what a verdict about an arm is about: one checkpoint, or the procedure over its replicates."""
    rows = [r for r in scores if r.model in arms]
    if not rows:
        return []
    least = min(r.replicates for r in rows)
    if least <= 1:
        return [
            "Pretraining replicates: one per arm, so each verdict about an arm is about this checkpoint, not the "
            "procedure (pretrain.replicates trains more, under other seeds)."
        ]
    return [
        f"Pretraining replicates: {least} or more per arm; the arms' intervals include replicate-to-replicate variance."
    ]


def warmup_sentence(warm: dict[str, Any], how: str) -> str:
    """What the base warm-up was: the general masked-LM pretraining of the whole model, or a head alone."""
    cost = f"{warm['steps']} steps ({warm['tokens']:,} tokens, {warm['wall_seconds']:.0f} s"
    cost += ", served from this machine's cache)" if warm.get("from_machine_cache") else ")"
    ppl = (
        f"general-text pseudo-perplexity {warm.get('general_perplexity_random_head') or 0:,.0f} (random head) -> "
        f"{warm.get('general_perplexity') or 0:,.0f}, domain {warm.get('domain_perplexity_random_head') or 0:,.0f} "
        f"-> {warm.get('domain_perplexity') or 0:,.0f}"
    )
    if warm.get("train", "head") == "full":
        return (
            f"The base checkpoint has no MLM head: the whole model was first pretrained as a masked-LM on general "
            f"text {how}, {cost}; {ppl}. That general masked-LM is the 'base' of every comparison and the start "
            "of the checkpoint-based arms, as RoBERTa is in Don't Stop Pretraining."
        )
    return (
        f"The base checkpoint has no MLM head: one was trained {how}, {cost}, encoder frozen) on general text "
        f"before continued and extended pretraining, and 'before' perplexities are measured through it; {ppl}."
    ).replace("), encoder frozen)", ", encoder frozen)")


GENERAL_FALL = 0.1  # general-text perplexity falling by more than this share during an arm: the head still learned


def head_training_caveats(arts: RunArtifacts, arms: list[str]) -> list[str]:
    """The general-text control: when general perplexity also fell during an arm's pretraining, the warmed head
    was still learning, and that share of the domain drop is head training, not domain adaptation."""
    out = []
    for arm in arms:
        s = arts.pretrain.get(arm) or {}
        # a new generator's perplexity, or an encoder from scratch: its fall is learning from nothing, not a
        # warmed-up head still learning
        # the control trains on general text: its general perplexity is meant to fall
        if replaced_token_detection(s) or s.get("start_head") == "random" or s.get("data") == "general":
            continue
        d0, d1 = s.get("domain_perplexity_before"), s.get("domain_perplexity")
        g0, g1 = s.get("general_perplexity_before"), s.get("general_perplexity")
        if not (d0 and d1 and g0 and g1) or g1 > g0 * (1 - GENERAL_FALL):
            continue
        out.append(
            f"{arm}: general-text perplexity fell too ({g0:,.0f} -> {g1:,.0f}, {1 - g1 / g0:.0%}) while domain "
            f"perplexity fell {d0:,.0f} -> {d1:,.0f} ({1 - d1 / d0:.0%}): the warmed-up base was still learning, so only "
            f"the domain drop beyond the general one is domain adaptation (domain over general perplexity "
            f"{d0 / g0:.2f} -> {d1 / g1:.2f})."
        )
    return out


def overlap_caveats(arts: RunArtifacts) -> list[str]:
    """Per task, the examples its evaluation splits share with its training split, as fine-tuning recorded them."""
    out = []
    runs = arts.runs
    for task in dict.fromkeys(r.task for r in runs):
        record = next((r.split_overlap for r in runs if r.task == task and r.split_overlap), None)
        if not record or not any(record.normalised.get(s) for s in ("validation", "test")):
            continue
        found = ", ".join(
            f"{s} {record.normalised[s]} ({record.exact[s]} verbatim)"
            for s in ("validation", "test")
            if record.normalised.get(s)
        )
        action = (
            "left out of scoring, so every score is on unseen examples"
            if record.excluded
            else "scored anyway (finetune.split_overlap: keep): every model scores them from memory alike"
        )
        out.append(f"{task}: examples also in its training split: {found}; {action}.")
    return out


def result_check_text(check: ResultCheck | None) -> str:
    """Which expected results the tables use, and which are missing, stale or unrecorded."""
    if check is None:
        return "Results were not checked against the config."

    def listed(names: tuple[str, ...]) -> str:
        return ", ".join(names[:8]) + (f" and {len(names) - 8} more" if len(names) > 8 else "")

    missing, stale, loose, other, damaged = check.missing, check.stale, check.unrecorded, check.other, check.damaged
    used = check.expected - len(missing) - len(stale) - len(damaged)
    text = f"Results: {used} of the {check.expected} this config asks for"
    parts = []
    if missing:
        parts.append(f"missing: {listed(missing)}")
    if stale:
        parts.append(f"left out as stale (made with another config or input): {listed(stale)}")
    if damaged:
        parts.append(f"left out as damaged (changed since written; fine-tuning recomputes them): {listed(damaged)}")
    if other:
        parts.append(f"left out as not part of this config: {listed(other)}")
    if loose:
        parts.append(f"used but unverified (no record beside result.json): {listed(loose)}")
    return text + ("; " + "; ".join(parts) if parts else ", all current") + "."


DSP_TAPT_EPOCHS = 100  # Gururangan et al. (2020): TAPT trains 100 passes over the task's training text


def budget_caveats(arts: RunArtifacts, arms: list[str]) -> list[str]:
    corpus_arms = [a for a in arms if (arts.pretrain.get(a) or {}).get("data", "corpus") == "corpus"]
    return _corpus_budget(arts, corpus_arms) + _tapt_budget(arts, [a for a in arms if a not in corpus_arms])


def _tapt_budget(arts: RunArtifacts, arms: list[str]) -> list[str]:
    """The task-adaptive arms' budget: passes over the task text, against Don't Stop Pretraining's 100."""
    out = []
    for arm in arms:
        s = arts.pretrain.get(arm) or {}
        tokens, text = s.get("tokens_consumed"), s.get("task_text_tokens")
        if not (tokens and text):
            continue
        passes = tokens / text
        line = (
            f"{arm}: {tokens:,} tokens, {passes:.1f} passes over the {text:,}-token task text "
            f"(Don't Stop Pretraining's TAPT: {DSP_TAPT_EPOCHS})."
        )
        if passes < DSP_TAPT_EPOCHS / 10:  # under a tenth of the published passes
            line += " Fewer passes than published: a TAPT gain, or its absence, is not the published setting's."
        out.append(line)
    return out


def _corpus_budget(arts: RunArtifacts, arms: list[str]) -> list[str]:
    """The corpus arms' budget against the corpus and the published ones; where the arms' budgets differ
    (``arm_optim.<arm>.budget_tokens``: from scratch given more), each arm's, and the caveat on the smallest."""
    by_arm = {a: t for a, s in arts.pretrain.items() if a in arms and (t := s.get("tokens_consumed"))}
    if not by_arm:
        return []
    budget = min(by_arm.values())
    corpus = ((arts.manifest or {}).get("splits") or {}).get("train", {}).get("estimated_tokens")
    text = f"Pretraining budget: {budget:,} tokens per arm"
    if len(set(by_arm.values())) > 1:
        each = ", ".join(f"{a} {t:,}" for a, t in by_arm.items())
        text = (
            f"Pretraining budgets differ by arm ({each} tokens: a comparison of two of them is not at equal "
            f"compute); the smallest: {budget:,} tokens"
        )
    if corpus:
        text += f" ({budget / corpus:.2f} passes over the {corpus:,}-token training corpus)"
    name, published = smallest_published()
    text += f", {budget / published:.2e} of {name}'s about {published:.1e} tokens."
    if too_small(budget):
        text += (
            " This budget is too small to conclude anything about domain-adaptive pretraining as published: "
            "a difference here, or its absence, neither confirms nor contradicts it."
        )
    return [text]


def headline_section(
    scores: list[ScoreRow],
    comparisons: list[Comparison],
    arts: RunArtifacts,
    arms: list[str],
    extra: list[str],
    flags: list[str] | None = None,
    out_dir: Path | None = None,
    seeds: int = 0,
    searches: Sequence[RecipeSearch] = (),
    general: Collection[str] = (),
) -> Section:
    """The answer at a glance (a figure written into ``out_dir`` when given), the headline table, the verdict
    and its caveats; ``flags`` (``config_flags``) join the caveats; ``seeds``: how many the run configured;
    ``searches``: the recipe's rate searches (``failures.recipe_searches``); ``general``: the general-English
    tasks, left out of the domain verdict and read in the forgetting line."""
    sec = Section("Headline")
    if not scores:
        return sec.add("No fine-tuning results yet, so no verdict.", result_check_text(arts.result_check))
    incomplete = incomplete_models(arts.result_check, {r.task for r in scores})
    if incomplete:
        sec.add(
            f"Incomplete: {', '.join(incomplete)}: results missing or stale for this configuration; "
            + ("no verdict for any model (the base model's are)." if "base" in incomplete else "no verdict for them.")
        )
    adequacy = task_adequacy(scores, arts.runs)
    if out_dir is not None and (name := answer_figure(scores, comparisons, arms, out_dir)):
        sec.add(
            Figure(
                name,
                "Each arm's difference from the better reference per task, 95% interval; filled: the claim survives "
                "Holm's correction over the page's comparisons; shaded: the smallest difference the design detects "
                "with 80% power; dashed: the floor",
            )
        )
    failed = failure_notes(scores, comparisons, arts.runs)  # a failure-difference makes no model best in bold
    sec.add(headline_table(scores, arms, extra, set(adequacy), judged(comparisons, failed)))
    all_comparisons = comparisons
    if "base" in incomplete:
        sec.add("Verdict: withheld until every expected result is here.")
        return sec.add("Caveats:", caveats(scores, arts, arms) + [f"Unusual setting: {f}" for f in flags or []])
    arms = [a for a in arms if a not in incomplete]  # judged only on complete evidence
    comparisons = [c for c in comparisons if c.task not in adequacy]  # judged only where a task can tell
    forgetting = forgetting_paragraph(scores, comparisons, arms, general)
    scores, comparisons = (
        [r for r in scores if r.task not in general],
        [c for c in comparisons if c.task not in general],
    )
    failed = [n for n in failed if n.task not in adequacy and n.model in arms and n.task not in general]
    notes = recipe_notes(searches) + failed + rising_notes(arts.runs, arms)
    decided = decide(scores, comparisons, arms, list(adequacy), incomplete, notes)
    comparisons = judged(comparisons, notes)  # a failure-difference is named as one, never as an arm's result
    verdict = (
        arm_verdicts(scores, comparisons, arms)
        + control_sentences(scores, comparisons, arms)
        + scratch_sentences(comparisons, arms)
        + scratch_curve_sentences(*curves_of(arts))
        + reference_sentences(scores, all_comparisons)
        + list(adequacy.values())
        + forgetting
    )
    lead = decided.line + " " + floor_lead(scores, all_comparisons)
    sec.add(
        lead.strip(),
        decided.note_lines + verdict,
        "Power:",
        power_sentences(scores, all_comparisons, arms) or ["No comparison with the reference had an interval."],
        "Caveats:",
        seed_warning(scores, seeds) + caveats(scores, arts, arms) + [f"Unusual setting: {f}" for f in flags or []],
    )
    return sec
