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
"""

from __future__ import annotations

from typing import Any

import numpy as np

from domainbert.config.pretrain import ARMS, split_replicate

FIT_POINTS = 8  # the curve's last stretch: its early fall (learning token frequencies) runs at another slope
MIN_POINTS = 3


def unigram_share(summary: dict[str, Any]) -> float | None:
    """The arm's held-out perplexity over its unigram bar (None when either is missing)."""
    model, bar = summary.get("domain_perplexity"), summary.get("unigram_perplexity")
    return model / bar if model and bar else None


def eval_curve(summary: dict[str, Any], records: list[dict[str, Any]]) -> list[tuple[float, float]]:
    """(tokens trained, held-out domain perplexity) at each evaluation after the start, tokens at the run's mean
    tokens per step."""
    per_step = summary["tokens_consumed"] / max(summary["steps"], 1)
    return [
        (r["step"] * per_step, r["domain_perplexity"])
        for r in records
        if r.get("kind") == "eval" and r.get("step", 0) > 0 and r.get("domain_perplexity")
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


def scratch_curve_sentences(
    pretrain: dict[str, dict[str, Any]], metrics: dict[str, list[dict[str, Any]]]
) -> list[str]:
    """One sentence per from-scratch arm (first replicate) with a bar when ``continued`` ran too; where
    continued's summary has no bar (recorded before there was one, and reused), the sentence says so."""
    if "continued" not in pretrain:
        return []
    reference = unigram_share(pretrain["continued"])
    out = []
    for arm, summary in pretrain.items():
        name, replicate = split_replicate(arm)
        share = unigram_share(summary)
        if name not in ARMS or not ARMS[name].from_scratch or replicate > 1 or share is None:
            continue
        text = (
            f"Masked-LM fit: {arm} ended at a held-out perplexity of {summary['domain_perplexity']:,.0f} after "
            f"{_tokens(summary['tokens_consumed'])} tokens, {share:.2f} of a unigram model's "
            f"{summary['unigram_perplexity']:,.0f} on its vocabulary"
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
        fit = catch_up(eval_curve(summary, metrics.get(arm, [])), reference * summary["unigram_perplexity"])
        if fit is None:
            out.append(text + ": its curve has too few held-out evaluations to say where it would catch up.")
            continue
        tokens, slope, points = fit
        out.append(
            text + f". A line through ln perplexity against ln tokens over its last {points} held-out evaluations "
            f"(slope {slope:.2f}) reaches continued's share at about {_tokens(tokens)} tokens, "
            f"{tokens / summary['tokens_consumed']:.1f}x this run's: a rough guide (the learning rate's decay bends "
            "a run's last points), and what it would score fine-tuned there is not measured."
        )
    return out
