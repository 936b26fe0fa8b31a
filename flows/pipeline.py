"""The parent flows: ``domain_pipeline`` (one domain, every stage) and ``compare_domains`` (several domains
and the cross-domain report).

``domain_pipeline`` is what ``domainbert run DOMAIN`` and the ``domain-pipeline`` deployment call. It runs
the stage flows as subflows in order (corpus -> vocab -> pretrain -> finetune -> report); each stage task
is cached on the stage's own fingerprint (see ``caching``), the one the stage skips complete outputs on, so
a rerun after a change recomputes exactly what changed. Without ``PREFECT_API_URL`` Prefect starts an
embedded local API; with it, the run is recorded on that server.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

from prefect import flow, get_run_logger

from domainbert.config.domain import DEFAULT_PROFILE, RESOLVED_CONFIG
from domainbert.core import signals
from domainbert.core.runlock import held_token
from domainbert.flows.cancelling import cancellable, unless_cancelled
from domainbert.flows.locking import locked
from domainbert.flows.options import ExecutionOptions, RunSpec, start_run
from domainbert.flows.stages import (
    DEFAULT_EXECUTION,
    corpus_flow,
    finetune_flow,
    pretrain_flow,
    report_flow,
    vocab_flow,
)
from domainbert.flows.tasks import configured, cross_domain_task


@flow(name="domain-pipeline", log_prints=True)
@locked
@cancellable
def domain_pipeline(
    domain: str,
    overrides: list[str] | None = None,
    profile: str = DEFAULT_PROFILE,
    out: str | None = None,
    execution: ExecutionOptions = DEFAULT_EXECUTION,
) -> str:
    """Run every stage of one domain and return the path of its report.html.

    Args:
        domain: a domain name from domains/ or a path to a domain YAML.
        overrides: ``dotted.key=value`` overrides (``pretrain.max_steps=50``).
        profile: ``offline`` (shipped samples, the default) or ``full``.
        out: the run folder (default ``runs/<domain>/``).
        execution: result storage, retries, Dask cluster and trainer launcher.

    Returns:
        The absolute path of the run's report.html.
    """
    # The config is resolved here, once: every stage gets it, however the YAML changes during the run.
    spec = start_run(RunSpec(domain=domain, overrides=list(overrides or []), profile=profile, out=out))
    logger = get_run_logger()
    # The overrides as the run received them: Prefect's CLI echoes parameters through Rich markup, which drops a
    # bracketed word ("finetune.only_tasks=[a-task]" shows as "finetune.only_tasks="); this line is the record.
    logger.info(
        "domain %s (profile %s, overrides %s) -> %s (config: %s)",
        domain,
        profile,
        " ".join(spec.overrides) or "none",
        spec.out,
        RESOLVED_CONFIG,
    )
    # A stop recorded while Prefect set this run up ends it here, before a stage's flow run is created.
    signals.check()
    corpus_flow(spec, execution)
    vocab_flow(spec, execution)
    if execution.pretrain_deployment:
        _pretrain_on_deployment(spec, execution, execution.pretrain_deployment)
    else:
        pretrain_flow(spec, execution)
    finetune_flow(spec, execution)
    report = report_flow(spec, execution)
    logger.info("report: %s", report)
    return str(report)


def _pretrain_on_deployment(spec: RunSpec, execution: ExecutionOptions, deployment: str) -> None:
    """Run the pretrain flow through its deployment (the GPU pool) and wait for it, as a subflow of this run."""
    from prefect.client.schemas.objects import FlowRun
    from prefect.deployments import run_deployment

    # The GPU worker joins this run's folder lock (taken on the layout's root) instead of finding it held.
    inner = execution.model_copy(update={"pretrain_deployment": None, "lock_token": held_token(spec.layout().root)})
    # Called from a sync flow, prefect's async_dispatch returns the flow run itself (not a coroutine).
    run = cast(
        FlowRun,
        run_deployment(
            deployment,
            as_subflow=True,
            parameters={"spec": spec.model_dump(mode="json"), "execution": inner.model_dump(mode="json")},
        ),
    )
    if run.state is None or not run.state.is_completed():
        raise RuntimeError(
            f"pretraining deployment {deployment!r} ended "
            f"{run.state.type.value if run.state else 'without a state'} (flow run {run.id})"
        )


@flow(name="compare-domains", log_prints=True)
def compare_domains(
    domains: list[str],
    overrides: list[str] | None = None,
    profile: str = DEFAULT_PROFILE,
    out: str = "runs",
    execution: ExecutionOptions = DEFAULT_EXECUTION,
) -> str:
    """Run ``domain_pipeline`` for several domains, then render and publish the cross-domain report.

    Args:
        domains: domain names or YAML paths; each runs in ``<out>/<domain name>/``.
        overrides: overrides applied to every domain.
        profile: the profile of every domain.
        out: the parent folder of the runs; the cross-domain report goes to ``<out>/cross-domain/``.
        execution: as for ``domain_pipeline``.

    Returns:
        The path of the cross-domain report.
    """
    root = Path(out).resolve()
    runs: dict[str, Path] = {}
    for domain in domains:
        cfg = RunSpec(domain=domain, overrides=list(overrides or []), profile=profile).config()
        run_dir = root / cfg.name
        domain_pipeline(
            domain=domain, overrides=list(overrides or []), profile=profile, out=str(run_dir), execution=execution
        )
        runs[cfg.name] = run_dir
    page = configured(cross_domain_task, execution, root)
    return unless_cancelled(page({k: str(v) for k, v in runs.items()}, str(root / "cross-domain")))
