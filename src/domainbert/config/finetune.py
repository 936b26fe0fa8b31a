"""Typed config of fine-tuning and comparison (``finetune:`` and ``compare:`` in a domain YAML)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from domainbert.config.schema import ModelRef, PlainName, StrictModel, resolve_against_yaml


class TaskConfig(StrictModel):
    """One labelled task. ``path`` is a folder with train/validation/test files, or a hub dataset id."""

    name: PlainName
    """The task's name in results and in the report; a plain name (letters, digits, '.', '_', '-'): its folder."""
    type: Literal["ner", "classification"]
    """ner: a label per token (seqeval F1); classification: one label (or several) per text (macro-F1)."""
    format: Literal["conll", "jsonl", "csv", "hf"]
    """How the splits are stored: CoNLL columns, JSONL, CSV, or a Hugging Face dataset (path: its id)."""
    path: str = Field(
        description="A folder with train/validation/test files (relative: to the domain file), or "
        "for format 'hf' a Hub dataset id or a saved dataset folder."
    )
    labels: list[str] = Field(min_length=1, description="The label set; a label outside it is an error.")
    tag_scheme: Literal["IOB1", "IOB2", "BIOES"] = "IOB2"
    """The NER tags' scheme."""
    text_field: str = "text"
    """The field holding the text (JSONL, CSV, hf)."""
    text_pair_field: str | None = None
    """A second text field, for pair classification."""
    label_field: str = "label"
    """The field holding the label (a list of labels when multi_label)."""
    multi_label: bool = False
    """Several labels per text."""
    max_train_examples: int | None = Field(None, ge=1)
    """Train on a fixed random subset of this many examples (all when unset)."""
    max_eval_examples: int | None = Field(None, ge=1)
    """Validate (choose the epoch and the kept seed) on a fixed random subset of this many validation examples (all when unset)."""
    max_test_examples: int | None = Field(None, ge=1)
    """Score on a fixed random subset of this many test examples; unset (the default): the whole test split, so the comparison has all the power the task's data allows."""
    tokens_field: str = Field("tokens", description="NER from the hub: the column holding the word list.")
    tags_field: str = Field("ner_tags", description="NER from the hub: the column holding the tag list.")
    hf_config_name: str | None = Field(None, description="Hub dataset configuration name, if it has several.")
    label_separator: str = Field("|", description="Multi-label CSV: separator between the labels of one cell.")
    subset_seed: int = Field(
        0, description="Seed of the fixed subsample taken by max_*_examples (the same for every model and seed)."
    )
    lr: float | None = Field(None, gt=0, description="This task's learning rate (None: finetune.lr).")
    epochs: float | None = Field(None, gt=0, description="This task's epochs (None: finetune.epochs).")
    eval_delay: float = Field(
        0,
        ge=0,
        description="Validate only from this epoch on (transformers' eval_delay, Keras' start_from_epoch): earlier "
        "epochs are neither scored nor kept, and early stopping cannot end a run before it; the schedule's last step "
        "is always validated. 0: every epoch. For a task whose runs never keep their first epochs and whose "
        "validation split is large, as science-terms-ner's (bench/results/demo_time_cpu_2026-11.md).",
    )
    group_field: str | None = Field(
        None,
        description="Classification: a field whose value puts each example in a group (e.g. lang); the report "
        "also scores every model on each group's test examples. Not part of a result's fingerprint.",
    )
    class_weights: Literal["none", "balanced"] = Field(
        "none",
        description="Single-label classification and NER: 'balanced' weighs each label's loss by n / (k * n_label) "
        "over the training examples (NER: over the scored tokens), so rare classes count in a macro average as "
        "they do in the score; 'none': every example alike.",
    )
    role: Literal["domain", "general"] = Field(
        "domain",
        description="domain: a task of the domain; general: the general-English task that measures forgetting "
        "(set by finetune.forgetting_task).",
    )
    chunks: int = Field(
        1,
        ge=1,
        le=64,
        description="Long texts (classification with finetune.pooling 'mean', one text per example): encode up "
        "to this many windows of max_length tokens of each text, each window on its own, and pool the hidden states "
        "of all of them by their mean (chunk and pool). 1: the first window only (the text truncated).",
    )

    @field_validator("path")
    @classmethod
    def _resolve_path(cls, value: str, info: ValidationInfo) -> str:
        resolved = resolve_against_yaml(value, info)
        # A Hub id ('org/name') names no file: resolved against the YAML folder it would become a local path.
        if info.data.get("format") == "hf" and not Path(resolved).exists():
            return value
        return resolved

    @model_validator(mode="after")
    def _ner_needs_conll_or_hf(self) -> TaskConfig:
        if self.type == "ner" and self.format not in ("conll", "hf"):
            raise ValueError("an 'ner' task needs format 'conll' or 'hf'")
        if self.type == "ner" and self.multi_label:
            raise ValueError("'multi_label' applies to classification tasks only")
        if self.group_field is not None and self.type != "classification":
            raise ValueError("'group_field' applies to classification tasks only")
        if self.class_weights != "none" and self.multi_label:
            raise ValueError("'class_weights' applies to single-label classification and NER only")
        if self.chunks > 1 and (self.type != "classification" or self.text_pair_field is not None):
            raise ValueError("'chunks' applies to classification of single texts only")
        return self


class ForgettingTaskConfig(TaskConfig):
    """The general-English task every model is also fine-tuned on (``finetune.forgetting_task``): a task's
    settings and ``enabled``. Its texts are left out of every pretraining stream (``pretrain.forgetting_text``)."""

    enabled: bool = Field(True, description="Fine-tune every model on this general-English task too (forgetting).")


def with_forgetting_task(data: dict) -> dict:
    """``finetune``'s raw mapping with an enabled ``forgetting_task`` appended to ``tasks`` as a general task;
    unchanged when a task of that name is there already (a config dumped and validated again, as workers do)."""
    extra, tasks = data.get("forgetting_task"), data.get("tasks")
    if not isinstance(extra, dict) or not isinstance(tasks, list) or not extra.get("enabled", True):
        return data
    names = {t.get("name") if isinstance(t, dict) else getattr(t, "name", None) for t in tasks}
    if extra.get("name") in names:
        return data
    task = {k: v for k, v in extra.items() if k != "enabled"} | {"role": "general"}
    return {**data, "tasks": [*tasks, task]}


def first_validated_step(eval_delay: float, steps_per_epoch: int) -> int:
    """The first step a run may validate at under ``TaskConfig.eval_delay``: the end of that epoch, rounded up to
    a step (the trainer's rule, and what ``plan`` counts)."""
    return math.ceil(eval_delay * steps_per_epoch - 1e-9)


class FinetuneConfig(StrictModel):
    """The fine-tuning stage: the tasks, and how every model is fine-tuned on them over several seeds."""

    tasks: list[TaskConfig] = Field(min_length=1)
    forgetting_task: ForgettingTaskConfig | None = Field(
        None, description="The general-English task, appended to tasks when enabled (forgetting)."
    )
    only_tasks: list[str] | None = Field(
        None,
        min_length=1,
        description="Run only these of the tasks (by name; None: all). The others are left out of every stage, as if "
        "not listed: a short run skips tasks without editing the task list.",
    )
    only_models: list[str] | None = Field(
        None,
        min_length=1,
        description="Fine-tune only these models (base, original, arm names, extra model names; None: all). The "
        "others' results are neither run nor expected, so the report judges only these: a study of one model "
        "need not fine-tune every arm. A name the run has no model for (original where no warm-up made one, an "
        "arm not pretrained yet) is refused, not skipped.",
    )
    seeds: list[int] = Field(default_factory=lambda: [1, 2, 3], min_length=1)
    """Fine-tuning seeds: one run per model, task and seed; the intervals include their spread."""
    epochs: float = Field(3, gt=0)
    """Passes over the training examples."""
    lr: float = Field(5e-5, gt=0)
    """Peak learning rate."""
    lr_grid: list[float] = Field(
        default_factory=list,
        description="Learning rates to choose from, per task on validation: the base model is fine-tuned once at "
        "each (the first seed) and every model of the comparison then trains at the one that scored best "
        "(recipe/ in the run folder); the run at that rate is base's first seed, not trained again. Empty: "
        "finetune.lr. A task with its own lr is not searched.",
    )
    lr_chosen: dict[str, float] = Field(
        default_factory=dict,
        description="Per task, the learning rate its search chose: filled in by the run from recipe/, so that "
        "every stage reads one recipe; a value given here is replaced by the search's.",
    )
    early_stopping: Literal["each_run", "reference"] = Field(
        "each_run",
        description="each_run: every run keeps its own best validation evaluation (and stops after "
        "early_stopping_patience worse ones). reference: the reference chooses for all, as it chooses the rate: "
        "base, first seed, stops early on validation (recipe/ in the run folder), and every model of the "
        "comparison then trains to the step it kept on the same schedule, validated once at that step: one "
        "stopping point for every model and a validation pass per run instead of one per evaluation. each_run "
        "detected smaller differences on the science demo, so reference is for a recipe fixed across models, not "
        "a speed-up (studies/05-reference-stop.md).",
    )
    stop_chosen: dict[str, int] = Field(
        default_factory=dict,
        description="Per task, the step the reference's run kept (early_stopping: reference): filled in by the "
        "run from recipe/, as lr_chosen is; a value given here is replaced by the search's.",
    )
    batch_size: int = Field(16, ge=1)
    """Examples per optimizer step."""
    max_length: int = Field(128, ge=8)
    """Tokens per example: longer ones are truncated (or read in windows, see chunks)."""
    early_stopping_patience: int = Field(2, ge=1)
    """Validation checks without improvement before a run stops."""
    min_steps: int = Field(
        0,
        ge=0,
        description="The fewest optimizer updates a run takes (0: epochs alone). A task whose epochs give fewer "
        "trains more epochs (the schedule stretches to this many updates), and early stopping may end a run only "
        "after them. Fine-tuning fails on small training sets for want of updates, not epochs (Mosbach et al., "
        "'On the stability of fine-tuning BERT', 2021; studies/08-r8-heldout.md).",
    )
    mode: Literal["finetune", "frozen", "both"] = Field(
        "finetune",
        description="finetune: train all weights; frozen: train only the head on frozen features "
        "(results under '<model>-frozen'); both: run the two.",
    )
    extra_models: dict[PlainName, ModelRef] = Field(
        default_factory=dict,
        description="More models to compare: name (a plain name, its folder under finetune/) -> hub id or folder.",
    )
    frozen_lr: float = Field(1e-3, gt=0, description="Learning rate of the head in frozen (feature-based) mode.")
    warmup_ratio: float = Field(0.1, ge=0, lt=1)
    """Share of steps warming the learning rate up."""
    weight_decay: float = Field(0.01, ge=0)
    """AdamW weight decay."""
    max_grad_norm: float = Field(1.0, gt=0)
    """Gradient-norm clipping threshold."""
    evals_per_epoch: int = Field(1, ge=1, description="Validation evaluations per epoch (early stopping checks).")
    eval_batch_size: int = Field(64, ge=1)
    """Examples per evaluation batch (speed only)."""
    eval_inference_mode: bool = Field(
        True,
        description="Validation and test predictions under torch.inference_mode, which keeps no autograd "
        "record at all; false: under torch.no_grad. The same predictions either way. A speed setting: not part "
        "of a result's fingerprint.",
    )
    eval_length_sorted: bool = Field(
        True,
        description="Validation and test examples batched by their sorted length, so each batch pads little; "
        "false: batched in their input order. The same predictions up to float rounding (padding is masked out "
        "of attention). A speed setting: not part of a result's fingerprint.",
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads for torch (None: torch's default). 1 is fastest on a shared, oversubscribed machine.",
    )
    pooling: Literal["cls", "mean"] = Field(
        "cls",
        description="Sequence classification head, the same for every model: 'cls', transformers' own [CLS] + "
        "pooler head, the pooler initialised anew from the seed for every model (a saved classifier loads with "
        "AutoModelForSequenceClassification, no remote code), or 'mean', the mean of the encoder's last hidden "
        "states (a saved classifier needs trust_remote_code). Give the stock head a higher learning rate than "
        "mean pooling (studies/pooling.md).",
    )
    split_overlap: Literal["exclude", "keep"] = Field(
        "exclude",
        description="Validation and test examples whose text also stands in the task's training split (exactly or "
        "after decontamination's word normalisation): exclude them from scoring, or keep them (the report says so).",
    )
    floor: bool = Field(
        True,
        description="Score a simple baseline on every task (TF-IDF + logistic regression, a "
        "CRF for NER) on the same examples, as the 'floor' model.",
    )
    collapse_retry_lr_factor: float | None = Field(
        3.0,
        gt=0,
        description="A run whose validation predictions collapsed (one class, no entities, a loss that "
        "did not fall) is run again once with its learning rate times this factor; the attempt that did better on "
        "validation is kept, and both are recorded in result.json. Above "
        "1 (the default) for runs stuck on the majority answer, which is how small fine-tuning budgets fail; below "
        "1 for runs that diverge. None: no retry.",
    )
    length_group_size: int = Field(
        50,
        ge=1,
        description="Length-grouped batching: sort within windows of "
        "this many batches (as transformers' group_by_length).",
    )
    device: str = Field(
        "auto",
        description="Where fine-tuning runs: 'auto' (the first CUDA GPU when there is one, "
        "else the CPU), 'cpu', 'cuda' or 'cuda:N'. A speed setting: not part of a "
        "result's fingerprint.",
    )
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "auto",
        description="Mixed precision by autocast: 'auto' is bf16 on a GPU that supports it and fp32 "
        "otherwise (the CPU default); fp16 uses a gradient scaler (GPU only).",
    )
    num_processes: int = Field(
        1,
        ge=1,
        description="Data-parallel processes per run: above 1, each run is started under torchrun, one "
        "process per GPU (cuda:LOCAL_RANK; gloo on the CPU), each taking its slice of every batch of batch_size "
        "examples, so the optimisation does not depend on the count. A speed setting: not part of a result's "
        "fingerprint.",
    )
    save_models: Literal["best", "all", "none"] = Field(
        "best",
        description="Which fine-tuned models to keep as Hugging Face folders with a model card (they load with "
        "AutoModelFor*Classification, label names in config.id2label; mean pooling needs trust_remote_code): "
        "'best', per model and task the seed best on validation in finetune/<model>/<task>/best/; 'all', that "
        "and every run's model in its own folder (model/); 'none'. true and false read as 'all' and 'none'. Not "
        "part of the fingerprint: asking for models reruns only the runs whose model is missing.",
    )

    @field_validator("save_models", mode="before")
    @classmethod
    def _save_models_bool(cls, value: object) -> object:
        # earlier releases took a bool: true saved every run's model
        return {True: "all", False: "none"}.get(value, value) if isinstance(value, bool) else value

    @model_validator(mode="before")
    @classmethod
    def _keep_only_tasks(cls, data: object) -> object:
        # before validation: the model is frozen once built; a malformed value is left to field validation
        if not isinstance(data, dict):
            return data
        data = with_forgetting_task(data)  # first: only_tasks may name it
        only, tasks = data.get("only_tasks"), data.get("tasks")
        if not isinstance(only, list) or not isinstance(tasks, list):
            return data
        names = [t.get("name") if isinstance(t, dict) else getattr(t, "name", None) for t in tasks]
        unknown = [n for n in only if n not in names]
        if unknown:
            raise ValueError(f"only_tasks names {unknown}, not among the tasks {names}")
        return {**data, "tasks": [t for t, n in zip(tasks, names, strict=True) if n in only]}

    @model_validator(mode="after")
    def _chunks_need_mean_pooling(self) -> FinetuneConfig:
        chunked = [t.name for t in self.tasks if t.chunks > 1]
        if chunked and self.pooling != "mean":
            raise ValueError(
                f"tasks {chunked} set 'chunks', which pools by the mean: pooling must be 'mean' (set finetune.pooling)"
            )
        return self

    @model_validator(mode="after")
    def _one_gpu_per_process(self) -> FinetuneConfig:
        if self.num_processes > 1 and self.device.startswith("cuda:"):
            raise ValueError(
                f"device {self.device!r} names one GPU, but with num_processes > 1 each process takes "
                "its own (cuda:LOCAL_RANK): use 'auto' or 'cuda'"
            )
        return self


class CompareConfig(StrictModel):
    """The report's comparisons: paired, seed-aware bootstrap intervals."""

    bootstrap_samples: int = Field(1000, ge=100)
    """Bootstrap resamples behind each interval."""
    confidence: float = Field(0.95, gt=0.5, lt=1)
    """The intervals' confidence level."""
    seed: int = Field(0, description="Seed of the bootstrap resampling.")
