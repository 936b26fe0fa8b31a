"""Reading a task's train/validation/test splits into plain examples, with clear errors on bad input.

Sources (``TaskConfig.format``):
- ``conll``: a folder with ``train``/``validation``/``test`` files (``.conll``, ``.txt``, ``.tsv``, ``.bio`` or
  ``.iob``; ``dev``/``valid`` also name the validation split): one ``token<TAB or space>tag`` per line (the
  tag is the last column), a blank line between sentences, ``-DOCSTART-`` lines ignored.
- ``jsonl`` / ``csv``: a folder with ``<split>.jsonl[.gz]`` or ``<split>.csv[.gz]``: a text column, an
  optional text-pair column and a label column (a list, or a ``label_separator``-joined string in CSV, for
  multi-label).
- ``hf``: a Hugging Face dataset id or a local dataset folder (``datasets.load_dataset``, or
  ``load_from_disk`` for a ``save_to_disk`` folder); integer labels are mapped through the dataset's
  ``ClassLabel`` names; NER reads ``tokens_field`` and ``tags_field``.

NER tags are checked against the declared label set, in the declared scheme, then converted to IOB2
(``domainbert.task_data.tag_schemes``). ``max_train_examples``/``max_eval_examples``/``max_test_examples`` take a fixed random subset
(``subset_seed``), kept in file order, identical for every model and seed. ``split_texts`` gives every text of
a split through the same readers (no subsample), for the corpus stage's decontamination and audit, so what is
fine-tuned and scored and what is checked against the corpus cannot disagree. What this module leaves out:
tokenisation and batching (``encoding``) and anything model-related.
"""

from __future__ import annotations

import csv
import hashlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from domainbert.config.finetune import TaskConfig
from domainbert.core.errors import DataError
from domainbert.core.jsonl import iter_records, text_lines
from domainbert.task_data.tag_schemes import (
    BadLabels,
    LabelOutsideSet,
    check_label_set,
    iob2_labels,
    to_iob2,
    warn_repairs,
)

if TYPE_CHECKING:
    from datasets import Dataset, DatasetDict, IterableDataset, IterableDatasetDict

T = TypeVar("T")

SPLITS = ("train", "validation", "test")
SPLIT_ALIASES = {"train": ("train",), "validation": ("validation", "dev", "valid", "val"), "test": ("test",)}
EXTENSIONS = {
    "conll": (".conll", ".txt", ".tsv", ".bio", ".iob"),
    "jsonl": (".jsonl", ".jsonl.gz"),
    "csv": (".csv", ".csv.gz"),
}


@dataclass
class NerExample:
    tokens: list[str]
    tags: list[str]  # IOB2
    where: str = ""  # "file:line" of the sentence's first token


@dataclass
class ClsExample:
    text: str
    labels: list[str]  # one label, or several for multi-label
    text_pair: str | None = None
    where: str = ""
    group: str | None = None  # the task's group_field value (e.g. a language), for per-group scores


@dataclass
class TaskData:
    """The three splits of a task, plus what the model needs to know about its labels."""

    config: TaskConfig
    label_list: list[str]  # the model's labels (IOB2 tags for NER)
    splits: dict[str, list[Any]] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)  # split -> file (or dataset id)
    data_hash: str = ""  # sha256 over the split files (or the dataset id), for fingerprints
    # examples the evaluation splits share with train, and whether they were left out (task_data.split_overlap)
    split_overlap: dict[str, Any] | None = None


def find_split_file(folder: Path, split: str, fmt: str) -> Path:
    for alias in SPLIT_ALIASES[split]:
        for ext in EXTENSIONS[fmt]:
            path = folder / f"{alias}{ext}"
            if path.is_file():
                return path
    names = ", ".join(f"{a}{e}" for a in SPLIT_ALIASES[split][:2] for e in EXTENSIONS[fmt][:2])
    raise DataError(f"no {split} file in the task folder (looked for {names}, ...)", file=folder)


def read_conll(path: Path, cfg: TaskConfig) -> list[NerExample]:
    """Read a CoNLL-style file; every tag is checked against ``cfg.labels`` and converted to IOB2."""
    allowed = set(cfg.labels)
    out: list[NerExample] = []
    tokens: list[str] = []
    tags: list[str] = []
    start = 0
    repairs = [0]  # ill-formed I- tags repaired to B- (one warning for the file)
    bad = BadLabels(path, cfg)

    def flush() -> None:
        if tokens:
            out.append(
                NerExample(tokens=list(tokens), tags=to_iob2(tags, cfg.tag_scheme, repairs), where=f"{path}:{start}")
            )
        tokens.clear()
        tags.clear()

    with text_lines(path) as f:
        for lineno, raw in enumerate(f, 1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                flush()
                continue
            if line.startswith("-DOCSTART-"):
                continue
            parts = line.split("\t") if "\t" in line else line.split()
            if len(parts) < 2:
                raise DataError("expected 'token<TAB>tag' (a token without a tag)", file=path, line=lineno)
            token, tag = parts[0], parts[-1].strip()
            if tag not in allowed:
                bad.add(LabelOutsideSet(tag, cfg, path, lineno))
            if not tokens:
                start = lineno
            tokens.append(token)
            tags.append(tag)
    bad.check()  # before the IOB2 conversion reads the tags
    flush()
    warn_repairs(path, repairs[0])
    return out


def _labels_of(
    value: object, cfg: TaskConfig, names: list[str] | None, where: str, path: str | Path, line: int | None
) -> list[str]:
    """The labels of one label cell as read (a string, a number, a list of them, or None), checked against the
    task's label set; an integer in range of ``names`` (a hub dataset's ``ClassLabel`` names) is its name."""
    if value is None:
        raise DataError(f"label column {cfg.label_field!r} is missing or empty", file=path, line=line)
    values: list[object]
    if cfg.multi_label:
        if isinstance(value, str):
            values = [v.strip() for v in value.split(cfg.label_separator) if v.strip()]
        elif isinstance(value, (list, tuple)):
            values = list(value)
        else:
            values = [value]
    else:
        if isinstance(value, (list, tuple)):
            raise DataError(f"label {value!r} is a list but the task is not multi_label", file=path, line=line)
        values = [value]
    labels = []
    for v in values:
        if isinstance(v, int) and not isinstance(v, bool) and names is not None and 0 <= v < len(names):
            v = names[v]
        v = str(v)
        if v not in cfg.labels:
            raise LabelOutsideSet(v, cfg, path, line)
        labels.append(v)
    return labels


def _cls_example(
    row: dict[str, Any], cfg: TaskConfig, names: list[str] | None, path: str | Path, line: int | None
) -> ClsExample:
    optional = tuple(c for c in (cfg.text_pair_field, cfg.group_field) if c)
    for col in (cfg.text_field, cfg.label_field) + optional:
        if col not in row:
            raise DataError(f"column {col!r} is missing (found: {', '.join(map(str, row))})", file=path, line=line)
    text = row[cfg.text_field]
    if not isinstance(text, str):
        raise DataError(f"column {cfg.text_field!r} is not a string", file=path, line=line)
    pair = row[cfg.text_pair_field] if cfg.text_pair_field else None
    where = f"{path}:{line}" if line else str(path)
    return ClsExample(
        text=text,
        text_pair=None if pair is None else str(pair),
        labels=_labels_of(row[cfg.label_field], cfg, names, where, path, line),
        where=where,
        group=str(row[cfg.group_field]) if cfg.group_field else None,
    )


def _cls_examples(rows: Iterable[tuple[int, dict[str, Any]]], cfg: TaskConfig, path: Path) -> list[ClsExample]:
    """The examples of (line, row) pairs; every line with a label outside the set is named in one error."""
    out, bad = [], BadLabels(path, cfg)
    for line, row in rows:
        try:
            out.append(_cls_example(row, cfg, None, path, line))
        except LabelOutsideSet as exc:
            bad.add(exc)
    bad.check()
    return out


def read_jsonl(path: Path, cfg: TaskConfig) -> list[ClsExample]:
    return _cls_examples(iter_records(path), cfg, path)


def read_csv(path: Path, cfg: TaskConfig) -> list[ClsExample]:
    with text_lines(path) as f:
        reader = csv.DictReader(f)
        # The header is line 1; a record's line is where it ends (multi-line cells span several).
        return _cls_examples(((reader.line_num, dict(row)) for row in reader), cfg, path)


READERS: dict[str, Callable[[Path, TaskConfig], list[NerExample] | list[ClsExample]]] = {
    "conll": read_conll,
    "jsonl": read_jsonl,
    "csv": read_csv,
}


def _open_hf(cfg: TaskConfig, streaming: bool = False) -> DatasetDict | IterableDatasetDict:
    """The dataset's splits: a ``save_to_disk`` folder, or ``load_dataset`` (streamed when ``streaming``)."""
    import datasets

    try:
        if (Path(cfg.path) / "dataset_dict.json").is_file():  # a DatasetDict saved with save_to_disk
            return datasets.load_from_disk(cfg.path)
        if streaming:
            return datasets.load_dataset(cfg.path, cfg.hf_config_name, streaming=True)
        return datasets.load_dataset(cfg.path, cfg.hf_config_name)
    except Exception as exc:  # noqa: BLE001 - datasets raises many types; all mean "cannot load"
        raise DataError(f"cannot load Hugging Face dataset: {exc}", file=cfg.path) from None


def _hf_split_name(ds: DatasetDict | IterableDatasetDict, split: str, cfg: TaskConfig) -> str:
    name = next((a for a in SPLIT_ALIASES[split] if a in ds), None)
    if name is None:
        raise DataError(f"dataset has no {split} split (has: {', '.join(ds)})", file=cfg.path)
    return name


def _check_columns(found: list[str] | None, needed: tuple[str, ...], where: str) -> None:
    if found is None:  # columns unknown (a streamed dataset before its first row)
        return
    for col in needed:
        if col not in found:
            raise DataError(f"column {col!r} is missing (found: {', '.join(found)})", file=where)


def _hf_rows(cfg: TaskConfig, part: Dataset | IterableDataset, where: str) -> list[Any]:
    """The examples of one split (a ``Dataset``, or a streamed ``IterableDataset`` whose columns and features
    may be unknown until its first row)."""
    features = part.features or {}
    rows: list[Any] = []
    if cfg.type == "ner":
        needed = (cfg.tokens_field, cfg.tags_field)
        _check_columns(part.column_names, needed, where)
        feat = features.get(cfg.tags_field)
        names = getattr(getattr(feat, "feature", None), "names", None)
        allowed = set(cfg.labels)
        repairs = [0]
        for i, row in enumerate(part):
            if part.column_names is None and i == 0:
                _check_columns(list(row), needed, where)
            tags = [names[t] if names is not None and isinstance(t, int) else str(t) for t in row[cfg.tags_field]]
            _check_ner(row[cfg.tokens_field], tags, allowed, cfg, where, i)
            rows.append(
                NerExample(
                    tokens=list(row[cfg.tokens_field]),
                    tags=to_iob2(tags, cfg.tag_scheme, repairs),
                    where=f"{where} row {i}",
                )
            )
        warn_repairs(where, repairs[0])
    else:
        feat = features.get(cfg.label_field)
        names = getattr(feat, "names", None) or getattr(getattr(feat, "feature", None), "names", None)
        for i, row in enumerate(part):
            rows.append(_cls_example(row, cfg, names, where, i))
    return rows


def _read_hf(cfg: TaskConfig) -> tuple[dict[str, list[Any]], dict[str, str]]:
    ds = _open_hf(cfg)
    splits: dict[str, list[Any]] = {}
    sources: dict[str, str] = {}
    for split in SPLITS:
        name = _hf_split_name(ds, split, cfg)
        sources[split] = f"{cfg.path}[{name}]"
        splits[split] = _hf_rows(cfg, ds[name], sources[split])
    return splits, sources


def _check_ner(tokens: list[str], tags: list[str], allowed: set[str], cfg: TaskConfig, where: str, row: int) -> None:
    if len(tokens) != len(tags):
        raise DataError(f"{len(tokens)} tokens but {len(tags)} tags", file=where, line=row)
    for tag in tags:
        if tag not in allowed:
            raise LabelOutsideSet(tag, cfg, where, row)


def task_data_hash(cfg: TaskConfig) -> str:
    """sha256 over the split files' names and bytes (for a hub dataset: its id and config), without parsing."""
    h = hashlib.sha256()
    if cfg.format == "hf":
        h.update(f"hf:{cfg.path}:{cfg.hf_config_name}".encode())
        return h.hexdigest()
    folder = Path(cfg.path)
    if not folder.is_dir():
        raise DataError("task folder not found", file=folder, field=f"finetune.tasks[{cfg.name}].path")
    for split in SPLITS:
        path = find_split_file(folder, split, cfg.format)
        h.update(split.encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def subsample(examples: list[T], limit: int | None, seed: int) -> list[T]:
    """A fixed random subset of ``limit`` examples in their original order (all of them when fewer)."""
    if limit is None or len(examples) <= limit:
        return examples
    keep = sorted(random.Random(seed).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


def load_task(cfg: TaskConfig) -> TaskData:
    """Read, check and subsample the three splits of a task.

    Args:
        cfg: the task's config.

    Returns:
        A ``TaskData`` whose ``splits`` map train/validation/test to ``NerExample`` or ``ClsExample`` lists.

    Raises:
        DataError: a missing file or column, a tag or label outside the label set, an empty split; the
            message names the file and line.
    """
    if cfg.type == "ner":
        problem = check_label_set(cfg.labels, cfg.tag_scheme)
        if problem:
            raise DataError(problem, field=f"finetune.tasks[{cfg.name}].labels")
        label_list = iob2_labels(cfg.labels)
    else:
        label_list = list(cfg.labels)
    data = TaskData(config=cfg, label_list=label_list, data_hash=task_data_hash(cfg))
    if cfg.format == "hf":
        data.splits, data.sources = _read_hf(cfg)
    else:
        for split in SPLITS:
            path = find_split_file(Path(cfg.path), split, cfg.format)
            data.sources[split] = str(path)
            data.splits[split] = READERS[cfg.format](path, cfg)
    for split in SPLITS:
        if not data.splits[split]:
            raise DataError(f"the {split} split is empty", file=data.sources[split])
    limits = {"train": cfg.max_train_examples, "validation": cfg.max_eval_examples, "test": cfg.max_test_examples}
    for split in SPLITS:
        data.splits[split] = subsample(data.splits[split], limits[split], cfg.subset_seed)
    return data


def example_texts(example: NerExample | ClsExample) -> list[str]:
    """The texts a model reads from one example: an NER sentence's tokens joined by spaces; a classification
    example's text, and its pair as a second text when it has one."""
    if isinstance(example, NerExample):
        return [" ".join(example.tokens)]
    return [example.text] + ([example.text_pair] if example.text_pair else [])


def split_texts(cfg: TaskConfig, split: str, streaming: bool = True) -> tuple[str, list[str]]:
    """Every text of one split of a task, read exactly as ``load_task`` reads it (same files, aliases,
    formats, fields and checks) but all examples, no subsample; for decontamination and its audit.

    Args:
        cfg: the task's config.
        split: ``train``, ``validation`` or ``test`` (``dev``/``valid``/``val`` files count as validation).
        streaming: stream a hub dataset instead of downloading it (a ``save_to_disk`` folder is read as is).

    Returns:
        ``(source, texts)``: the file (or ``dataset[split]``) read and ``example_texts`` of every example.

    Raises:
        DataError: a missing split, file or column, or a bad line (the message names the file and line).
    """
    if cfg.format == "hf":
        ds = _open_hf(cfg, streaming=streaming)
        name = _hf_split_name(ds, split, cfg)
        source = f"{cfg.path}[{name}]"
        examples = _hf_rows(cfg, ds[name], source)
    else:
        path = find_split_file(Path(cfg.path), split, cfg.format)
        source, examples = str(path), READERS[cfg.format](path, cfg)
    return source, [text for example in examples for text in example_texts(example)]
