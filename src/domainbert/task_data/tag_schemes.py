"""NER tag schemes: validation against a task's label set and conversion of IOB1 and BIOES to IOB2; tags and
labels outside a task's label set, gathered per file.

Everything downstream (the model's label set, the loss, seqeval's strict IOB2 evaluation) works in IOB2:
``B-X`` opens an entity, ``I-X`` continues it, ``O`` is outside. Conversion rules:

- IOB1 -> IOB2: an ``I-X`` that does not continue an ``X`` entity (sentence start, after ``O``, after another
  type) opens one and becomes ``B-X``; a ``B-X`` (IOB1 uses it only between two adjacent ``X`` entities) stays.
- BIOES -> IOB2: ``S-X`` -> ``B-X``, ``E-X`` -> ``I-X``; ``B``, ``I`` and ``O`` are unchanged.

- Ill-formed IOB2 (and BIOES) input: an ``I-X`` that does not continue an ``X`` entity (sentence start,
  after ``O``, after another type) is repaired to ``B-X`` (the IOB1 rule), and the repairs are counted so
  the reader can warn once per file (``warn_repairs``). Without the repair seqeval's strict mode would
  silently drop such an entity from the gold set. Predictions are repaired the same way (``ner.decode_ner``).

A task file written against another label set (``B-GENE`` where the domain says ``B-TERM``) is wrong on many
lines; naming only the first would take a run of ``validate`` per line to fix. The readers of
``task_data.splits`` add each tag or label outside the set to ``BadLabels`` and raise the file's one error at its
end, naming every bad line up to ``BadLabels.MAX_LISTED``.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

from domainbert.core.errors import DataError

if TYPE_CHECKING:
    from domainbert.config.finetune import TaskConfig

log = logging.getLogger(__name__)

SCHEME_PREFIXES = {"IOB1": ("B", "I"), "IOB2": ("B", "I"), "BIOES": ("B", "I", "E", "S")}


def split_tag(tag: str) -> tuple[str, str]:
    """``B-PER`` -> (``B``, ``PER``); ``O`` -> (``O``, ``""``)."""
    if tag == "O":
        return "O", ""
    prefix, sep, kind = tag.partition("-")
    if not sep or not kind:
        return tag, ""
    return prefix, kind


def entity_types(labels: list[str]) -> list[str]:
    """The entity types named in a label set, in first-seen order."""
    seen: dict[str, None] = {}
    for label in labels:
        prefix, kind = split_tag(label)
        if kind:
            seen.setdefault(kind, None)
    return list(seen)


def iob2_labels(labels: list[str]) -> list[str]:
    """The model's IOB2 label set for a declared label set in any scheme: ``O`` then ``B-T``, ``I-T`` per type."""
    out = ["O"]
    for kind in entity_types(labels):
        out += [f"B-{kind}", f"I-{kind}"]
    return out


def check_label_set(labels: list[str], scheme: str) -> str | None:
    """Return a message when ``labels`` is not a valid label set of ``scheme``, else None."""
    if "O" not in labels:
        return "an NER label set must contain 'O'"
    allowed = SCHEME_PREFIXES[scheme]
    for label in labels:
        prefix, kind = split_tag(label)
        if label != "O" and (prefix not in allowed or not kind):
            return f"label {label!r} is not a {scheme} tag (expected O or {'/'.join(allowed)}-TYPE)"
    return None


def to_iob2(tags: list[str], scheme: str, repairs: list[int] | None = None) -> list[str]:
    """Convert one sentence's tags from ``scheme`` to IOB2 (see the module docstring for the rules).

    Args:
        repairs: a one-item counter; each ill-formed ``I-X`` repaired to ``B-X`` adds 1 (IOB1's ``I-X``
            openings are the scheme, not repairs, and are not counted).
    """
    out: list[str] = []
    prev_kind = ""
    for tag in tags:
        prefix, kind = split_tag(tag)
        if prefix == "O":
            out.append("O")
            prev_kind = ""
            continue
        new = {"S": "B", "E": "I"}.get(prefix, prefix) if scheme == "BIOES" else prefix
        if new == "I" and kind != prev_kind:
            new = "B"
            if repairs is not None and scheme != "IOB1":
                repairs[0] += 1
        out.append(f"{new}-{kind}")
        prev_kind = kind
    return out


def warn_repairs(where: object, count: int, what: str = "tags") -> None:
    """One warning for a file (or prediction set) whose ill-formed ``I-`` tags were repaired."""
    if count:
        log.warning(
            "%s: %d %s 'I-X' not continuing an X entity repaired to 'B-X' (ill-formed IOB2)", where, count, what
        )


class LabelOutsideSet(DataError):
    """A tag or label outside the task's label set, at one line: a file's readers gather them (``BadLabels``)."""

    def __init__(self, value: str, cfg: TaskConfig, file: str | Path, line: int | None) -> None:
        self.value = value
        super().__init__(f"{_kind(cfg)} {value!r} is not in the task's label set {cfg.labels}", file=file, line=line)


def _kind(cfg: TaskConfig) -> str:
    return "tag" if cfg.type == "ner" else "label"


class BadLabels:
    """The lines of one file whose tag or label is outside the label set, so that one error lists them all (the
    first ``MAX_LISTED``, then how many more): a file with a wrong label set is fixed in one pass."""

    MAX_LISTED = 10

    def __init__(self, path: str | Path, cfg: TaskConfig) -> None:
        self.path, self.cfg = path, cfg
        self.found: list[LabelOutsideSet] = []

    def add(self, exc: LabelOutsideSet) -> None:
        self.found.append(exc)

    def check(self) -> None:
        """Raise the file's one error: the single bad line as it was, or every bad line, up to the cap."""
        if len(self.found) == 1:
            raise self.found[0]
        if self.found:
            shown = ", ".join(
                f"line {e.line} {e.value!r}" if e.line is not None else repr(e.value)
                for e in self.found[: self.MAX_LISTED]
            )
            more = len(self.found) - self.MAX_LISTED
            listed = shown + (f" and {more} more" if more > 0 else "")
            kind = _kind(self.cfg)
            raise DataError(
                f"{len(self.found)} {kind}s are not in the task's label set {self.cfg.labels}: {listed}",
                file=self.path,
            )
