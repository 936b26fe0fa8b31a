"""The project docs/own-domain.md lays out, filled with a little of the shipped data. Not a test module."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
GUIDE = REPO / "docs" / "own-domain.md"


def own_domain_project(root: Path) -> None:
    """The layout of section 1, filled with a little of the shipped data."""
    [template] = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    (root / "domains").mkdir(parents=True)
    (root / "domains" / "contracts.yaml").write_text(template)
    data = root / "data"
    (data / "corpus").mkdir(parents=True)
    # The first 450 shipped licence texts (about half a million words): a WordPiece trainer finds the template's
    # 8,000 tokens in about 400 of them (50 make 4,758); ``validate`` weighs the words against the files' size
    with gzip.open(REPO / "corpora" / "law" / "licenses.jsonl.gz", "rt", encoding="utf-8") as f:
        lines = [json.dumps({"text": json.loads(line)["text"]}) for line, _ in zip(f, range(450), strict=False)]
    (data / "corpus" / "part-0.jsonl.gz").write_bytes(gzip.compress(("\n".join(lines) + "\n").encode()))
    shutil.copy(REPO / "corpora" / "vocab" / "bert-base-uncased-vocab.txt", data / "bert-base-uncased-vocab.txt")
    (data / "general").mkdir()
    for name in ("wordnet-glosses-00.jsonl.gz", "wordnet-glosses-01.jsonl.gz"):  # one is the forgetting set
        shutil.copy(REPO / "corpora" / "general" / name, data / "general")
    labels = ["termination", "payment", "confidentiality", "other"]
    cls = data / "tasks" / "clause-type"
    cls.mkdir(parents=True)
    for split in ("train", "validation", "test"):
        rows = [json.dumps({"text": f"{split} clause {i} on {labels[i % 4]}", "label": labels[i % 4]}) for i in range(8)]
        (cls / f"{split}.jsonl").write_text("\n".join(rows) + "\n")
    ner = data / "tasks" / "parties-ner"
    ner.mkdir(parents=True)
    for split in ("train", "validation", "test"):
        (ner / f"{split}.conll").write_text(f"Acme\tB-PARTY\nCorp\tI-PARTY\nshall\tO\n{split}\tO\n\nThe\tO\nBuyer\tB-PARTY\n{split}\tO\n\n")
