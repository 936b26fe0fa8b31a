"""Examples a task's splits share: test or validation examples that also stand in its training split.

Scraped task folders often carry the same example in train and test; every model then scores those from
memory, which inflates all scores alike and hides the differences the comparison is about. An example is
shared with train when its texts are equal to a training example's, either exactly or after the
normalisation decontamination uses (lowercase ``\\w+`` words, ``corpus.words.lower_words``: case,
punctuation and spacing do not count). Labels are not compared: the same text with another label is still the
same question. ``find_overlap`` counts and locates them; ``without_overlap`` drops them from the evaluation
splits. This module reads no files (``tasks.load_task`` does) and decides nothing about scoring (the
fine-tuning stage does, by ``finetune.split_overlap``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from domainbert.task_data.splits import ClsExample, NerExample, TaskData, example_texts

EVAL_SPLITS = ("validation", "test")
_WORD = re.compile(r"\w+")


def normalised(text: str) -> str:
    """The lowercase ``\\w+`` words of ``text`` joined by single spaces (decontamination's word rule)."""
    return " ".join(_WORD.findall(text.lower()))


def _key(example: NerExample | ClsExample, normalise: bool) -> tuple[str, ...]:
    texts = example_texts(example)
    return tuple(normalised(t) for t in texts) if normalise else tuple(texts)


@dataclass
class SplitOverlap:
    """Per evaluation split: how many examples equal a training example, exactly and after normalisation.

    Attributes:
        exact: split -> number of examples whose texts equal a training example's verbatim.
        normalised: split -> number equal after normalisation (the exact ones included).
        where: split -> the ``file:line`` of the first few shared examples, for the message.
        shared: split -> indices (in the split) of every shared example (normalised rule).
    """

    exact: dict[str, int] = field(default_factory=dict)
    normalised: dict[str, int] = field(default_factory=dict)
    where: dict[str, list[str]] = field(default_factory=dict)
    shared: dict[str, list[int]] = field(default_factory=dict)

    @property
    def any(self) -> bool:
        return any(self.normalised.values())

    def sentence(self, task: str, sizes: dict[str, int]) -> str:
        """One line for logs, ``validate`` and the report."""
        parts = [
            f"{split} {self.normalised[split]} of {sizes[split]} ({self.exact[split]} verbatim)"
            for split in EVAL_SPLITS
            if self.normalised.get(split)
        ]
        first = next((w for split in EVAL_SPLITS for w in self.where.get(split, [])), "")
        return f"task {task}: examples also in its training split: {', '.join(parts)}" + (
            f"; first at {first}" if first else ""
        )


def find_overlap(data: TaskData, max_where: int = 3) -> SplitOverlap:
    """Which validation and test examples of ``data`` also stand in its training split."""
    train_exact = {_key(e, False) for e in data.splits.get("train", [])}
    train_norm = {_key(e, True) for e in data.splits.get("train", [])}
    out = SplitOverlap()
    for split in EVAL_SPLITS:
        examples = data.splits.get(split, [])
        exact = [i for i, e in enumerate(examples) if _key(e, False) in train_exact]
        shared = [i for i, e in enumerate(examples) if _key(e, True) in train_norm]
        out.exact[split], out.normalised[split], out.shared[split] = len(exact), len(shared), shared
        out.where[split] = [examples[i].where for i in shared[:max_where] if examples[i].where]
    return out


def without_overlap(data: TaskData, overlap: SplitOverlap) -> TaskData:
    """``data`` with the shared validation and test examples left out (train untouched); a split left empty
    keeps its examples, since scoring nothing would say less than scoring with the caveat."""
    splits = dict(data.splits)
    for split in EVAL_SPLITS:
        drop = set(overlap.shared.get(split, []))
        kept = [e for i, e in enumerate(data.splits.get(split, [])) if i not in drop]
        if drop and kept:
            splits[split] = kept
    return TaskData(
        config=data.config, label_list=data.label_list, splits=splits, sources=data.sources, data_hash=data.data_hash
    )
