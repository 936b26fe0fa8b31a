"""A pretraining arm's optimisation over its steps: its peak rate and warm-up (per arm, with the literature's
defaults), and its schedules of sequence length, learning rate and masking rate.

``config/pretrain.py`` holds these; the schedule factors themselves are ``core/optim.py``'s and the step plan
``pretrain/step_plan.py``'s. This module trains nothing and resolves no arm (``PretrainConfig.for_arm`` does).
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domainbert.config.schema import StrictModel


class ArmOptimConfig(StrictModel):
    """One arm's optimisation settings; unset fields fall back to ``pretrain.lr`` / ``pretrain.warmup_ratio``."""

    lr: float | None = Field(None, gt=0)
    """This arm's peak learning rate."""
    warmup_ratio: float | None = Field(None, ge=0, lt=1)
    """This arm's share of steps spent warming the learning rate up."""
    budget_tokens: int | None = Field(None, ge=1)
    """This arm's token budget (unset: ``pretrain.budget_tokens``; the control arm: continued's). From scratch
    needs far more tokens than continued pretraining (SciBERT trained from scratch on 3.2B tokens, BioBERT
    continued on 4.5B after BERT's own 3.3B); the report then names each arm's budget."""


# Literature defaults. Continued pretraining: BERT's own peak rate, as BioBERT (Lee et al. 2020) used, with
# RoBERTa/DAPT's 6% warmup (Gururangan et al. 2020). From scratch: a higher peak with a longer warmup, as
# RoBERTa-base (6e-4, Liu et al. 2019) and academic-budget BERT (Izsak et al. 2021) train from random weights.
DEFAULT_ARM_OPTIM: dict[str, dict[str, float]] = {
    "continued": {"lr": 1e-4, "warmup_ratio": 0.06},
    "extended": {"lr": 1e-4, "warmup_ratio": 0.06},
    "scratch": {"lr": 5e-4, "warmup_ratio": 0.1},
    # TAPT (Gururangan et al. 2020, appendix): continued pretraining's rate and warmup, on the task text.
    "tapt": {"lr": 1e-4, "warmup_ratio": 0.06},
    "dapt-tapt": {"lr": 1e-4, "warmup_ratio": 0.06},
    "curated-tapt": {"lr": 1e-4, "warmup_ratio": 0.06},
    "self-pretrain": {"lr": 5e-4, "warmup_ratio": 0.1},
    # the control differs from continued in its text alone
    "control": {"lr": 1e-4, "warmup_ratio": 0.06},
}


class LengthPhase(StrictModel):
    """One phase of the sequence-length schedule (BERT: 90% of steps at 128, then 10% at 512)."""

    fraction: float = Field(gt=0, le=1, description="Share of the optimizer steps spent in this phase.")
    seq_len: int = Field(ge=8)
    """Tokens per sequence in this phase."""


class LrScheduleConfig(StrictModel):
    """The learning-rate schedule of the arms after the warm-up (``warmup_ratio``): its shape over the steps."""

    kind: Literal["linear", "wsd", "constant"] = Field(
        "linear",
        description="linear: decay to zero over every step after the warm-up (BERT, RoBERTa); wsd: "
        "warmup-stable-decay, the peak held until a final decay (ModernBERT's trapezoid); constant: the peak held "
        "to the end, for a run whose decay comes later.",
    )
    decay_fraction: float = Field(
        0.1, gt=0, le=1, description="wsd: share of the steps spent decaying, so the stable phase can be resumed."
    )
    decay_shape: Literal["linear", "cosine", "1-sqrt"] = Field(
        "linear", description="wsd: how the final decay falls to zero, as the schedule literature compares them."
    )

    def line(self, warmup_ratio: float) -> str:
        """The schedule in a few words, for ``plan``."""
        warmup = f"warm-up {warmup_ratio:.0%}"
        if self.kind == "linear":
            return f"linear ({warmup}, then linear decay to 0)"
        if self.kind == "constant":
            return f"constant ({warmup}, then the peak)"
        return f"warmup-stable-decay ({warmup}, {self.decay_shape} decay over the last {self.decay_fraction:.0%})"


class MaskPhase(StrictModel):
    """One phase of the masking-rate schedule: ``rate`` until ``until`` of the optimizer steps."""

    until: float = Field(gt=0, le=1, description="End of the phase as a share of the optimizer steps.")
    rate: float = Field(gt=0, lt=1, description="Share of tokens chosen for prediction during the phase.")


def check_phases(phases: list[MaskPhase]) -> None:
    """Refuse masking phases whose ends do not grow to 1.0 (``ValueError``, which the config reports)."""
    ends = [p.until for p in phases]
    if ends and (any(b <= a for a, b in zip(ends, ends[1:], strict=False)) or abs(ends[-1] - 1.0) > 1e-9):
        raise ValueError("mask_schedule: each phase's until must grow, and the last must be 1.0")


def mean_mask_rate(phases: list[MaskPhase], default: float) -> float:
    """The masking rate over the whole run, each phase weighted by its share of the steps (what sparse prediction
    costs on average: the FLOP counts), else ``default``."""
    if not phases:
        return default
    ends = [0.0, *(p.until for p in phases)]
    return sum(p.rate * (b - a) for p, a, b in zip(phases, ends, ends[1:], strict=False))


def mask_rate_at(phases: list[MaskPhase], default: float, step: int, total_steps: int) -> float:
    """The masking rate of optimizer step ``step`` (0-based) of ``total_steps``: the first phase whose ``until``
    lies beyond the step's share of the run, else ``default`` (no phases)."""
    done = step / max(1, total_steps)
    for phase in phases:
        if done < phase.until:
            return phase.rate
    return phases[-1].rate if phases else default


def masking_line(phases: list[MaskPhase], default: float) -> str:
    """The masking schedule in a few words, for ``plan``."""
    if not phases:
        return f"{default:g}"
    return " -> ".join(f"{p.rate:g} to {p.until:.0%}" for p in phases)
