"""Builders of the corpus stage tests: two small sources with known duplicates, short documents and one
evaluation text, the science domain over them, and the bytes of a built corpus. Not a test module."""

from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

from domainbert.config.corpus import CorpusConfig
from domainbert.config.domain import load_domain
from domainbert.config.finetune import TaskConfig

WORDS = ("system data program memory network compiler process file user language code object function value "
         "server client protocol kernel thread queue cache disk register pointer array string type class method "
         "module library interface query index table record field key hash tree graph node edge path").split()


def doc(rng: random.Random, n: int = 40) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)) + "."


def make_inputs(tmp_path: Path) -> dict[str, int]:
    """Two sources with known exact duplicates, near duplicates, short docs and one eval text."""
    rng = random.Random(7)
    a = [doc(rng) for _ in range(300)]
    b = [doc(rng) for _ in range(100)]
    b += a[:10]  # 10 exact duplicates across sources (case and spacing differ)
    b = b[:100] + [t.upper().replace(" ", "  ") for t in a[:10]]
    near = [" ".join(t.split()[:-1] + ["endword."]) for t in a[10:20]]  # 10 near duplicates
    short = ["too short"] * 5
    eval_text = a[20]
    with gzip.open(tmp_path / "a.jsonl.gz", "wt") as f:
        f.writelines(json.dumps({"id": f"a{i}", "text": t}) + "\n" for i, t in enumerate(a))
    (tmp_path / "b.txt").write_text("\n".join(b + near + short) + "\n")
    task = tmp_path / "task"
    task.mkdir()
    for split in ("train", "validation", "test"):
        with gzip.open(task / f"{split}.jsonl.gz", "wt") as f:
            f.write(json.dumps({"text": eval_text if split == "test" else "other text", "label": "x"}) + "\n")
    return {"in": 300 + 100 + 10 + 10 + 5, "exact": 10, "near": 10, "short": 5, "contaminated": 1}


def corpus_cfg(tmp_path: Path, **corpus_kw):
    base = load_domain("science")
    corpus = CorpusConfig.model_validate({
        "sources": [{"type": "local", "name": "a", "paths": [str(tmp_path / "a.jsonl.gz")]},
                    {"type": "local", "name": "b", "paths": [str(tmp_path / "b.txt")], "format": "text_lines"}],
        "filters": [{"name": "normalize_whitespace_v1"}, {"name": "min_length_v1", "options": {"min_words": 5}},
                    {"name": "gopher_repetition_v1", "options": {"top_n_grams": {}}}],
        "dedup": {"threshold": 0.7, "ngram": 3},
        "decontamination": {"ngram": 8},
        "validation_fraction": 0.1, "shard_documents": 60, "workers": 1, **corpus_kw})
    task = TaskConfig(name="toy", type="classification", format="jsonl", path=str(tmp_path / "task"), labels=["x"])
    return base.model_copy(update={"corpus": corpus, "finetune": base.finetune.model_copy(update={"tasks": [task]})})


def shard_bytes(corpus_dir: Path) -> dict[str, bytes]:
    files = sorted(corpus_dir.glob("*/shard-*.parquet")) + [corpus_dir / "manifest.json"]
    return {p.relative_to(corpus_dir).as_posix(): p.read_bytes() for p in files}


def small_domain(folder: Path, docs: list[str], tasks: list, **decon):
    """The science domain with ``docs`` (written under ``folder``) as its only source (no filters, no near dedup,
    one worker) and ``tasks`` as its fine-tuning tasks."""
    path = folder / "docs.jsonl.gz"
    with gzip.open(path, "wt") as f:
        f.writelines(json.dumps({"id": f"doc{i}", "text": t}) + "\n" for i, t in enumerate(docs))
    base = load_domain("science")
    corpus = CorpusConfig.model_validate({
        "sources": [{"type": "local", "name": "docs", "paths": [str(path)]}],
        "filters": [], "dedup": {"near": False}, "decontamination": {"ngram": 8, **decon},
        "validation_fraction": 0.1, "workers": 1})
    return base.model_copy(update={"corpus": corpus, "finetune": base.finetune.model_copy(update={"tasks": tasks})})
