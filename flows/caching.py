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

from dataclasses import dataclass
from typing import Any

from domainbert.flows.options import RunSpec

from domainbert.artifacts import is_complete
from domainbert.config import DomainConfig
from domainbert.errors import DomainbertError
from domainbert.paths import RunLayout


@dataclass(frozen=True)
class StageState:
    """A stage's cache key (None when its inputs are not there yet) and whether its output is current."""

    key: str | None
    current: bool


UNKNOWN = StageState(None, False)  # the stage itself reports the missing input when it runs


def corpus_state(cfg: DomainConfig, layout: RunLayout) -> StageState:
    from domainbert.corpus.build import stage_fingerprint

    fp = stage_fingerprint(cfg)
    return StageState(f"corpus-{fp}", is_complete(layout.corpus, fp))


def vocab_state(cfg: DomainConfig, layout: RunLayout) -> StageState:
    from domainbert.vocab.stage import vocab_record

    fp = vocab_record(cfg, layout)[2]
    return StageState(f"vocab-{fp}", is_complete(layout.vocab, fp))


def pretrain_state(cfg: DomainConfig, layout: RunLayout, arm: str) -> StageState:
    from domainbert.pretrain.stage import arm_fingerprint

    try:
        fp = arm_fingerprint(cfg, arm, layout)
    except DomainbertError:  # e.g. the extended arm before the vocab stage has run
        return UNKNOWN
    done = is_complete(layout.pretrained_model(arm), fp) and (layout.pretrain(arm) / "summary.json").is_file()
    return StageState(f"pretrain-{fp}", done)


def finetune_state(cfg: DomainConfig, layout: RunLayout, job: Any) -> StageState:
    """``job``: a ``finetune.stage.Job`` (model, reference, task, seed, mode)."""
    from domainbert.finetune.stage import RESULT, run_record

    try:
        fp = run_record(cfg, job)[2]
    except DomainbertError:  # an unknown task: the stage says so
        return UNKNOWN
    folder = layout.finetune(job.model_name, job.task_name, job.seed)
    return StageState(f"finetune-{fp}", is_complete(folder, fp) and (folder / RESULT).is_file())


def _spec(parameters: dict[str, Any]) -> RunSpec:
    spec = parameters["spec"]
    return spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)


def corpus_key(_ctx: Any, parameters: dict[str, Any]) -> str | None:
    """Cache key of the corpus task (``parameters``: spec)."""
    spec = _spec(parameters)
    cfg = spec.config()
    return corpus_state(cfg, spec.layout(cfg)).key


def vocab_key(_ctx: Any, parameters: dict[str, Any]) -> str | None:
    """Cache key of the vocab task (``parameters``: spec)."""
    spec = _spec(parameters)
    cfg = spec.config()
    return vocab_state(cfg, spec.layout(cfg)).key


def pretrain_key(_ctx: Any, parameters: dict[str, Any]) -> str | None:
    """Cache key of one pretraining arm (``parameters``: spec, arm)."""
    spec = _spec(parameters)
    cfg = spec.config()
    return pretrain_state(cfg, spec.layout(cfg), parameters["arm"]).key


def finetune_key(_ctx: Any, parameters: dict[str, Any]) -> str | None:
    """Cache key of one fine-tuning run (``parameters``: spec, model_name, model_ref, task_name, seed, mode)."""
    from domainbert.finetune.stage import Job

    spec = _spec(parameters)
    cfg = spec.config()
    job = Job(parameters["model_name"], str(parameters["model_ref"]), parameters["task_name"],
              int(parameters["seed"]), parameters.get("mode", "finetune"))
    return finetune_state(cfg, spec.layout(cfg), job).key
