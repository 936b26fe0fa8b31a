"""Starting an arm from a kept checkpoint step of an earlier arm (``pretrain.start_from``), as BioClinical
ModernBERT continued from ModernBERT's checkpoint before its decay, with no re-warm-up.

This module holds the setting and its config-time checks (the source arm is trained, earlier, over the same
vocabulary; the step is a checkpoint step). Whether the step's checkpoint is kept is known only once the
source arm has trained (``pretrain/start.py``); the schedule's offset is ``pretrain/engine.py``'s.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from domainbert.config.schema import StrictModel

Arm = Literal["continued", "extended", "scratch", "tapt", "dapt-tapt", "curated-tapt", "self-pretrain", "control"]

# Arms whose weights fit each other's: the base's vocabulary and architecture, the extended vocabulary, or the
# from-scratch encoder over the domain tokenizer.
_VOCABULARIES: dict[str, str] = {
    "continued": "base",
    "tapt": "base",
    "dapt-tapt": "base",
    "curated-tapt": "base",
    "control": "base",
    "extended": "extended",
    "scratch": "scratch",
    "self-pretrain": "scratch",
}


class StartFromConfig(StrictModel):
    """An arm's start: a kept checkpoint of an earlier arm instead of its own start."""

    arm: Arm
    """The earlier arm whose checkpoint this arm starts from."""
    step: int = Field(ge=1)
    """That arm's checkpoint step (a multiple of checkpoint_every, before its last step)."""
    rewarm: bool = False
    """Warm the learning rate up afresh; false: the schedule continues from that step, with no warm-up."""

    def line(self) -> str:
        """The start in a few words, for ``plan``."""
        return f"from {self.arm}@{self.step}, {'re-warm-up' if self.rewarm else 'no re-warm-up'}"


def check_starts(starts: dict[Arm, StartFromConfig], arms: list[str], checkpoint_every: int) -> None:
    """Refuse a start the run cannot make (``ValueError``, which the config reports naming the field)."""
    for arm, start in starts.items():
        where = f"start_from.{arm}"
        if arm not in arms:
            raise ValueError(f"{where}: {arm} is not one of the arms")
        if start.arm not in arms or arms.index(start.arm) >= arms.index(arm):
            raise ValueError(f"{where}.arm: {start.arm} must be an arm listed before {arm} (it trains first)")
        if _VOCABULARIES[start.arm] != _VOCABULARIES[arm]:
            raise ValueError(f"{where}.arm: {start.arm}'s weights have another vocabulary than {arm}'s")
        if start.step % checkpoint_every:
            raise ValueError(f"{where}.step: {start.step} is not a checkpoint step (a multiple of checkpoint_every)")


def start_of(starts: dict[Arm, StartFromConfig], arm: str) -> StartFromConfig | None:
    """The kept checkpoint ``arm`` starts from, None: its own start (``arm`` may come as a plain name)."""
    return next((start for name, start in starts.items() if name == arm), None)


def kept_steps(starts: dict[Arm, StartFromConfig], source: str) -> frozenset[int]:
    """The checkpoint steps of ``source`` that other arms start from: never pruned."""
    return frozenset(start.step for start in starts.values() if start.arm == source)
