"""The cross-domain page: several domains' runs side by side (what won where, by how much).

It reads each run folder's artifacts exactly as the per-domain report does (no domain config needed, so
runs from other machines or older profiles can be compared) and recomputes the paired bootstrap with the
given ``CompareConfig`` (defaults: 1000 resamples, 95%). Per domain: corpus size, vocab recommendation and
overlap, perplexity before/after per arm, the score of every model per task, the key comparisons with
their intervals, and one grouped bar chart. A run without fine-tuning results is listed as "not run".
Output: ``out_dir/report.html`` (self-contained), ``report.md``, ``cross_domain_scores.png``.
"""

from __future__ import annotations

import logging
import os
import time
import typing
from dataclasses import replace
from pathlib import Path
from typing import Any

from domainbert import __version__
from domainbert.config.finetune import CompareConfig
from domainbert.config.pretrain import Arm
from domainbert.core.artifact_types import replaced_token_detection
from domainbert.core.artifacts import atomic_output, fingerprint, is_complete
from domainbert.core.document import Document, Figure, Section, Table, to_html, to_markdown
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.report import figures
from domainbert.report.compare import compare_tables
from domainbert.report.finetune_sections import holm_p_text, std_text
from domainbert.report.headline import caveats
from domainbert.report.inputs import RunArtifacts, load_run
from domainbert.report.results import CompareFn, page_family
from domainbert.report.rows import Comparison, ScoreRow, holm_adjusted
from domainbert.report.sections import fmt
from domainbert.report.summary import comparison_sentence, floor_sentences, interval_text, points, signed_points
from domainbert.report.vocab_section import VocabFindings, domain_overlap, recommendation

log = logging.getLogger(__name__)
ARMS = list(typing.get_args(Arm))
KEY_PAIRS = [
    ("continued", "base"),
    ("extended", "base"),
    ("scratch", "base"),
    ("tapt", "base"),
    ("dapt-tapt", "base"),
    ("continued", "scratch"),
]


def _train_stats(arts: RunArtifacts) -> dict[str, Any]:
    splits = (arts.manifest or {}).get("splits") or {}
    return splits.get("train") or {}


def _corpus_vocab_table(runs: dict[str, RunArtifacts]) -> Table:
    rows = []
    for domain, arts in runs.items():
        train = _train_stats(arts)
        vocab = VocabFindings.of(arts.vocab or {})
        choice, _, _ = recommendation(vocab)
        found = domain_overlap(vocab)
        overlap = f"{100 * found[1]:.1f}% ({found[0]})" if found else "-"
        rows.append(
            [
                domain,
                fmt(train.get("documents")) if arts.manifest else "not run",
                fmt(train.get("estimated_tokens")) if arts.manifest else "-",
                choice or ("not run" if arts.vocab is None else "-"),
                overlap,
            ]
        )
    return Table(
        [
            "domain",
            "train documents",
            "train tokens (est.)",
            "vocab recommendation",
            "domain vocab in reference vocab",
        ],
        rows,
        "Corpus and vocabulary per domain",
    )


def _pretrain_table(runs: dict[str, RunArtifacts]) -> Table:
    rows = []
    for domain, arts in runs.items():
        if not arts.pretrain:
            rows.append([domain, "not run", "-", "-", "-"])
        for arm, s in arts.pretrain.items():
            rows.append(
                [
                    domain,
                    arm,
                    ("generator " if replaced_token_detection(s) else "")
                    + f"{fmt(s.get('domain_perplexity_before'), 1)} -> {fmt(s.get('domain_perplexity'), 1)}",
                    f"{fmt(s.get('general_perplexity_before'), 1)} -> {fmt(s.get('general_perplexity'), 1)}",
                    _seconds_text(s),
                ]
            )
    return Table(
        [
            "domain",
            "arm",
            "domain perplexity (before -> after)",
            "general perplexity (before -> after)",
            "train seconds (each run's own machine)",
        ],
        rows,
        "Pretraining per domain and arm. Training seconds were measured on the machine each run was made on "
        "(the runs record its precision, processes and threads, not its CPU or GPU): they compare arms within "
        "one run, not runs made on different machines",
    )


def _seconds_text(summary: dict[str, Any]) -> str:
    """An arm's training seconds with what the run recorded of its machine (precision, processes, threads)."""
    seconds = fmt(summary.get("wall_seconds"), 1)
    machine = [
        str(summary["precision"]) if summary.get("precision") else "",
        f"{summary['world_size']} process(es)" if summary.get("world_size") else "",
        f"{summary['torch_threads']} thread(s)" if summary.get("torch_threads") else "",
    ]
    recorded = ", ".join(part for part in machine if part)
    return f"{seconds} ({recorded})" if recorded else seconds


def render_cross_domain(
    runs: dict[str, Path], out_dir: Path, *, compare: CompareConfig | None = None, compare_fn: CompareFn | None = None
) -> Path:
    """Render the cross-domain page over several run folders.

    Args:
        runs: domain name -> run folder (``runs/<domain>``).
        out_dir: where to write the page (its own artifact folder).
        compare: bootstrap settings (default ``CompareConfig()``).
        compare_fn: the paired comparison; default ``domainbert.report.stats.compare_models``.

    Returns:
        ``out_dir / "report.html"`` (``report.md`` beside it).
    """
    compare = compare or CompareConfig()
    out_dir = Path(out_dir)
    _refuse_repeats(runs)
    loaded = {domain: load_run(RunLayout(Path(root))) for domain, root in runs.items()}
    _refuse_empty(loaded)
    hashes = {f"{d}/{k}": v for d, arts in loaded.items() for k, v in arts.input_hashes.items()}
    config = {"runs": {d: str(Path(p).resolve()) for d, p in runs.items()}, "compare": compare.model_dump(mode="json")}
    fp = fingerprint(config, hashes, __version__)
    html_path = out_dir / "report.html"
    if is_complete(out_dir, fp) and html_path.is_file():
        log.info("cross-domain report skipped: up to date (%s)", html_path)
        return html_path
    with atomic_output(out_dir, config=config, inputs=hashes, fp=fp) as tmp:
        doc = _document(loaded, runs, compare, compare_fn, tmp, out_dir)
        (tmp / "report.md").write_text(to_markdown(doc), encoding="utf-8")
        (tmp / "report.html").write_text(to_html(doc, tmp), encoding="utf-8")
    log.info("cross-domain report: %s", html_path)
    return html_path


def _refuse_empty(loaded: dict[str, RunArtifacts]) -> None:
    """A folder with no stage's output (empty, a typo's fresh folder) would show as a domain that ran nothing.

    Raises:
        DataError: naming the folder.
    """
    for domain, arts in loaded.items():
        if arts.holds_nothing:
            raise DataError(
                f"no run of {domain!r} here: no stage's output (corpus/manifest.json, vocab/report.json, "
                "pretrain/*/summary.json, finetune/**/result.json); give finished run folders",
                file=arts.root,
            )


def _refuse_repeats(runs: dict[str, Path]) -> None:
    """One run folder under two names would count its results twice as two domains' evidence.

    Raises:
        DataError: naming the folder and both names.
    """
    seen: dict[Path, str] = {}
    for domain, root in runs.items():
        folder = Path(root).resolve()
        if folder in seen:
            raise DataError(f"the same run is given twice, as {seen[folder]!r} and {domain!r}", file=folder)
        seen[folder] = domain


def _summary(loaded: dict[str, RunArtifacts], all_scores: list[ScoreRow], all_cmps: list[Comparison]) -> Section:
    """Per domain: the floor, the key comparisons with the base model, and the domain's caveats."""
    summary = Section("Summary")
    for domain in loaded:
        key = [c for c in all_cmps if c.domain == domain and (c.model, c.reference) in KEY_PAIRS]
        if not any(r.domain == domain for r in all_scores):
            summary.add(f"{domain}: no fine-tuning results (not run).")
        elif not key:
            summary.add(f"{domain}: fine-tuned, but no model could be compared with the base model.")
        else:
            mine = [r for r in all_scores if r.domain == domain]
            summary.add(
                f"{domain}:",
                floor_sentences(mine, [c for c in all_cmps if c.domain == domain])
                + [comparison_sentence(c) for c in key]
                + [f"Caveat: {text}" for text in caveats(mine, loaded[domain], ARMS)],
            )

    return summary


def _results(all_scores: list[ScoreRow], all_cmps: list[Comparison], compare: CompareConfig, tmp: Path) -> Section:
    """Every domain's scores and comparisons in two tables, and the figure."""
    scores_rows = [
        [
            r.domain or "",
            r.task,
            r.model,
            str(r.n_seeds),
            points(r.mean),
            std_text(r),
            f"{r.collapsed}/{r.n_seeds}",
        ]
        for r in all_scores
    ]
    cmp_rows = [
        [
            c.domain or "",
            c.task,
            f"{c.model} vs {c.reference}",
            signed_points(c.diff),
            interval_text(c),
            holm_p_text(c, compare.bootstrap_samples),
            c.verdict,
        ]
        for c in all_cmps
    ]
    level = round(100 * compare.confidence)
    results = Section("Fine-tuning results")
    if scores_rows:
        results.add(
            Table(
                ["domain", "task", "model", "seeds", "mean (x100)", "std", "collapsed"],
                scores_rows,
                "Test score (F1 for NER, macro-F1 for classification), mean and std over seeds; floor: "
                "a simple baseline on the same examples",
            )
        )
    if cmp_rows:
        results.add(
            Table(
                ["domain", "task", "comparison", "difference (points)", f"{level}% CI", "p after Holm", "verdict"],
                cmp_rows,
                f"Seed-aware intervals ({compare.bootstrap_samples} draws) per domain; the verdicts hold the "
                f"family-wise error over the page's {sum(c.p_holm is not None for c in all_cmps)} "
                "comparisons (Holm)",
            )
        )
    if name := figures.domain_bars(all_scores, tmp):
        results.add(Figure(name, "Mean test score per domain, task and model; error bars: one std over seeds"))
    if not scores_rows:
        results.add("Not run: none of the runs has fine-tuning results.")

    return results


def _document(
    loaded: dict[str, RunArtifacts],
    runs: dict[str, Path],
    compare: CompareConfig,
    compare_fn: CompareFn | None,
    tmp: Path,
    out_dir: Path,
) -> Document:
    all_scores: list[ScoreRow] = []
    all_cmps: list[Comparison] = []
    family = sum(page_family(arts.finetune, ARMS, []) for arts in loaded.values())  # Holm's, over the page
    for domain, arts in loaded.items():
        scores, cmps = compare_tables(arts.finetune, compare, [], ARMS, [], compare_fn, family)
        all_scores += [replace(r, domain=domain) for r in scores]
        all_cmps += [replace(c, domain=domain) for c in cmps]
    all_cmps = holm_adjusted(all_cmps, compare.confidence)  # the page's family: every domain's comparisons together
    summary = _summary(loaded, all_scores, all_cmps)
    results = _results(all_scores, all_cmps, compare, tmp)
    links = []
    for domain, root in runs.items():
        page = Path(root).resolve() / "report" / "report.html"
        rel = os.path.relpath(page, out_dir.resolve())
        links.append(f"{domain}: {rel}" + ("" if page.is_file() else " (not rendered yet)"))
    return Document(
        "domainbert cross-domain comparison",
        [
            summary,
            Section("Corpus and vocabulary").add(_corpus_vocab_table(loaded)),
            Section("Pretraining").add(_pretrain_table(loaded)),
            results,
            Section("Per-domain reports").add(links),
        ],
        footer=f"Rendered {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by domainbert {__version__} from "
        f"{len(loaded)} run folder(s).",
    )
