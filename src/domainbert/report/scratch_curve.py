"""From scratch against continued on masked-LM fit, and the budget at which a from-scratch arm's own curve says it
would catch up.

Each arm's held-out domain perplexity is read as a share of its unigram bar (``unigram_perplexity`` in its
``summary.json``: the same text under a model that knows only the training split's token frequencies, with the
arm's own tokenizer), so that arms on different vocabularies compare. When a from-scratch arm's share is above
continued's, the sentence gives the budget at which it would reach continued's share: a least-squares line of
ln perplexity on ln tokens through its last ``FIT_POINTS`` held-out evaluations (``metrics.jsonl``, ``kind:
eval``), extrapolated. It is a rough guide, and the sentence says so: the learning rate's decay to zero bends the
last points of a run, and whether fine-tuned scores at that budget would follow is not measured. Reads what the
pretraining recorded; computes no perplexity and trains nothing.

The pretraining figures (``figures``) read the same two typed views, each read once from the files' objects:
``ArmCurve`` (an arm's ``summary.json``, only what a curve needs) and ``MetricPoint`` (a ``metrics.jsonl``
record); ``curves_of`` reads a run's. The other fields of a summary are the pretraining section's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from domainbert.config.pretrain import ARMS, split_replicate
from domainbert.core.artifact_types import replaced_token_detection
from domainbert.report.inputs import Record, RunArtifacts

FIT_POINTS = 8  # the curve's last stretch: its early fall (learning token frequencies) runs at another slope
MIN_POINTS = 3


@dataclass(frozen=True)
class ArmCurve:
    """What an arm's ``summary.json`` says of its curves: the per-step loss, its final perplexities and budget,
    and whether it is of replaced-token detection (its perplexities its generator's)."""

    loss_curve: tuple[tuple[float, float | None], ...]
    rtd: bool
    domain_perplexity: float | None
    unigram_perplexity: float | None
    tokens_consumed: float
    steps: int

    @classmethod
    def of(cls, summary: Record) -> ArmCurve:
        return cls(
            loss_curve=tuple((float(s), None if v is None else float(v)) for s, v in summary.get("loss_curve") or []),
            rtd=replaced_token_detection(summary),
            domain_perplexity=summary.get("domain_perplexity"),
            unigram_perplexity=summary.get("unigram_perplexity"),
            tokens_consumed=float(summary.get("tokens_consumed") or 0),
            steps=int(summary.get("steps") or 0),
        )


@dataclass(frozen=True)
class MetricPoint:
    """One ``metrics.jsonl`` record: its ``kind`` (``train`` where it names none), its step (None where it has
    none) and its numbers."""

    kind: str | None
    step: float | None
    values: Mapping[str, float]

    @classmethod
    def of(cls, record: Record) -> MetricPoint:
        numbers = {k: v for k, v in record.items() if k not in ("kind", "step") and isinstance(v, int | float)}
        return cls(record.get("kind", "train"), record.get("step"), numbers)


def curves_of(arts: RunArtifacts) -> tuple[dict[str, ArmCurve], dict[str, list[MetricPoint]]]:
    """A run's arms' curves and metrics records, as the figures and the scratch sentence read them."""
    return (
        {arm: ArmCurve.of(s) for arm, s in arts.pretrain.items()},
        {arm: [MetricPoint.of(r) for r in records] for arm, records in arts.metrics.items()},
    )


def unigram_share(summary: ArmCurve) -> float | None:
    """The arm's held-out perplexity over its unigram bar (None when either is missing)."""
    model, bar = summary.domain_perplexity, summary.unigram_perplexity
    return model / bar if model and bar else None


def eval_curve(summary: ArmCurve, records: list[MetricPoint]) -> list[tuple[float, float]]:
    """(tokens trained, held-out domain perplexity) at each evaluation after the start, tokens at the run's mean
    tokens per step."""
    per_step = summary.tokens_consumed / max(summary.steps, 1)
    return [
        (r.step * per_step, r.values["domain_perplexity"])
        for r in records
        if r.kind == "eval" and r.step is not None and r.step > 0 and r.values.get("domain_perplexity")
    ]


def catch_up(curve: list[tuple[float, float]], target: float) -> tuple[float, float, int] | None:
    """(tokens, slope, points): where the line of ln perplexity on ln tokens through the curve's last
    ``FIT_POINTS`` points reaches ``target``; None with fewer than ``MIN_POINTS`` or a line that does not fall."""
    points = curve[-FIT_POINTS:]
    if len(points) < MIN_POINTS:
        return None
    slope, intercept = np.polyfit(np.log([t for t, _ in points]), np.log([p for _, p in points]), 1)
    if slope >= 0:
        return None
    return float(np.exp((np.log(target) - intercept) / slope)), float(slope), len(points)


def _tokens(n: float) -> str:
    return f"{n / 1e6:,.1f} M" if n >= 1e6 else f"{n:,.0f}"


def scratch_curve_sentences(pretrain: Mapping[str, ArmCurve], metrics: Mapping[str, list[MetricPoint]]) -> list[str]:
    """One sentence per from-scratch arm (first replicate) with a bar when ``continued`` ran too; where
    continued's summary has no bar (recorded before there was one, and reused), the sentence says so."""
    if "continued" not in pretrain:
        return []
    reference = unigram_share(pretrain["continued"])
    out = []
    for arm, summary in pretrain.items():
        name, replicate = split_replicate(arm)
        share, bar = unigram_share(summary), summary.unigram_perplexity
        if name not in ARMS or not ARMS[name].from_scratch or replicate > 1 or share is None or bar is None:
            continue
        text = (
            f"Masked-LM fit: {arm} ended at a held-out perplexity of {summary.domain_perplexity:,.0f} after "
            f"{_tokens(summary.tokens_consumed)} tokens, {share:.2f} of a unigram model's "
            f"{bar:,.0f} on its vocabulary"
        )
        if reference is None:
            out.append(
                text + "; continued's summary records no unigram bar (it was written before runs recorded one), "
                "so where this arm would catch up with it is not said: training continued again records it."
            )
            continue
        text += f"; continued, {reference:.2f} of its own"
        if share <= reference:
            out.append(text + ": it fits the domain's text as well as continued does.")
            continue
        fit = catch_up(eval_curve(summary, metrics.get(arm, [])), reference * bar)
        if fit is None:
            out.append(text + ": its curve has too few held-out evaluations to say where it would catch up.")
            continue
        tokens, slope, points = fit
        out.append(
            text + f". A line through ln perplexity against ln tokens over its last {points} held-out evaluations "
            f"(slope {slope:.2f}) reaches continued's share at about {_tokens(tokens)} tokens, "
            f"{tokens / summary.tokens_consumed:.1f}x this run's: a rough guide (the learning rate's decay bends "
            "a run's last points), and what it would score fine-tuned there is not measured."
        )
    return out
