"""The sections of a domain's comparison report, each built from one stage's artifacts.

A stage whose artifacts are absent gets a section that says "Not run" and names the file it looked for;
nothing is estimated in its place. Numbers are formatted here (thousands separators, points for scores);
which comparisons exist and their verdicts come from ``results.py``, the sentences from ``summary.py``, the
vocabulary section from ``vocab_section.py``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from domainbert.core.document import Figure, Section, Table
from domainbert.report import figures
from domainbert.report.inputs import RunArtifacts
from domainbert.report.results import reference_of
from domainbert.report.summary import interval_text, metric_label, points, signed_points, summary_lines


def fmt(value: Any, digits: int = 2) -> str:
    """A cell: integers with thousands separators, floats with ``digits`` significant decimals, '-' for None."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and (abs(value) >= 1e6 or abs(value) < 10**-digits):
            return f"{value:.{digits}e}"
        return f"{value:,.{digits}f}"
    return str(value)


def not_run(title: str, path: Path, root: Path, stage: str) -> Section:
    rel = path.relative_to(root) if path.is_relative_to(root) else path
    return Section(title).add(f"Not run: {rel} was not found. Run `domainbert {stage}` and re-render the report.")


# Artifacts are saved with sorted keys; tables read better with counts in pipeline order.
PREFERRED_ORDER = [
    "documents_in",
    "documents",
    "words",
    "bytes",
    "estimated_tokens",
    "exact_removed",
    "near_removed",
    "near_clusters",
]


def ordered(keys: list[str]) -> list[str]:
    """``keys`` with the PREFERRED_ORDER ones first (in that order), the rest as given."""
    known = [k for k in PREFERRED_ORDER if k in keys]
    return known + [k for k in keys if k not in known]


def stat_table(mapping: dict[str, Any], first: str, caption: str | None = None) -> Table | None:
    """Rows from ``{name: {stat: number}}``; columns are the union of scalar stats in first-seen order."""
    rows = {k: v for k, v in mapping.items() if isinstance(v, dict)}
    if not rows:
        return None
    cols: list[str] = []
    for stats in rows.values():
        cols += [k for k, v in stats.items() if not isinstance(v, (dict, list)) and k not in cols]
    cols = ordered(cols)
    return Table(
        [first, *(c.replace("_", " ") for c in cols)],
        [[name, *(fmt(stats.get(c)) for c in cols)] for name, stats in rows.items()],
        caption,
    )


def flat_pairs(mapping: dict[str, Any], prefix: str = "") -> list[list[str]]:
    """Nested scalars as ``[dotted key, value]`` rows (for small blocks such as decontamination counts)."""
    out = []
    for key, value in mapping.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out += flat_pairs(value, name + ".")
        elif isinstance(value, list):
            out.append([name, ", ".join(fmt(v) for v in value[:20]) + (" ..." if len(value) > 20 else "")])
        else:
            out.append([name, fmt(value)])
    return out


def corpus_section(arts: RunArtifacts, corpus_dir: Path, out_dir: Path, filter_order: list[str]) -> Section:
    """Corpus size per split and source, filter drops (in ``filter_order``, the config's), deduplication and
    decontamination counts, and the corpus stage's plots."""
    title = "Corpus"
    m = arts.manifest
    if m is None:
        return not_run(title, corpus_dir / "manifest.json", arts.root, "corpus")
    sec = Section(title)
    for key, first, caption in (
        ("splits", "split", "Documents, words, bytes and estimated tokens per split"),
        ("sources", "source", "Per source"),
    ):
        if isinstance(m.get(key), dict) and (table := stat_table(m[key], first, caption)):
            sec.add(table)
    filters = m.get("filters") or {}
    if filters:
        rows = []
        names = [f for f in filter_order if f in filters] + [f for f in filters if f not in filter_order]
        for name in names:
            info = filters[name]
            reasons = (info.get("reasons") or {}) if isinstance(info, dict) else {}
            top = sorted(reasons.items(), key=lambda kv: -kv[1])[:3] if isinstance(reasons, dict) else []
            rows.append(
                [
                    name,
                    fmt(info.get("dropped") if isinstance(info, dict) else info),
                    ", ".join(f"{r} ({fmt(n)})" for r, n in top) or "-",
                ]
            )
        sec.add(Table(["filter", "dropped", "top reasons"], rows, "Documents dropped by each filter, in order"))
    dedup = m.get("dedup")
    if isinstance(dedup, dict) and dedup:
        dedup = {k: dedup[k] for k in ordered(list(dedup))}
        sec.add(Table(["deduplication", "value"], flat_pairs(dedup), "Exact and near-duplicate removal"))
    sec.add(*decontamination_blocks(m.get("decontamination")))
    sec.add(*audit_blocks(m.get("audit")))
    for plot in arts.corpus_plots:
        name = f"corpus_{plot.name}"
        shutil.copyfile(plot, out_dir / name)
        sec.add(Figure(name, f"From the corpus stage: {plot.stem.replace('_', ' ')}"))
    return sec


def decontamination_blocks(decon: Any) -> list[str | Table]:
    """What decontamination removed, per evaluation task and split (``by_task_split``) when recorded."""
    if not isinstance(decon, dict) or not decon:
        return ["Decontamination: the manifest records none."]
    if decon.get("enabled") is False:
        return ["Decontamination: disabled in the domain config."]
    blocks: list[str | Table] = [
        f"Decontamination against the evaluation sets: {fmt(decon.get('documents_removed'))} documents removed "
        f"and {fmt(decon.get('sentences_removed'))} sentences cut."
        + (f" Rule: {decon['rule']}." if decon.get("rule") else "")
    ]
    by_owner = decon.get("by_task_split")
    index = decon.get("index")
    if not isinstance(index, dict):
        index = {}
    if isinstance(by_owner, dict):
        owners = list(dict.fromkeys([*index, *by_owner]))
        rows = [
            [
                o,
                fmt((index.get(o) or {}).get("texts")),
                fmt((by_owner.get(o) or {}).get("documents", 0)),
                fmt((by_owner.get(o) or {}).get("sentences", 0)),
            ]
            for o in owners
        ]
        blocks.append(
            Table(
                ["evaluation set", "texts indexed", "documents removed", "sentences cut"],
                rows,
                "Decontamination per evaluation task and split",
            )
        )
    else:
        blocks.append(Table(["decontamination", "value"], flat_pairs(decon), "Decontamination counts"))
    return blocks


def audit_blocks(audit: Any) -> list[str | Table]:
    """The corpus stage's leakage audit (``corpus/audit.py``): evaluation texts still in the corpus, per split."""
    if not isinstance(audit, dict) or not audit.get("enabled", True):
        return ["Leakage audit: not run (no audit in the manifest, or disabled)."]
    rows = [
        [name, fmt(a.get("texts")), fmt(a.get("verbatim")), fmt(a.get("texts_with_ngram_hits"))]
        for name, a in (audit.get("by_task_split") or {}).items()
        if isinstance(a, dict)
    ]
    verbatim = sum(
        int(a.get("verbatim") or 0) for a in (audit.get("by_task_split") or {}).values() if isinstance(a, dict)
    )
    text = f"Leakage audit of the finished corpus: {verbatim} evaluation text(s) found verbatim" + (
        " (allowed by the domain config)." if verbatim and audit.get("allow_leaks") else "."
    )
    unchecked = audit.get("not_checked") or []
    if unchecked:
        items = unchecked.items() if isinstance(unchecked, dict) else [(u, "") for u in unchecked]
        text += " Not checked: " + ", ".join(f"{k} ({v})" if v else str(k) for k, v in items) + "."
    return [
        text,
        Table(
            ["evaluation set", "texts", "verbatim in corpus", "texts with an n-gram in corpus"],
            rows,
            "Independent check of every evaluation text against the final corpus",
        ),
    ]


def pretrain_section(arts: RunArtifacts, arms: list[str], out_dir: Path) -> Section:
    """Per arm: steps, tokens, final loss, perplexities before and after; loss and perplexity figures."""
    sec = Section("Pretraining")
    if not arts.pretrain:
        return sec.add(
            "Not run: no pretrain/<arm>/summary.json was found. Run `domainbert pretrain` and re-render the report."
        )
    rows = []
    warm = arts.head_warmup
    if warm:
        rows.append(
            [
                "base, MLM head warmed up",
                fmt(warm.get("steps")),
                fmt(warm.get("tokens")),
                "-",
                "-",
                f"random head {fmt(warm.get('domain_perplexity_random_head'), 1)} -> "
                f"{fmt(warm.get('domain_perplexity'), 1)}",
                f"random head {fmt(warm.get('general_perplexity_random_head'), 1)} -> "
                f"{fmt(warm.get('general_perplexity'), 1)}",
            ]
        )
    for arm, s in arts.pretrain.items():
        random_start = s.get("start_head") == "random" or s.get("start_head", "").startswith("checkpoint or random")
        # A perplexity through a random head says nothing about the encoder: not shown as a "before" figure.
        before_d = "random init" if random_start else fmt(s.get("domain_perplexity_before"), 1)
        before_g = "random init" if random_start else fmt(s.get("general_perplexity_before"), 1)
        rows.append(
            [
                arm,
                fmt(s.get("steps")),
                fmt(s.get("tokens_consumed")),
                fmt(s.get("lr")),
                fmt(s.get("final_loss"), 3),
                f"{before_d} -> {fmt(s.get('domain_perplexity'), 1)}",
                f"{before_g} -> {fmt(s.get('general_perplexity'), 1)}",
            ]
        )
    sec.add(
        Table(
            [
                "arm",
                "steps",
                "tokens",
                "peak lr",
                "final loss",
                "held-out domain perplexity (before -> after)",
                "general perplexity (before -> after)",
            ],
            rows,
            "MLM pretraining of each arm on the same token budget; perplexity on fixed masked sequences "
            "under each model's own tokenizer",
        )
    )
    if warm:
        sec.add(
            "The continued arm starts from the warmed-up model, the extended arm gets its head, so their "
            "'before' perplexities are the warmed-up base's; the warm-up's cost is not part of the arms' budget."
        )
    missing = [a for a in arms if a not in arts.pretrain]
    if missing:
        sec.add(f"Not run: arm(s) {', '.join(missing)} (no summary.json).")
    if name := figures.loss_curves(arts.pretrain, arts.metrics, out_dir):
        sec.add(Figure(name, "MLM training loss per optimizer step (long runs: faint per step, solid moving average)"))
    if name := figures.perplexity_curves(arts.metrics, out_dir):
        sec.add(
            Figure(
                name,
                "Held-out domain and general-domain perplexity at each evaluation (step 0 = "
                "before pretraining). A rise in general perplexity is forgetting.",
            )
        )
    return sec


def _total(parameters: Any) -> Any:
    # The pretrain summary records {"embedding", "non_embedding", "total"}; older ones a plain count.
    return parameters.get("total") if isinstance(parameters, dict) else parameters


def compute_section(arts: RunArtifacts) -> Section:
    """What each arm cost: wall time, throughput, FLOPs, MFU, engine."""
    sec = Section("Compute")
    if not arts.pretrain:
        return sec.add("Not run: no pretraining summaries.")
    rows = []
    for arm, s in arts.pretrain.items():
        fpt, tokens = s.get("flops_per_token"), s.get("tokens_consumed")
        total = float(fpt) * float(tokens) if fpt is not None and tokens is not None else None
        engine = s.get("engine") or "-"
        if s.get("zero_stage") is not None:
            engine += f" ZeRO-{s['zero_stage']}"
        rows.append(
            [
                arm,
                fmt(s.get("wall_seconds"), 1),
                fmt(s.get("real_tokens_per_s"), 1),
                fmt(s.get("real_token_fraction"), 3),
                fmt(fpt, 3),
                fmt(total, 3),
                fmt(s.get("mfu"), 4),
                engine,
                fmt(s.get("world_size")),
                fmt(s.get("precision")),
                fmt(_total(s.get("parameters"))),
            ]
        )
    warm = arts.head_warmup
    if warm:
        rows.append(
            [
                "MLM-head warm-up (before the arms)",
                fmt(warm.get("wall_seconds"), 1),
                fmt(warm.get("tokens", 0) / max(warm.get("wall_seconds") or 1e-9, 1e-9), 1),
                "-",
                "-",
                "-",
                "-",
                "torch, encoder frozen",
                "1",
                "-",
                fmt(warm.get("trainable_parameters")),
            ]
        )
    sec.add(
        Table(
            [
                "arm",
                "train seconds",
                "real tokens/s",
                "real-token fraction",
                "FLOPs/token",
                "training FLOPs (FLOPs/token x tokens)",
                "MFU",
                "engine",
                "processes",
                "precision",
                "parameters",
            ],
            rows,
            "Compute each arm used (MFU is '-' when no hardware peak was declared)",
        )
    )
    return sec


def std_text(row: dict[str, Any]) -> str:
    """The standard deviation in points; '-' for a single seed (there is no spread to show)."""
    return points(row["std"]) if row["n_seeds"] > 1 else "-"


def _n_comparisons(comparisons: list[dict[str, Any]]) -> str:
    return f"{len(comparisons)} comparison{'s' if len(comparisons) != 1 else ''}, not corrected for multiplicity."


def p_text(p: Any, samples: int) -> str:
    """A bootstrap p-value; 0 means no draw crossed 0, i.e. below the resolution 2 / samples."""
    if p is None:
        return "-"
    return f"< {2 / samples:.2g}" if p == 0 else f"{p:.3f}"


def finetune_section(
    scores: list[dict[str, Any]],
    comparisons: list[dict[str, Any]],
    out_dir: Path,
    bootstrap_samples: int,
    tasks: list[str],
) -> Section:
    """Per task: mean, std and seeds per model with the difference to the base model; then every comparison.
    ``tasks`` (the config's) that have no results are listed as not run."""
    sec = Section("Fine-tuning results")
    if not scores:
        return sec.add(
            "Not run: no finetune/<model>/<task>/seed-*/result.json was found. Run "
            "`domainbert finetune` and re-render the report."
        )
    missing = [t for t in tasks if t not in {r["task"] for r in scores}]
    if missing:
        sec.add(f"Not run: task(s) {', '.join(missing)} (no results).")
    for task in dict.fromkeys(r["task"] for r in scores):
        rows_t = [r for r in scores if r["task"] == task]
        label = metric_label(rows_t[0]["metric"])
        rows = []
        for r in rows_t:
            cmp = next(
                (
                    c
                    for c in comparisons
                    if c["task"] == task and c["model"] == r["model"] and c["reference"] == reference_of(r["model"])
                ),
                None,
            )
            rows.append(
                [
                    r["model"],
                    str(r["n_seeds"]),
                    points(r["mean"]),
                    std_text(r),
                    ", ".join(points(v) for v in r["values"]),
                    f"{r.get('collapsed', 0)}/{r['n_seeds']}",
                    str(r.get("retried", 0)),
                    signed_points(cmp["diff"]) if cmp else "-",
                    interval_text(cmp) if cmp else "-",
                    cmp["verdict"] if cmp else ("(floor)" if r["model"] == "floor" else "(reference)"),
                    fmt(r.get("train_seconds"), 1),
                ]
            )
        level = round(100 * comparisons[0]["confidence"]) if comparisons else 95
        sec.add(
            Table(
                [
                    "model",
                    "seeds",
                    f"mean {label}",
                    "std",
                    "per seed",
                    "collapsed",
                    "retried",
                    "diff vs base",
                    f"{level}% CI",
                    "verdict",
                    "train s (mean)",
                ],
                rows,
                f"{task}: test {label} (x100), mean and sample standard deviation over seeds",
            )
        )
    if comparisons:
        rows = [
            [
                f"{c['model']} vs {c['reference']}",
                c["task"],
                c.get("runs_text") or str(c["n_seeds"]),
                signed_points(c["diff"]),
                interval_text(c),
                p_text(c.get("p_value"), bootstrap_samples),
                fmt(c.get("aso_eps"), 2),
                c["verdict"] + (" (collapsed runs involved)" if c.get("collapsed") else ""),
            ]
            for c in comparisons
        ]
        level = round(100 * comparisons[0]["confidence"])
        sec.add(
            Table(
                [
                    "comparison",
                    "task",
                    "runs",
                    "difference (points)",
                    f"{level}% CI",
                    "p (two-sided)",
                    "ASO eps_min",
                    "verdict",
                ],
                rows,
                f"Seed-aware intervals over test examples and seeds ({bootstrap_samples} draws); "
                + _n_comparisons(comparisons),
            )
        )
    if name := figures.score_bars(scores, out_dir):
        sec.add(
            Figure(
                name,
                "Mean test score per model; error bars: one standard deviation over seeds; dots: individual seeds",
            )
        )
    return sec


def summary_section(scores: list[dict[str, Any]], comparisons: list[dict[str, Any]]) -> Section:
    sec = Section("Summary")
    lines = summary_lines(scores, comparisons)
    if not lines:
        return sec.add("No fine-tuning results yet, so no verdict: the report shows the stages that have run.")
    return sec.add(lines)
