"""docs/own-domain.md: the project its guide lays out, with the template YAML it prints, validates and plans."""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
GUIDE = REPO / "docs" / "own-domain.md"


def _project(root: Path) -> None:
    """The layout of section 1, filled with a little of the shipped data."""
    [template] = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    (root / "domains").mkdir(parents=True)
    (root / "domains" / "contracts.yaml").write_text(template)
    data = root / "data"
    (data / "corpus").mkdir(parents=True)
    lines = [json.dumps({"text": f"This agreement may be terminated by either party upon notice number {i}."})
             for i in range(50)]
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


def test_the_guides_project_validates_and_plans(tmp_path, monkeypatch, capsys, caplog):
    import logging

    from domainbert.cli import run_cli

    caplog.set_level(logging.INFO, logger="domainbert")

    _project(tmp_path / "contracts-project")
    monkeypatch.chdir(tmp_path / "contracts-project")
    monkeypatch.delenv("DOMAINBERT_HOME", raising=False)
    assert run_cli(["validate", "contracts"]) == 0
    out = capsys.readouterr().out
    guide_file = tmp_path / "contracts-project" / "domains" / "contracts.yaml"
    assert f"ok  contracts (offline): 1 source(s), arms continued, tapt, tasks clause-type, parties-ner [{guide_file}]" in out
    assert run_cli(["validate", "contracts", "--profile", "full"]) == 0
    assert run_cli(["plan", "contracts", "--no-estimate"]) == 0
    out = capsys.readouterr().out
    assert f"domain file: {guide_file} (profile offline)" in caplog.text  # every command says which file it read
    assert "corpus" in out and "will run" in out and "pretrain tapt" in out
    # General text that is all forgetting set leaves the warm-up nothing: validate says so, as plan would.
    (tmp_path / "contracts-project" / "data" / "general" / "wordnet-glosses-00.jsonl.gz").unlink()
    assert run_cli(["validate", "contracts"]) == 2
    assert "no general-domain text left for the base warm-up" in capsys.readouterr().err
    shutil.copy(REPO / "corpora" / "general" / "wordnet-glosses-00.jsonl.gz", tmp_path / "contracts-project" / "data" / "general")
    # A label the guide's task does not declare is one line naming the file.
    (tmp_path / "contracts-project" / "data" / "tasks" / "parties-ner" / "test.conll").write_text("Acme\tB-ORG\n\n")
    assert run_cli(["validate", "contracts"]) == 2
    assert "parties-ner" in capsys.readouterr().err
