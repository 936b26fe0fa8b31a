"""``tracking:`` in a domain file: which backends receive metrics, and where.

The trackers themselves are ``domainbert.trackers``; this module only holds their settings.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domainbert.config.schema import StrictModel

Backend = Literal["tensorboard", "mlflow", "wandb"]


class TrackingConfig(StrictModel):
    """``tracking:`` in a domain file. Outside every fingerprint: where metrics go changes no result."""

    report_to: list[Backend] = Field(
        default_factory=lambda: list[Backend](["tensorboard"]),
        description="Backends for pretraining and fine-tuning metrics, besides metrics.jsonl (always written).",
    )
    experiment: str | None = Field(
        None, description="MLflow experiment and W&B project (default: domainbert-<domain>)."
    )
    mlflow_tracking_uri: str | None = Field(
        None, description="MLflow store or server; default MLFLOW_TRACKING_URI, else sqlite:///<run folder>/mlflow.db."
    )
    wandb_mode: Literal["online", "offline"] | None = Field(
        None, description="W&B mode; default WANDB_MODE, else online ('offline' writes runs to sync later)."
    )
    wandb_entity: str | None = Field(None, description="W&B entity (team or user); default the account's own.")
