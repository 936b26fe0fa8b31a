"""The report stage: one comparison page (HTML and Markdown, with PNG figures) per domain run.

``render_report`` reads only the run's artifacts (corpus manifest, vocab report, pretraining summaries and
metrics, fine-tuning results), so re-rendering never retrains anything. It writes ``layout.report`` through
``atomic_output``: ``report.html`` (self-contained: figures embedded as base64 PNG, inline CSS, no
scripts), ``report.md`` (links the PNGs beside it), the PNGs, and ``results.json`` (the score and
comparison rows). The fingerprint covers the report settings and the hash of every file read, so an
unchanged run is skipped and a new result re-renders the page; a page using fewer results than the one in
``layout.report`` is left beside it (``report.keep``). The report writes no card: each card is its stage's.
``report_markdown`` and ``results_table`` give the Prefect flows what they publish as artifacts.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from domainbert import __version__
from domainbert.config.domain import DomainConfig
from domainbert.config.finetune import CompareConfig
from domainbert.config_flags import budget_flags, setting_flags
from domainbert.core.artifacts import atomic_output, fingerprint, is_complete, write_json_atomic
from domainbert.core.document import Document, Section, to_html, to_markdown, to_text
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.finetune import recipe
from domainbert.finetune.best_model import kept_models
from domainbert.finetune.expectations import ExpectedRun, expected_runs, read_expected, result_state
from domainbert.report import finetune_sections, pretrain_sections, sections
from domainbert.report.groups import groups_section
from domainbert.report.headline import headline_section
from domainbert.report.inputs import FinetuneRun, Record, ResultCheck, RunArtifacts, load_run
from domainbert.report.keep import keep_complete, reported_results, results_used, staging_folder
from domainbert.report.results import CompareFn, build_tables, default_compare_fn, reference_of
from domainbert.report.rows import Comparison, ScoreRow, tables_json
from domainbert.report.verdict import recipe_searches
from domainbert.report.vocab_section import vocab_section

log = logging.getLogger(__name__)

# Bump when the report's content or layout changes, so existing reports are re-rendered.
REPORT_FORMAT = 18


def compare_tables(
    results: Sequence[FinetuneRun | Record],
    compare: CompareConfig,
    task_order: list[str],
    arms: list[str],
    extra: list[str],
    compare_fn: CompareFn | None = None,
    family: int | None = None,
) -> tuple[list[ScoreRow], list[Comparison]]:
    """Score and comparison rows of a set of results (see ``results.build_tables``)."""
    fn = compare_fn or default_compare_fn(compare.bootstrap_samples, compare.confidence, compare.seed)
    return build_tables(results, task_order, arms, extra, fn, compare.confidence, family)


def _tables(
    cfg: DomainConfig, arts: RunArtifacts, compare_fn: CompareFn | None
) -> tuple[list[ScoreRow], list[Comparison]]:
    return compare_tables(
        arts.finetune,
        cfg.compare,
        [t.name for t in cfg.finetune.tasks],
        list(cfg.pretrain.arms),
        list(cfg.finetune.extra_models),
        compare_fn,
    )


def _report_config(cfg: DomainConfig, arts: RunArtifacts) -> Record:
    # The result check is part of the key: a config change that makes results stale re-renders the page.
    return {
        "domain": cfg.name,
        "compare": cfg.compare.model_dump(mode="json"),
        "arms": list(cfg.pretrain.arms),
        "tasks": [t.name for t in cfg.finetune.tasks],
        "extra_models": list(cfg.finetune.extra_models),
        "result_check": arts.result_check.to_json() if arts.result_check else {},
        "report_format": REPORT_FORMAT,
        # only when set, so reports rendered before the setting stay current
        **(
            {"group_fields": groups}
            if (groups := {t.name: t.group_field for t in cfg.finetune.tasks if t.group_field})
            else {}
        ),
    }


def checked_run(cfg: DomainConfig, layout: RunLayout) -> RunArtifacts:
    """The run's artifacts with the fine-tuning results checked against what the run expects.

    The expectations are the list the fine-tuning stage wrote into the run (``finetune/expected.json``); a run
    folder without one (fine-tuning never started, or written before the list existed) is checked against this
    config's (``expectations.expected_runs``). Stale and damaged results and results of models or seeds outside
    the list are left out of every table; missing, stale, damaged, unrecorded and left-out ones are listed in
    ``arts.result_check``.
    """
    arts = load_run(layout, list(cfg.pretrain.arms))
    expected = run_expectations(cfg, layout)
    states = {(e.model, e.task, e.seed): result_state(layout, e) for e in expected}
    check: dict[str, list[str]] = {"missing": [], "stale": [], "unrecorded": [], "not in this config": []}
    # damaged results are not loaded (inputs.load_run); like missing ones they are listed from their state
    for state in ("missing", "damaged"):
        check[state] = [f"{m}/{t}/seed-{seed}" for (m, t, seed), st in states.items() if st == state]
    kept = []
    for record, run in zip(arts.finetune, arts.runs, strict=True):
        state = states.get((record["model"], run.task, run.seed), "not in this config")
        if state == "damaged":
            continue
        if state in ("stale", "not in this config", "unrecorded"):
            check[state].append(f"{record['model']}/{run.task}/seed-{run.seed}")
        if state not in ("stale", "not in this config"):
            kept.append(record)
    arts.finetune = kept
    arts.result_check = ResultCheck(
        len(states),
        *(tuple(check[k]) for k in ("missing", "stale", "damaged", "unrecorded", "not in this config")),
    )
    return arts


def require_run_outputs(cfg: DomainConfig, layout: RunLayout) -> None:
    """Refuse a folder that holds no output of any stage (empty, or not a run folder): its report would be empty.

    A partial run (a corpus only, fine-tuning not yet done) is fine; its report says what was not run.

    Raises:
        DataError: naming the folder and the outputs looked for.
    """
    arts = load_run(layout, list(cfg.pretrain.arms))
    if arts.holds_nothing:
        raise DataError(
            "nothing to report: none of corpus/manifest.json, vocab/report.json, "
            f"pretrain/{{{','.join(cfg.pretrain.arms)}}}/summary.json, "
            "finetune/<model>/<task>/seed-*/result.json is here (not a run folder, or no stage has "
            "run: run the stages or `domainbert run` into it first)",
            file=layout.root,
        )


def run_expectations(cfg: DomainConfig, layout: RunLayout) -> list[ExpectedRun]:
    """The results the run expects: the list fine-tuning wrote into it, else this config's."""
    expected = read_expected(layout)
    return expected if expected is not None else expected_runs(cfg, layout)


def found_text(arts: RunArtifacts) -> str:
    """What the run folder holds, from the artifacts themselves (the config may have been overridden)."""

    def names(key: str) -> str:
        # the floor's one deterministic run is not a seed of the fine-tuned models
        rows = [r for r in arts.finetune if key != "seed" or r["model"] != "floor"]
        return ", ".join(sorted({str(r[key]) for r in rows}, key=lambda v: (len(v), v))) or "-"

    stages = [
        name for name, present in (("corpus", arts.manifest is not None), ("vocab", arts.vocab is not None)) if present
    ]
    text = (
        f"Found in the run folder: {', '.join(stages) or 'no corpus or vocab stage'}; pretraining arms "
        f"{', '.join(arts.pretrain) or '-'}"
    )
    if arts.finetune:
        text += (
            f"; {len(arts.finetune)} fine-tuning results (models {names('model')}; tasks {names('task')}; "
            f"seeds {names('seed')})"
        )
    return text + "."


def _flags(cfg: DomainConfig, arts: RunArtifacts) -> list[str]:
    """The run's unusual settings and budget (``config_flags``); task overlaps come from the results."""
    corpus = ((arts.manifest or {}).get("estimated_tokens") or {}).get("train")
    return setting_flags(cfg) + budget_flags(cfg, corpus)


def build_document(
    cfg: DomainConfig, layout: RunLayout, arts: RunArtifacts, out_dir: Path, compare_fn: CompareFn | None = None
) -> tuple[Document, list[ScoreRow], list[Comparison]]:
    """The report document; its figures are written into ``out_dir``.

    Returns:
        (document, score rows, comparison rows).
    """
    scores, comparisons = _tables(cfg, arts, compare_fn)
    intro = Section("This run").add(
        cfg.description,
        found_text(arts),
        (
            f"Domain config used to render (profile '{cfg.profile}'): base model {cfg.base_model.name_or_path}; "
            f"arms {', '.join(cfg.pretrain.arms)}; tasks {', '.join(t.name for t in cfg.finetune.tasks)}; "
            f"bootstrap {cfg.compare.bootstrap_samples} resamples at {round(100 * cfg.compare.confidence)}%."
        ),
        f"Run folder: {layout.root.name} (the folder this report/ folder is in)",
    )
    kept = kept_models(layout, run_expectations(cfg, layout))
    if kept:
        intro.add(
            "Fine-tuned models kept (per model and task, the seed best on validation; `domainbert push --finetuned "
            "MODEL/TASK` publishes one): "
            + ", ".join(f"finetune/{m}/{t}/best (seed {seed})" for m, t, seed in kept)
            + "."
        )
    method = finetune_sections.method_section(cfg, comparisons)
    doc = Document(
        f"domainbert report: {cfg.name}",
        [
            headline_section(
                scores,
                comparisons,
                arts,
                list(cfg.pretrain.arms),
                list(cfg.finetune.extra_models),
                _flags(cfg, arts),
                out_dir,
                len(cfg.finetune.seeds),
                recipe_searches(recipe.search_state(cfg, layout)) if recipe.searched_tasks(cfg) else [],
                [t.name for t in cfg.finetune.tasks if t.role == "general"],
            ),
            intro,
            finetune_sections.summary_section(scores, comparisons),
            sections.corpus_section(arts, layout.corpus, out_dir, [f.name for f in cfg.corpus.filters]),
            vocab_section(arts, layout.vocab, out_dir),
            pretrain_sections.pretrain_section(arts, list(cfg.pretrain.arms), out_dir),
            pretrain_sections.compute_section(arts),
            finetune_sections.finetune_section(
                scores, comparisons, out_dir, cfg.compare.bootstrap_samples, [t.name for t in cfg.finetune.tasks]
            ),
            *([by_group] if (by_group := groups_section(cfg, arts)) else []),
            method,
        ],
        footer=f"Rendered {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by domainbert {__version__} "
        f"from {len(arts.input_hashes)} artifact file(s).",
    )
    return doc, scores, comparisons


ANSWER = "answer.txt"  # the headline as plain text: what `run` and `report` print before the page's path


def answer_text(doc: Document) -> str:
    """The headline section up to its caveats (table, verdict, power) as plain text for a terminal."""
    headline = doc.sections[0]
    blocks = list(headline.blocks)
    cut = next((i for i, b in enumerate(blocks) if b == "Caveats:"), len(blocks))
    return f"{doc.title}\n\n" + to_text(blocks[:cut])


def read_answer(report_html: Path) -> str | None:
    """The answer written beside a rendered report (None for a page rendered before it was written)."""
    path = Path(report_html).parent / ANSWER
    return path.read_text(encoding="utf-8") if path.is_file() else None


def render_report(cfg: DomainConfig, layout: RunLayout, *, compare_fn: CompareFn | None = None) -> Path:
    """Render the domain's comparison report into ``layout.report``; skipped when up to date.

    Args:
        cfg: the domain config.
        layout: the run's folders.
        compare_fn: the paired comparison; default ``domainbert.report.stats.compare_models``.

    Returns:
        ``layout.report / "report.html"``; the ``report-<time>`` folder's when a more complete report was
        already in ``layout.report`` (``report.keep``).

    Raises:
        DataError: an artifact exists but cannot be read.
    """
    cfg = recipe.applied(cfg, layout)  # the recipe the run chose (rates, the reference's step), as its runs did
    arts = checked_run(cfg, layout)
    config = _report_config(cfg, arts)
    fp = fingerprint(config, arts.input_hashes, __version__)
    html_path = layout.report / "report.html"
    if is_complete(layout.report, fp) and html_path.is_file():
        log.info("report skipped: up to date (%s)", html_path)
        return html_path
    kept = reported_results(layout.report)
    staged = staging_folder(layout)
    with atomic_output(staged, config=config, inputs=arts.input_hashes, fp=fp, root=layout.root) as tmp:
        doc, scores, comparisons = build_document(cfg, layout, arts, tmp, compare_fn)
        (tmp / "report.md").write_text(to_markdown(doc), encoding="utf-8")
        (tmp / "report.html").write_text(to_html(doc, tmp), encoding="utf-8")
        (tmp / ANSWER).write_text(answer_text(doc), encoding="utf-8")
        write_json_atomic(tmp / "results.json", tables_json(scores, comparisons))  # draws stay in memory
    folder = keep_complete(staged, layout, kept, results_used([s.n_seeds for s in scores]))
    track_report(cfg, layout, folder, fp)
    log.info("report: %s", folder / "report.html")
    return folder / "report.html"


def track_report(cfg: DomainConfig, layout: RunLayout, folder: Path, fp: str) -> None:
    """Keep the report rendered in ``folder`` (HTML, Markdown, results.json) with the run's MLflow experiment, as
    a run named ``report``; nothing when MLflow is not among ``tracking.report_to``."""
    if "mlflow" not in cfg.tracking.report_to:
        return
    from domainbert.trackers import Tracker

    tracker = Tracker(
        cfg.tracking.model_copy(update={"report_to": ["mlflow"]}),
        folder=layout.root / "tracking" / "report",
        store_root=layout.root,
        domain=cfg.name,
        run_name="report",
        fingerprint=fp,
        params={},
        tags={"domainbert.stage": "report", "domainbert.version": __version__},
        resume_step=None,
    )
    tracker.log_artifacts([folder / name for name in ("report.html", "report.md", "results.json")])
    tracker.close()


def report_markdown(cfg: DomainConfig, layout: RunLayout) -> str:
    """The report as Markdown: the rendered ``report.md`` when up to date, else rendered afresh (in memory;
    its figures go to a temporary folder)."""
    arts = checked_run(cfg, layout)
    fp = fingerprint(_report_config(cfg, arts), arts.input_hashes, __version__)
    md = layout.report / "report.md"
    if is_complete(layout.report, fp) and md.is_file():
        return md.read_text(encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        doc, _, _ = build_document(cfg, layout, arts, Path(tmp))
        return to_markdown(doc)


def results_table(cfg: DomainConfig, layout: RunLayout) -> list[Record]:
    """One flat row per task and model: mean, std, seeds, and the comparison with the base model.

    Returns:
        Rows with ``task``, ``metric``, ``model``, ``n_seeds``, ``mean``, ``std`` (fractions), and
        ``reference``, ``diff``, ``ci_low``, ``ci_high``, ``verdict`` (None for the reference itself).
    """
    arts = checked_run(cfg, layout)
    fp = fingerprint(_report_config(cfg, arts), arts.input_hashes, __version__)
    saved = layout.report / "results.json"
    if is_complete(layout.report, fp) and saved.is_file():  # the rendered report's numbers, no second bootstrap
        tables = json.loads(saved.read_text())
    else:
        tables = tables_json(*_tables(cfg, arts, None))
    return flat_rows(tables["scores"], tables["comparisons"])


def flat_rows(scores: list[Record], comparisons: list[Record]) -> list[Record]:
    """One row per task and model from the score and comparison tables as ``results.json`` holds them (see
    ``results_table``)."""
    rows = []
    for s in scores:
        ref = reference_of(s["model"])
        cmp = next(
            (c for c in comparisons if c["task"] == s["task"] and c["model"] == s["model"] and c["reference"] == ref),
            None,
        )
        rows.append(
            {
                "task": s["task"],
                "metric": s["metric"],
                "model": s["model"],
                "n_seeds": s["n_seeds"],
                "mean": s["mean"],
                "std": s["std"],
                "reference": cmp["reference"] if cmp else None,
                "diff": cmp["diff"] if cmp else None,
                "ci_low": cmp["ci_low"] if cmp else None,
                "ci_high": cmp["ci_high"] if cmp else None,
                "verdict": cmp["verdict"] if cmp else None,
            }
        )
    return rows


def read_rendered(report_dir: Path) -> tuple[str, list[Record]]:
    """(Markdown, flat result rows) of a report ``render_report`` has just written into ``report_dir``.

    Raises:
        DataError: the folder holds no rendered report.
    """
    md, saved = report_dir / "report.md", report_dir / "results.json"
    if not (md.is_file() and saved.is_file()):
        raise DataError("no rendered report here (run `domainbert report` first)", file=report_dir)
    tables = json.loads(saved.read_text(encoding="utf-8"))
    return md.read_text(encoding="utf-8"), flat_rows(tables["scores"], tables["comparisons"])
