"""Tags and labels outside a task's label set, gathered per file so that one error names every bad line.

A task file written against another label set (``B-GENE`` where the domain says ``B-TERM``) is wrong on many
lines; naming only the first would take a run of ``validate`` per line to fix. The readers of
``services.tasks`` add each bad line here and raise the file's one error at its end.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from domainbert.core.errors import DataError

if TYPE_CHECKING:
    from domainbert.config.finetune import TaskConfig


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
