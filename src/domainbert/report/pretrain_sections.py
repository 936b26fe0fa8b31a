"""The report's pretraining and compute sections, from the arms' summaries, metrics and the head warm-up.

Shared formatting (``fmt``) is ``sections.py``'s; the figures are ``figures.py``'s.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from domainbert.core.artifact_types import replaced_token_detection
from domainbert.core.document import Figure, Section, Table
from domainbert.report import figures
from domainbert.report.inputs import RunArtifacts
from domainbert.report.scratch_curve import curves_of
from domainbert.report.sections import fmt


def pretrain_section(arts: RunArtifacts, arms: list[str], out_dir: Path) -> Section:
    """Per arm: steps, tokens, final loss, perplexities before and after; loss and perplexity figures."""
    sec = Section("Pretraining")
    if not arts.pretrain:
        return sec.add(
            "Not run: no pretrain/<arm>/summary.json was found. Run `domainbert pretrain` and re-render the report."
        )
    rows = _pretrain_rows(arts)
    warm = arts.base_warmup
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
            _budget_caption(arts.pretrain) + "; perplexity on fixed masked sequences under each model's own tokenizer",
        )
    )
    if warm:
        sec.add(
            "The continued arm starts from the warmed-up base, the extended arm from the warmed-up base with the "
            "new tokens added, so their 'before' perplexities are the warmed-up base's; the warm-up's cost is not "
            "part of the arms' budget."
        )
    missing = [a for a in arms if a not in arts.pretrain]
    if missing:
        sec.add(f"Not run: arm(s) {', '.join(missing)} (no summary.json).")
    curves, points = curves_of(arts)
    if name := figures.loss_curves(curves, points, out_dir):
        sec.add(Figure(name, "MLM training loss per optimizer step (long runs: faint per step, solid moving average)"))
    if name := figures.perplexity_curves(points, out_dir, summaries=curves):
        sec.add(
            Figure(
                name,
                "Held-out domain and general-domain perplexity at each evaluation (step 0 = "
                "before pretraining). A rise in general perplexity is forgetting.",
            )
        )
    return sec


def _budget_caption(pretrain: dict[str, dict]) -> str:
    """What the arms' budgets were, as they were recorded: one budget for all, or each arm its own (then the
    comparison is not at equal compute, and the caption says so)."""
    budgets = {s.get("tokens_consumed") for s in pretrain.values()}
    if len(budgets) <= 1:
        return "MLM pretraining of each arm on the same token budget"
    return "MLM pretraining of each arm on its own token budget (the tokens column): the arms are not at equal compute"


def _pretrain_rows(arts: RunArtifacts) -> list[list[str]]:
    """The warm-up's row (when it ran) and one row per arm; "before" hidden where it was measured through a
    random head."""
    rows = []
    warm = arts.base_warmup
    if warm:
        rows.append(
            [
                ("base, general masked-LM warm-up" if warm.get("train") == "full" else "base, MLM head warmed up")
                + _convergence(warm["converged"]),
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
        rtd = replaced_token_detection(s)  # its perplexity is its new generator's, not its encoder's
        random_start = (
            rtd or s.get("start_head") == "random" or s.get("start_head", "").startswith("checkpoint or random")
        )
        # A perplexity through a random head says nothing about the encoder: not shown as a "before" figure.
        before_d = "random init" if random_start else fmt(s.get("domain_perplexity_before"), 1)
        before_g = "random init" if random_start else fmt(s.get("general_perplexity_before"), 1)
        rows.append(
            [
                _arm_label(arm, s),
                fmt(s.get("steps")),
                fmt(s.get("tokens_consumed")),
                fmt(s.get("lr")),
                fmt(s.get("final_loss"), 3),
                f"{before_d} -> {fmt(s.get('domain_perplexity'), 1)}",
                f"{before_g} -> {fmt(s.get('general_perplexity'), 1)}",
            ]
        )
    return rows


DETECTION_MARGIN = 0.005  # accuracy within half a point of "all original" is that floor, not detection


def _arm_label(arm: str, summary: dict[str, Any]) -> str:
    """The arm's name; under replaced-token detection what its figures are (the generator's perplexity, the
    discriminator's accuracy before and after)."""
    if not replaced_token_detection(summary):
        return arm
    accuracy = "-"
    before, after = summary.get("discriminator_accuracy_before"), summary.get("discriminator_accuracy")
    if before is not None and after is not None:
        accuracy = f"{before:.1%} -> {after:.1%}"
    floor_before, floor = (
        summary.get("discriminator_floor_accuracy_before"),
        summary.get("discriminator_floor_accuracy"),
    )
    if floor_before is not None and floor is not None:  # the share of tokens the generator left unchanged
        accuracy += f", calling every token original {floor_before:.1%} -> {floor:.1%}"
        if after is not None and after <= floor + DETECTION_MARGIN:
            accuracy += ": no better than that, the discriminator has not learned to detect yet"
    return (
        f"{arm} (replaced-token detection: perplexity of its {fmt(summary.get('generator_layers'))}-layer "
        f"generator; discriminator accuracy {accuracy})"
    )


def _total(parameters: Any) -> Any:
    # The pretrain summary records {"embedding", "non_embedding", "total"}; older ones a plain count.
    return parameters.get("total") if isinstance(parameters, dict) else parameters


def compute_section(arts: RunArtifacts) -> Section:
    """What each arm cost: wall time, throughput, FLOPs, MFU, engine."""
    sec = Section("Compute")
    if not arts.pretrain:
        return sec.add("Not run: no pretraining summaries.")
    rows = [_compute_row(arm, s) for arm, s in arts.pretrain.items()]
    warm = arts.base_warmup
    if warm:
        rows.append(
            [
                "base warm-up (before the arms)"
                + (", this machine's cache" if warm.get("from_machine_cache") else ""),
                fmt(warm.get("wall_seconds"), 1),
                fmt(warm.get("tokens", 0) / max(warm.get("wall_seconds") or 1e-9, 1e-9), 1),
                "-",
                "-",
                "-",
                "-",
                "torch" if warm.get("train") == "full" else "torch, encoder frozen",
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


def _compute_row(arm: str, s: dict[str, Any]) -> list[str]:
    """One arm's cost: time, throughput, FLOPs, MFU, engine, processes, precision, parameters."""
    fpt, tokens = s.get("flops_per_token"), s.get("tokens_consumed")
    total = float(fpt) * float(tokens) if fpt is not None and tokens is not None else None
    engine = s.get("engine") or "-"
    if s.get("zero_stage") is not None:
        engine += f" ZeRO-{s['zero_stage']}"
    return [
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


def _convergence(converged: bool) -> str:
    """The warm-up's stop: converged, or its step cap."""
    return " (converged)" if converged else " (step cap reached, not converged)"
