"""The corpus filter pipeline one document at a time: what ``Pipeline.apply_batch`` must return for each
document of a batch, and the drop counts it must add up to.

Each document meets the components in YAML order through their one-document methods (``transform``,
``filter``) and stops at the first that drops it; ``apply_batch`` instead hands each filter all survivors at
once (``filter_batch``).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from domainbert.corpus.components import Component


def apply_one(components: list[Component[Any]], text: str) -> tuple[str | None, str | None]:
    """``(cleaned text, None)``, or ``(None, "name:reason")`` naming the component that dropped the document."""
    for comp in components:
        if comp.kind == "transform":
            text = comp.transform(text)
            if not text:
                return None, f"{comp.name}:empty_after_transform"
        else:
            keep, reason = comp.filter(text)
            if not keep:
                return None, f"{comp.name}:{reason}"
    return text, None


def drop_counts(components: list[Component[Any]], reasons: list[str | None]) -> dict[str, dict[str, int]]:
    """``Pipeline.dropped`` as the ``"name:reason"`` strings of ``apply_one`` add up."""
    counts: dict[str, Counter[str]] = {c.name: Counter() for c in components}
    for r in reasons:
        if r is not None:
            name, reason = r.split(":", 1)
            counts[name][reason] += 1
    return {name: dict(c) for name, c in counts.items()}
