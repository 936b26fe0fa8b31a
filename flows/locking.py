"""The run-folder lock around flows: ``@locked`` under ``@flow`` holds ``<run>/.lock`` while the flow runs.

A flow called inside ``domain_pipeline`` (same process) re-enters the pipeline's lock; a flow started on
another worker by the pipeline (the pretraining deployment) joins it with the token in
``execution.lock_token``. Any other flow run into a locked folder fails at once (``RunLocked``, a user
error, never retried). The lock itself is ``domainbert.core.runlock``; this module only finds the folder.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from domainbert.core.runlock import run_lock
from domainbert.flows.options import ExecutionOptions, RunSpec

P = ParamSpec("P")
R = TypeVar("R")


def locked(fn: Callable[P, R]) -> Callable[P, R]:
    """Hold the lock of the run folder of the flow's ``spec`` (or ``domain``/``out``) while ``fn`` runs."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        import inspect

        bound = inspect.signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        params = bound.arguments
        spec = params.get("spec")
        if spec is None:
            spec = RunSpec(
                domain=params["domain"],
                overrides=list(params.get("overrides") or []),
                profile=params["profile"],
                out=params.get("out"),
            )
        elif not isinstance(spec, RunSpec):
            spec = RunSpec.model_validate(spec)
        execution = params.get("execution")
        token = execution.lock_token if isinstance(execution, ExecutionOptions) else None
        with run_lock(spec.layout().root, f"flow {fn.__name__} {spec.domain}", token=token):
            return fn(*args, **kwargs)

    return wrapper
