"""Typed config of the pretraining stage (``base_model:`` and ``pretrain:`` in a domain YAML); its per-arm
optimisation and schedules (length, learning rate, masking) are ``schedules.py``'s."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from domainbert.config.base_warmup import BaseWarmupConfig
from domainbert.config.launch import DeepSpeedConfig, LaunchConfig
from domainbert.config.schedules import (
    DEFAULT_ARM_OPTIM,
    ArmOptimConfig,
    LengthPhase,
    LrScheduleConfig,
    MaskPhase,
    check_phases,
    mask_rate_at,
    masking_line,
    mean_mask_rate,
)
from domainbert.config.schema import ModelRef, PathStr, StrictModel
from domainbert.config.start_from import Arm, StartFromConfig, check_starts
from domainbert.core.paths import REPLICATE_SEP

REPLICATE_SEED_STRIDE = 1000  # replicate r of an arm trains under seed + 1000 (r - 1)


def replicate_name(arm: str, replicate: int) -> str:
    """The name replicate ``replicate`` of ``arm`` trains and fine-tunes under (the arm's own for 1)."""
    return arm if replicate <= 1 else f"{arm}{REPLICATE_SEP}{replicate}"


def split_replicate(name: str) -> tuple[str, int]:
    """``continued@r2`` -> ``("continued", 2)``; a name without a replicate is replicate 1."""
    stem, sep, number = name.rpartition(REPLICATE_SEP)
    if sep and stem and number.isdigit():
        return stem, int(number)
    return name, 1


@dataclass(frozen=True)
class ArmKind:
    """What an arm is: where its weights start and what text it pretrains on.

    Attributes:
        start: ``base`` (the base, warmed up when it had no MLM head), ``extended`` (the vocab stage's extended
            model), ``random`` (a new encoder over the domain tokenizer) or ``continued`` (the continued arm's
            result: DAPT then TAPT).
        data: ``corpus`` (the domain corpus), ``task`` (the tasks' training text, TAPT), ``curated`` (the
            task text and the corpus documents nearest to it, curated TAPT) or ``general`` (general-domain text:
            the equal-token control).
        about: one line for cards and the report.
    """

    start: Literal["base", "extended", "random", "continued"]
    data: Literal["corpus", "task", "curated", "general"]
    about: str

    @property
    def from_scratch(self) -> bool:
        return self.start == "random"

    @property
    def on_task_text(self) -> bool:
        return self.data in ("task", "curated")

    @property
    def on_general_text(self) -> bool:
        return self.data == "general"


# Every arm there is, in the order a run trains them (dapt-tapt starts from continued's result).
ARMS: dict[str, ArmKind] = {
    "continued": ArmKind("base", "corpus", "the base pretrained further on the domain corpus (DAPT)"),
    "extended": ArmKind(
        "extended", "corpus", "the base with domain tokens added to its vocabulary, pretrained on the corpus"
    ),
    "scratch": ArmKind("random", "corpus", "a new encoder over the domain vocabulary, pretrained on the corpus"),
    "tapt": ArmKind("base", "task", "the base pretrained further on the tasks' own training text (TAPT)"),
    "dapt-tapt": ArmKind("continued", "task", "the continued (DAPT) model pretrained further on the task text"),
    "curated-tapt": ArmKind(
        "base", "curated", "the base pretrained on the task text and the corpus documents nearest to it"
    ),
    "self-pretrain": ArmKind("random", "task", "a new encoder over the domain vocabulary, trained on task text alone"),
    # Don't Stop Pretraining's irrelevant-domain control: the same start and tokens as continued, general text,
    # so that "continued beat the base" can be told apart from "more masked-LM training helped".
    "control": ArmKind(
        "base", "general", "the base pretrained further on general text, as many tokens as continued (the control)"
    ),
}


class BaseModelConfig(StrictModel):
    """The general checkpoint: ``package:<module>`` (a model shipped in a Python package), a local folder or a hub id."""

    name_or_path: ModelRef
    """The checkpoint: a hub id, package:<module> (a model a Python package ships) or a folder (./ and ../ are relative to the YAML)."""
    lowercase: bool = True
    """Whether the checkpoint's tokenizer lowercases (an uncased model)."""
    hub_id: str | None = Field(
        None,
        description="The Hub id this checkpoint is (for model cards' base_model) when "
        "name_or_path is a package or a folder.",
    )

    def recipe(self) -> dict:
        """What training depends on (for fingerprints): everything but the card-only ``hub_id``."""
        return self.model_dump(mode="json", exclude={"hub_id"})


class ReplayConfig(StrictModel):
    """General-text replay: a share of an arm's tokens read from general text, to keep what the base knew."""

    fraction: float = Field(0.0, ge=0, lt=1)
    """Share of each replaying arm's tokens taken from general text; 0 is no replay."""
    source: Literal["general"] = "general"
    """Where the replayed text comes from: general, the control arm's corpus, so the forgetting set stays unseen."""
    arms: list[Arm] = Field(default_factory=list)
    """Arms that replay; empty: every arm that reads domain or task text, so one setting covers a run."""

    def replays(self, arm: str) -> bool:
        """Whether ``arm`` mixes general text into its stream (the control reads general text throughout)."""
        if self.fraction == 0 or ARMS[arm].on_general_text:
            return False
        return not self.arms or any(name == arm for name in self.arms)


class TaptConfig(StrictModel):
    """Task-adaptive pretraining (Gururangan et al. 2020): MLM on the unlabeled text of the tasks' training
    examples (the union over the domain's tasks, as fine-tuning reads them), never their evaluation text."""

    epochs: float = Field(
        100.0, gt=0, description="Passes over the task text (Don't Stop Pretraining: 100); the budget in tokens."
    )
    curated_neighbours: int = Field(
        5, ge=1, description="Curated TAPT: corpus documents nearest (TF-IDF cosine) to each task text added."
    )


class ReplacedTokenConfig(StrictModel):
    """Replaced-token detection (ELECTRA, Clark et al. 2020; DeBERTa-v3, He et al. 2021; EconBERTa): a smaller
    generator, sharing the arm's token embeddings, fills the masked positions with sampled tokens; the arm's
    encoder (the discriminator) learns which tokens were replaced, at every position. The generator is
    discarded after pretraining, as those models' releases did."""

    arms: list[Arm] = Field(
        default_factory=list, description="Arms trained with replaced-token detection instead of MLM."
    )
    generator_layers: float = Field(
        0.5, gt=0, le=1, description="The generator's depth as a share of the arm's (DeBERTa-v3: half)."
    )
    discriminator_weight: float = Field(
        50.0, gt=0, description="Weight of the discriminator's loss against the generator's MLM loss (ELECTRA: 50)."
    )


class PretrainConfig(StrictModel):
    """The pretraining stage: the arms, their budget, the optimisation and how training is launched."""

    arms: list[Arm] = Field(min_length=1)
    """The arms to train, each compared with the base model (docs/pipeline.md)."""
    budget_tokens: int = Field(
        ge=1,
        description="Tokens each corpus arm trains on (equal budgets keep arms comparable; an arm's own: "
        "arm_optim.<arm>.budget_tokens); the task-text arms train tapt.epochs passes over the task text instead.",
    )
    max_steps: int | None = Field(None, ge=1, description="Cap on optimizer steps (tests and smoke runs).")
    seq_len: int = Field(128, ge=8)
    """Tokens per packed training sequence."""
    seq_len_schedule: list[LengthPhase] = Field(
        default_factory=list, description="Length phases (fractions sum to 1); empty = seq_len throughout."
    )
    constant_batch_tokens: bool = Field(
        True, description="Scale the batch size with the phase length so tokens per step stay constant."
    )
    batch_size: int = Field(16, ge=1, description="Sequences per device per micro-step (at seq_len).")
    grad_accum: int = Field(1, ge=1)
    """Micro-batches per optimizer step."""
    packing: bool = Field(True, description="Concatenate documents into full sequences (no padding).")
    lr: float | None = Field(
        None, gt=0, description="Peak learning rate of every arm; None: each arm's literature default (arm_optim)."
    )
    warmup_ratio: float | None = Field(None, ge=0, lt=1, description="Warmup share of steps; None: per-arm default.")
    arm_optim: dict[Arm, ArmOptimConfig] = Field(
        default_factory=dict,
        description="Per-arm lr / warmup_ratio / budget_tokens; wins over the stage's own values.",
    )
    base_warmup: BaseWarmupConfig = BaseWarmupConfig()
    tapt: TaptConfig = TaptConfig()
    rtd: ReplacedTokenConfig = ReplacedTokenConfig()
    weight_decay: float = 0.01
    """AdamW weight decay."""
    adam_betas: tuple[float, float] = (0.9, 0.98)
    """AdamW betas (RoBERTa's 0.9, 0.98)."""
    adam_eps: float = Field(1e-6, gt=0)
    """AdamW epsilon."""
    max_grad_norm: float = 1.0
    """Gradient-norm clipping threshold."""
    mask_rate: float = Field(0.15, gt=0, lt=1)
    """Share of tokens chosen for prediction (BERT: 15%). The masking settings are the arms'; the base warm-up
    masks as BERT did (these defaults), so every domain shares one."""
    mask_schedule: list[MaskPhase] = Field(default_factory=list)
    """Masking-rate phases by share of steps, as recent encoders mask more early and less late; empty: mask_rate
    throughout (evaluation always masks at mask_rate, so arms stay comparable)."""
    lr_schedule: LrScheduleConfig = LrScheduleConfig()
    replay: ReplayConfig = ReplayConfig()
    start_from: dict[Arm, StartFromConfig] = Field(default_factory=dict)
    """Per arm (the key): the kept checkpoint step of an earlier arm it starts from instead of its own start."""
    mask_token_prob: float = Field(0.8, ge=0, le=1, description="Of the selected tokens: share replaced by [MASK].")
    random_token_prob: float = Field(0.1, ge=0, le=1, description="Of the selected tokens: share replaced at random.")
    whole_word_mask: bool = False
    """Mask every piece of a chosen word together."""
    next_sentence_prediction: bool = Field(
        False,
        description="Original-BERT NSP objective (off, as in RoBERTa): unpacked sentence pairs, BERT-family models.",
    )
    sparse_prediction: bool = Field(True, description="Run the MLM head only at masked positions (same loss).")
    precision: Literal["auto", "fp32", "bf16", "fp16"] = Field(
        "fp32",
        description="Autocast precision of the arms; auto: bf16 where the hardware computes it natively (a GPU "
        "with bf16, a CPU with AVX512-BF16 or AMX), else fp32: elsewhere bf16 is emulated and many times slower.",
    )
    compile: bool = Field(
        False,
        description="torch.compile the encoder (for GPUs; on a CPU compiling takes long and "
        "the steps are not faster).",
    )
    scratch_size: Literal["base_config", "tiny", "mini", "small", "medium", "base", "large"] = "base_config"
    """The from-scratch arms' architecture: the base's own configuration, or a BERT size (tiny to large, Turc et al. 2019)."""
    scratch_model: str | dict[str, Any] | None = Field(
        None,
        description="The from-scratch arms' architecture, independent of the base (replaces scratch_size): a "
        "Hugging Face config name or folder (e.g. microsoft/deberta-v3-base, whose config alone is read), or an "
        "inline config with its model_type (e.g. {model_type: deberta-v2, num_hidden_layers: 2, hidden_size: "
        "128, ...}). The vocabulary size, padding id and positions follow the domain tokenizer and seq_len.",
    )
    checkpoint_every: int = Field(100, ge=1)
    """Optimizer steps between checkpoints (resume points)."""

    @field_validator("scratch_model")
    @classmethod
    def _inline_config_names_its_family(cls, value: object) -> object:
        if isinstance(value, dict) and not isinstance(value.get("model_type"), str):
            raise ValueError("an inline config needs its model_type (bert, roberta, deberta-v2, modernbert, ...)")
        return value

    keep_checkpoints: int = Field(2, ge=1)
    """Checkpoints kept; older ones are removed."""
    log_every: int = Field(5, ge=1)
    """Optimizer steps between log lines and tracked metrics."""
    eval_documents: int = Field(200, ge=1, description="Held-out documents for domain and general perplexity.")
    eval_every: int | None = Field(
        None,
        ge=1,
        description="Also evaluate perplexity on the whole held-out sets every this many steps (None: "
        "at the start and the end only); not part of the recipe.",
    )
    watch_points: int = Field(
        5,
        ge=0,
        description="Perplexity curve points per arm (step 0, evenly spaced steps, the end) on the first rows "
        "of the held-out sets, as many rows as keep them under watch_share of the arm's training compute; "
        "logged as watch/*; 0: none. Not part of the recipe.",
    )
    watch_share: float = Field(
        0.1, gt=0, le=1, description="Share of the arm's training compute the watch_points evaluations may use."
    )
    general_eval_corpus: list[PathStr] = Field(
        default_factory=list, description="General text for forgetting (perplexity)."
    )
    torch_threads: int | None = Field(
        None,
        ge=1,
        description="CPU threads for torch during training (None: torch's default, one per core). On a "
        "CPU shared with other busy processes fewer threads than cores can be faster; not part of the recipe.",
    )
    peak_tflops: float | None = Field(None, gt=0, description="Declared peak of the hardware (MFU denominator).")
    deepspeed: DeepSpeedConfig = DeepSpeedConfig()
    launch: LaunchConfig = LaunchConfig()
    seed: int = 42
    """Seed of the data order, the masking and any new weights."""
    replicates: int = Field(1, ge=1, le=20)
    """Pretraining replicates per arm: each trains again from the same start on the same text, under its own
    seed (data order and masking: ``seed + 1000 (r - 1)``), and is fine-tuned under every seed of
    ``finetune.seeds``. With one, a verdict is about that checkpoint, not the procedure; the report pairs
    replicates and seeds (MultiBERTs' Multi-Bootstrap). Replicate 1 is the arm as trained without replicates."""

    def mask_rate_at(self, step: int, total_steps: int) -> float:
        """The masking rate of optimizer step ``step`` (0-based) of ``total_steps`` (``schedules.mask_rate_at``)."""
        return mask_rate_at(self.mask_schedule, self.mask_rate, step, total_steps)

    @property
    def mean_mask_rate(self) -> float:
        """The masking rate over the whole run (``schedules.mean_mask_rate``): ``mask_rate`` without phases."""
        return mean_mask_rate(self.mask_schedule, self.mask_rate)

    def schedule_line(self) -> str:
        """The arm's schedules in one line (``plan``), of a config resolved by ``for_arm``."""
        return f"lr {self.lr_schedule.line(self.warmup_share)}; masking {masking_line(self.mask_schedule, self.mask_rate)}"

    def objective(self, arm: str) -> Literal["mlm", "rtd"]:
        """The arm's pretraining objective: replaced-token detection for ``rtd.arms``, else masked-LM."""
        return "rtd" if any(name == arm for name in self.rtd.arms) else "mlm"

    def replicate_names(self) -> list[str]:
        """Every arm's pretraining runs: the arms themselves, then ``<arm>@r<r>`` for replicates 2 and up."""
        extra = [replicate_name(arm, r) for r in range(2, self.replicates + 1) for arm in self.arms]
        return [*self.arms, *extra]

    def for_arm(self, arm: str, replicate: int = 1) -> PretrainConfig:
        """This config with ``lr``, ``warmup_ratio`` and ``budget_tokens`` resolved for one arm (arm_optim, then
        the stage's own values, then the literature default), which is what the arm trains and is fingerprinted
        with; for replicate ``r`` of it, with the seed ``seed + REPLICATE_SEED_STRIDE (r - 1)`` (its data order
        and masking)."""
        own = self._own_optim(arm)
        default = DEFAULT_ARM_OPTIM[arm]
        lr = (own.lr if own and own.lr is not None else None) or self.lr or default["lr"]
        warmup = own.warmup_ratio if own and own.warmup_ratio is not None else self.warmup_ratio
        return self.model_copy(
            update={
                "lr": lr,
                "warmup_ratio": default["warmup_ratio"] if warmup is None else warmup,
                "budget_tokens": self.arm_budget(arm),
                "seed": self.seed + REPLICATE_SEED_STRIDE * (replicate - 1),
            }
        )

    def _own_optim(self, arm: str) -> ArmOptimConfig | None:
        # ``arm`` comes as a plain name (CLI, flows); the keys are the ``Arm`` literal, so compare by value
        return next((optim for name, optim in self.arm_optim.items() if name == arm), None)

    def arm_budget(self, arm: str) -> int:
        """The tokens a corpus arm trains on: its own ``arm_optim`` budget, else ``budget_tokens``; the control
        arm, unless it has its own, trains continued's (the equal-token control). Replayed general text
        (``replay``) is part of an arm's budget, not added to it: the control's rule is the same total tokens."""
        own = self._own_optim(arm)
        if own is not None and own.budget_tokens is not None:
            return own.budget_tokens
        return self.arm_budget("continued") if arm == "control" else self.budget_tokens

    @property
    def peak_lr(self) -> float:
        """The peak learning rate of a config resolved by ``for_arm`` (what the engines train with)."""
        if self.lr is None:
            raise ValueError("pretrain.lr is not resolved: take the arm's config with for_arm(arm)")
        return self.lr

    @property
    def warmup_share(self) -> float:
        """The warmup share of a config resolved by ``for_arm``."""
        if self.warmup_ratio is None:
            raise ValueError("pretrain.warmup_ratio is not resolved: take the arm's config with for_arm(arm)")
        return self.warmup_ratio

    @model_validator(mode="after")
    def _check(self) -> PretrainConfig:
        if "dapt-tapt" in self.arms and (
            "continued" not in self.arms or self.arms.index("continued") > self.arms.index("dapt-tapt")
        ):
            raise ValueError("arm dapt-tapt starts from the continued arm's result: list continued before it")
        if self.seq_len_schedule and abs(sum(p.fraction for p in self.seq_len_schedule) - 1.0) > 1e-6:
            raise ValueError("seq_len_schedule fractions must sum to 1")
        if "continued" in self.rtd.arms and "dapt-tapt" in self.arms and "dapt-tapt" not in self.rtd.arms:
            raise ValueError(
                "dapt-tapt (masked-LM) would start from a continued arm trained with replaced-token detection, "
                "whose masked-LM head never trained: list dapt-tapt in rtd.arms too, or continued out of it"
            )
        if self.next_sentence_prediction and self.rtd.arms:
            raise ValueError("next_sentence_prediction and rtd.arms cannot be combined: pick one objective")
        check_phases(self.mask_schedule)
        check_starts(dict(self.start_from), list(self.arms), self.checkpoint_every)
        if self.replay.fraction and ("control" in self.replay.arms or self.next_sentence_prediction):
            raise ValueError("replay: not for the control arm (general text throughout) nor next_sentence_prediction")
        if self.mask_token_prob + self.random_token_prob > 1:
            raise ValueError("mask_token_prob + random_token_prob must be at most 1")
        return self
