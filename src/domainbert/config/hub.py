"""Typed config of what the Hub cards say beyond the run itself (``hub:`` in a domain YAML)."""

from __future__ import annotations

from pydantic import Field

from domainbert.config.schema import StrictModel


class HubConfig(StrictModel):
    """What model cards and Hub uploads say about the models (licence, language, datasets)."""

    license: str = Field(
        "other",
        description="Licence of the models and the corpus (a Hub licence id, e.g. "
        "'apache-2.0', 'cc-by-4.0'); 'other' until the domain file says.",
    )
    datasets: list[str] = Field(
        default_factory=list,
        description="Hub dataset ids the corpus or tasks come from, besides the 'hf' sources (listed on their own).",
    )
    tags: list[str] = Field(default_factory=list, description="Extra tags for the cards.")
