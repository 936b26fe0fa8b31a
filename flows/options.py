"""Typed flow parameters: what a run is (``RunSpec``) and how it executes (``ExecutionOptions``).

Both are pydantic models so the Prefect UI builds proper run forms from their JSON schema, and so a task
that runs in another process (a Dask worker, a GPU worker) receives plain data. The domain config is resolved
once, at the start of a run (``start_run``): the profile and overrides applied to the YAML, saved as
``<run>/config.resolved.json`` and carried in ``RunSpec.resolved_config`` to every task, subflow and worker,
which validate it again into a ``DomainConfig``; editing the YAML during a run changes nothing in that run.
Stage settings themselves stay in the domain YAML and its overrides; these models only say
which domain, where the run lives and where the work runs (the trainer launcher is
``pretrain.launch`` in the domain config, set by an override such as ``pretrain.launch.launcher=deepspeed``). Nothing here imports a stage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from domainbert.config.domain import (
    DEFAULT_PROFILE,
    DomainConfig,
    load_domain,
    resolved_dict,
    save_resolved_config,
)
from domainbert.core.paths import RunLayout, default_run_dir


class RunSpec(BaseModel):
    """One domain run: the domain, its profile and overrides, and the run folder."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    domain: str = Field(description="Domain name from domains/ (e.g. science) or a path to a domain YAML.")
    overrides: list[str] = Field(default_factory=list, description="Overrides such as pretrain.max_steps=50.")
    profile: str = Field(DEFAULT_PROFILE, description="Profile: offline (shipped samples) or full.")
    out: str | None = Field(None, description="Run folder (default runs/<domain>/ in the worker's cwd).")
    resolved_config: dict[str, Any] | None = Field(
        None, description="The domain config as resolved at the start of the run (set by the flows; leave empty)."
    )

    def config(self) -> DomainConfig:
        """The run's domain config: the one resolved at the start of the run, else the YAML's now (raises
        ConfigError naming the file and field)."""
        if self.resolved_config is not None:
            return DomainConfig.model_validate(self.resolved_config)
        return load_domain(self.domain, list(self.overrides), profile=self.profile)

    def layout(self, cfg: DomainConfig | None = None) -> RunLayout:
        """The run's folders; ``out`` made absolute so every worker sees the same path."""
        if self.out:
            root = Path(self.out)
        else:
            root = default_run_dir((cfg or self.config()).name)
        return RunLayout(root.resolve())

    def resolved(self) -> RunSpec:
        """A copy whose config is resolved and whose ``out`` is absolute (what tasks in other processes
        receive); a spec already resolved is returned as it is."""
        if self.resolved_config is not None and self.out and Path(self.out).is_absolute():
            return self
        cfg = self.config()
        return self.model_copy(update={"out": str(self.layout(cfg).root), "resolved_config": resolved_dict(cfg)})


def start_run(spec: RunSpec) -> RunSpec:
    """Resolve the domain config once for a run and save it as ``<run>/config.resolved.json`` (atomically, with
    the YAML path, profile and overrides it came from); returns the resolved spec the run passes on.

    A spec resolved already (a stage flow inside ``domain_pipeline``, the pretraining deployment) is returned
    as it is and nothing is written: the run started earlier.
    """
    if spec.resolved_config is not None:
        return spec.resolved()
    spec = spec.resolved()
    root = spec.layout().root
    root.mkdir(parents=True, exist_ok=True)
    save_resolved_config(root, spec.domain, spec.profile, list(spec.overrides), spec.config())
    return spec


class ExecutionOptions(BaseModel):
    """Where results persist, how tasks retry and where corpus shards run."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    result_storage: str | None = Field(
        None,
        description="Folder, fsspec URL (s3://bucket/prefix) or block:<slug>/<name> for task results; "
        "default <out>/.prefect/results.",
    )
    retries: int = Field(2, ge=0, description="Retries of I/O-bound tasks (with exponential backoff).")
    retry_delay_seconds: float = Field(10, ge=0, description="First retry delay; doubles on each retry.")
    pretrain_retries: int = Field(
        3, ge=0, description="Retries of a pretraining arm; each resumes from its last checkpoint."
    )
    dask_address: str | None = Field(
        None, description="Scheduler address of a running Dask cluster (tcp://host:8786) for corpus shards."
    )
    dask_local_workers: int = Field(
        0, ge=0, description="Start a local Dask cluster with this many workers for corpus shards (0: thread pool)."
    )
    gpu_concurrency_limit: str | None = Field(
        None,
        description="Name of a Prefect global concurrency limit each pretraining arm holds a slot of "
        "(create it with `prefect gcl create NAME --limit 1`).",
    )
    pretrain_deployment: str | None = Field(
        None,
        description="Run pretraining through this deployment (flow-name/deployment-name, e.g. "
        "domainbert-pretrain/pretrain-gpu) so it lands on the GPU pool; default: in this flow run.",
    )
    refresh_cache: bool = Field(False, description="Ignore cached task results (stages still skip complete outputs).")
    lock_token: str | None = Field(
        None,
        description="Token of the run-folder lock held by the parent pipeline run (set by domain_pipeline "
        "for its pretraining deployment; leave empty).",
    )
