"""The vocabulary stage's small decisions, as pure functions: the overlap curve's points at the sizes both
vocabularies reach, each tokenizer's document length against the base's, the fit figures the recommendation
weighs, and which words the extended model adds.

Training tokenizers and reading the corpus are ``stage.py``'s; nothing here reads or writes files.
"""

from __future__ import annotations

from collections.abc import Callable

from domainbert.config.vocab import ExtensionConfig


def curve_points(
    requested: list[int], domain_at: Callable[[int], list[str]], control_at: Callable[[int], list[str]], prefix: bool
) -> tuple[dict, list[tuple[list, list]]]:
    """The overlap curve's points: the requested sizes both vocabularies reach, then one point at what they
    reached when a larger size was requested (a small corpus stops WordPiece and SentencePiece short).

    Args:
        requested: ``vocab.curve_sizes``.
        domain_at, control_at: size -> the domain / control vocabulary of that size (tokens in id order),
            shorter than asked when the text supports fewer tokens.
        prefix: a smaller vocabulary is a prefix of a larger one (WordPiece), so the last point can put both
            vocabularies at the size both reached; otherwise each keeps the size it reached.

    Returns:
        ``({"requested_sizes", "sizes" (the domain vocabulary's achieved size per point), "control_sizes",
        "unreached" (requested sizes not reached), "reach" ({"domain", "control"}: tokens each reached when a
        size was not, else None), "domain": {}, "control": {}}, [(domain tokens, control tokens) per point])``.
    """
    curve: dict = {
        "requested_sizes": list(requested),
        "sizes": [],
        "control_sizes": [],
        "unreached": [],
        "reach": {"domain": None, "control": None},
        "domain": {},
        "control": {},
    }
    points: list[tuple[list, list]] = []
    for s in sorted(set(requested)):
        if curve["unreached"]:  # larger sizes cannot be reached either
            curve["unreached"].append(s)
            continue
        dom, ctl = domain_at(s), control_at(s)
        if len(dom) < s or len(ctl) < s:
            curve["unreached"].append(s)
            curve["reach"] = {"domain": len(dom), "control": len(ctl)}
            if prefix:
                common = min(len(dom), len(ctl))
                dom, ctl = dom[:common], ctl[:common]
            if len(dom) in curve["sizes"] and len(ctl) in curve["control_sizes"]:
                continue  # already measured at exactly this size
        curve["sizes"].append(len(dom))
        curve["control_sizes"].append(len(ctl))
        points.append((dom, ctl))
    return curve, points


def lengths_vs_base(heldout: dict) -> None:
    """Set each row's document length relative to the base tokenizer's."""
    base_len = heldout["base"]["mean_tokens_per_document"]
    for row in heldout.values():
        row["length_vs_base"] = row["mean_tokens_per_document"] / base_len if base_len else 0.0


def fit_summary(base_overlap: dict, heldout: dict) -> dict:
    """What the recommendation weighs: the domain's shift away from the base vocabulary, the base's fit."""
    shift = base_overlap["control"]["domain_in_reference"] - base_overlap["domain_matched"]["domain_in_reference"]
    return {
        "shift": shift,
        "saving": 1 - heldout["domain"]["length_vs_base"],
        "fertility": heldout["base"]["fertility"],
        "unk_rate": heldout["base"]["unk_rate"],
    }


def choose_extension(ext: ExtensionConfig, candidates: list[dict], rec: dict) -> tuple[list[dict], dict]:
    """The words the extended model adds: the recommendation's (the candidates that qualify under its rule 3,
    best first) unless ``vocab.extension.num_tokens`` overrides it with the top ``num_tokens`` candidates.

    Returns the chosen candidates and the ``extension`` entry of the report (``num_tokens`` set to what is
    actually added; the builder adds ``method`` and ``vocab_size``).
    """
    recommended = rec["extend_words"]
    if ext.num_tokens is None:
        chosen, source = [c for c in candidates if c["word"] in set(recommended)], "recommendation"
    else:
        chosen, source = candidates[: ext.num_tokens], "override"
    info = {
        "enabled": ext.enabled,
        "candidates": len(candidates),
        "source": source,
        "recommended_tokens": len(recommended),
        "requested_tokens": ext.num_tokens,
        "num_tokens": len(chosen) if ext.enabled else 0,
    }
    return (chosen if ext.enabled else []), info
