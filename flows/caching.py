"""Cache keys of the stage tasks: content hashes of what a stage reads, never pickled objects.

A key is ``fingerprint(stage, resolved stage config JSON, input content hashes, domainbert version)``:

- the config part holds only the sections the stage reads (the corpus key does not change when a
  fine-tuning learning rate does), resolved to JSON by pydantic;
- the inputs are the ``recorded_hash`` of the upstream stage folders (corpus manifest hash, tokenizer
  folder hash, pretrained model hash), or file sizes and modification times for raw input files.

A cached result is only trusted while the stage's output folder is complete: the flows pass
``refresh_cache=True`` to a task whose output is missing or incomplete (``*_done`` below), so Prefect runs
it (the stage rebuilds or resumes) and stores the new result under the same key. So deleting a folder,
editing a source file or changing a setting recomputes exactly that stage and the ones downstream of it,
and nothing else.

What this leaves out: remote (hub) inputs are keyed by their name and config only.
"""

from __future__ import annotations

import glob
import os
from pathlib import Path
from typing import Any

from domainbert.flows.options import RunSpec

from domainbert import __version__
from domainbert.artifacts import content_hash, fingerprint, is_complete, read_record
from domainbert.config import DomainConfig
from domainbert.paths import RunLayout


def _dump(model: Any) -> Any:
    if hasattr(model, "model_dump"):
        return model.model_dump(mode="json")
    if isinstance(model, (list, tuple)):
        return [_dump(m) for m in model]
    return model


def files_signature(patterns: list[str]) -> str:
    """A hash of (path, size, mtime) of every local file the globs match; URLs are kept as given."""
    rows: list[Any] = []
    for pattern in patterns:
        if "://" in pattern:
            rows.append(pattern)
            continue
        matches = sorted(glob.glob(pattern)) or [pattern]
        for path in matches:
            p = Path(path)
            files = sorted(q for q in p.rglob("*") if q.is_file()) if p.is_dir() else [p]
            for f in files:
                try:
                    st = os.stat(f)
                    rows.append([str(f), st.st_size, st.st_mtime_ns])
                except OSError:
                    rows.append([str(f), None])
    return fingerprint(rows)


def folder_hash(folder: Path) -> str | None:
    """The recorded content hash of a complete artifact folder (or of the artifact holding it), else None."""
    for candidate in (folder, folder.parent):
        record = read_record(candidate)
        if record is not None:
            return str(record.get("content_hash"))
    return None


def model_hash(ref: str) -> str:
    """A content hash for a model reference: a recorded folder's hash, a plain folder's hash, else the name."""
    path = Path(ref)
    if "://" not in ref and not ref.startswith("package:") and path.is_dir():
        return folder_hash(path) or content_hash(path)
    return fingerprint(ref)


def corpus_inputs(cfg: DomainConfig) -> tuple[dict[str, Any], dict[str, str]]:
    config = {"language": cfg.language, "corpus": _dump(cfg.corpus), "tasks": _dump(cfg.finetune.tasks)}
    local = [p for s in cfg.corpus.sources for p in getattr(s, "paths", [])]
    inputs = {"sources": files_signature(local), "tasks": files_signature([t.path for t in cfg.finetune.tasks])}
    return config, inputs


def vocab_inputs(cfg: DomainConfig, layout: RunLayout) -> tuple[dict[str, Any], dict[str, str]]:
    config = {"tokenizer": _dump(cfg.tokenizer), "vocab": _dump(cfg.vocab), "base_model": _dump(cfg.base_model)}
    refs = [r.path for r in getattr(cfg.vocab, "references", [])] + list(getattr(cfg.vocab, "control_corpus", []))
    return config, {"corpus": folder_hash(layout.corpus) or "", "files": files_signature([str(r) for r in refs])}


def pretrain_inputs(cfg: DomainConfig, layout: RunLayout, arm: str) -> tuple[dict[str, Any], dict[str, str]]:
    # The launcher (process count, hostfile) changes speed, not the result: left out, as the stage does.
    pretrain = cfg.pretrain.model_dump(mode="json", exclude={"launch"})
    # Only the scratch arm builds a model from the tokenizer settings (the others start from a model folder).
    tokenizer = _dump(cfg.tokenizer) if arm == "scratch" else None
    config = {"pretrain": pretrain, "base_model": _dump(cfg.base_model), "tokenizer": tokenizer, "arm": arm}
    inputs = {"corpus": folder_hash(layout.corpus) or ""}
    # The continued arm reads the base model's own vocabulary; only the others read the vocab stage.
    if arm != "continued":
        inputs["vocab"] = folder_hash(layout.vocab) or ""
    return config, inputs


def finetune_inputs(cfg: DomainConfig, model_name: str, model_ref: str, task_name: str, seed: int,
                    mode: str) -> tuple[dict[str, Any], dict[str, str]]:
    settings = cfg.finetune.model_dump(mode="json", exclude={"tasks", "seeds", "extra_models", "mode"})
    task = next((t for t in cfg.finetune.tasks if t.name == task_name), None)
    config = {"finetune": settings, "task": _dump(task), "seed": seed, "model": model_name, "mode": mode}
    inputs = {"model": model_hash(model_ref), "task_files": files_signature([task.path] if task else [])}
    return config, inputs


def _key(stage: str, config: Any, inputs: dict[str, str]) -> str:
    return fingerprint(stage, config, inputs, __version__)


def corpus_done(layout: RunLayout) -> bool:
    return is_complete(layout.corpus)


def vocab_done(layout: RunLayout) -> bool:
    return is_complete(layout.vocab)


def pretrain_done(layout: RunLayout, arm: str) -> bool:
    return (is_complete(layout.pretrained_model(arm)) or is_complete(layout.pretrain(arm))) and \
        (layout.pretrain(arm) / "summary.json").is_file()


def finetune_done(layout: RunLayout, model_name: str, task_name: str, seed: int) -> bool:
    folder = layout.finetune(model_name, task_name, seed)
    return is_complete(folder) or (folder / "result.json").is_file() and is_complete(folder.parent)


def _spec(parameters: dict[str, Any]) -> RunSpec:
    spec = parameters["spec"]
    return spec if isinstance(spec, RunSpec) else RunSpec.model_validate(spec)


def corpus_key(_ctx: Any, parameters: dict[str, Any]) -> str:
    """Cache key of the corpus task (``parameters``: spec)."""
    spec = _spec(parameters)
    cfg = spec.config()
    config, inputs = corpus_inputs(cfg)
    return _key("corpus", config, inputs)


def vocab_key(_ctx: Any, parameters: dict[str, Any]) -> str:
    """Cache key of the vocab task (``parameters``: spec)."""
    spec = _spec(parameters)
    cfg = spec.config()
    layout = spec.layout(cfg)
    config, inputs = vocab_inputs(cfg, layout)
    return _key("vocab", config, inputs)


def pretrain_key(_ctx: Any, parameters: dict[str, Any]) -> str:
    """Cache key of one pretraining arm (``parameters``: spec, arm)."""
    spec = _spec(parameters)
    cfg = spec.config()
    layout = spec.layout(cfg)
    arm = parameters["arm"]
    config, inputs = pretrain_inputs(cfg, layout, arm)
    return _key("pretrain", config, inputs)


def finetune_key(_ctx: Any, parameters: dict[str, Any]) -> str:
    """Cache key of one fine-tuning run (``parameters``: spec, model_name, model_ref, task_name, seed, mode)."""
    spec = _spec(parameters)
    cfg = spec.config()
    name, ref, task, seed = (parameters[k] for k in ("model_name", "model_ref", "task_name", "seed"))
    config, inputs = finetune_inputs(cfg, name, str(ref), task, int(seed), parameters.get("mode", "finetune"))
    return _key("finetune", config, inputs)
