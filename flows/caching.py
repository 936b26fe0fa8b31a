"""Cache keys of the stage tasks: each stage's own fingerprint, never a second list of inputs.

Every stage decides what its result depends on and records that fingerprint in its output folder
(``_domainbert.json``); it skips when the folder is complete with the fingerprint the current config and
inputs give. The stage's Prefect task uses the same fingerprint as its cache key (``<stage>-<fingerprint>``):

- corpus: ``corpus.build.stage_fingerprint``;
- vocab: ``vocab.stage.vocab_record``;
- pretrain: ``pretrain.stage.arm_fingerprint`` (computed after the MLM-head warm-up, which the flow runs first);
- finetune (and the floor): ``finetune.stage.run_record``.

So a setting the stage ignores is a cache hit, and one it reads reruns the task. A cached result is only
trusted while the stage's output folder is current (complete, with that fingerprint): otherwise the flows
pass ``refresh`` so Prefect runs the task (the stage rebuilds or resumes) and stores the new result under
the same key. Deleting a folder therefore recomputes that stage, as editing a setting or an input does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domainbert.flows.options import RunSpec
from domainbert.plan.stage_state import (  # noqa: F401 - the flows and tests read the states through this module
    UNKNOWN,
    StageState,
    corpus_state,
    finetune_state,
    pretrain_state,
    vocab_state,
)

if TYPE_CHECKING:
    from prefect.context import TaskRunContext


def _spec(parameters: dict[str, Any]) -> RunSpec:
    spec = parameters["spec"]
    return spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)


def corpus_key(_ctx: TaskRunContext, parameters: dict[str, Any]) -> str | None:
    """Cache key of the corpus task (``parameters``: spec)."""
    spec = _spec(parameters)
    cfg = spec.config()
    return corpus_state(cfg, spec.layout(cfg)).key


def vocab_key(_ctx: TaskRunContext, parameters: dict[str, Any]) -> str | None:
    """Cache key of the vocab task (``parameters``: spec)."""
    spec = _spec(parameters)
    cfg = spec.config()
    return vocab_state(cfg, spec.layout(cfg)).key


def pretrain_key(_ctx: TaskRunContext, parameters: dict[str, Any]) -> str | None:
    """Cache key of one pretraining arm (``parameters``: spec, arm)."""
    spec = _spec(parameters)
    cfg = spec.config()
    return pretrain_state(cfg, spec.layout(cfg), parameters["arm"]).key


def finetune_key(_ctx: TaskRunContext, parameters: dict[str, Any]) -> str | None:
    """Cache key of one fine-tuning run (``parameters``: spec, model_name, model_ref, task_name, seed, mode)."""
    from domainbert.finetune.jobs import Job

    spec = _spec(parameters)
    cfg = spec.config()
    job = Job(
        parameters["model_name"],
        str(parameters["model_ref"]),
        parameters["task_name"],
        int(parameters["seed"]),
        parameters.get("mode", "finetune"),
    )
    return finetune_state(cfg, spec.layout(cfg), job).key
