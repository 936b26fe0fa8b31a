"""examples/run_science.py: the five stages the flows wire, called in order without Prefect.

The script runs as a user runs it (a subprocess, from the checkout) on the shipped science data at tiny sizes:
the flow tests' 2-layer, hidden-128 base, 300 FOLDOC documents, 2 pretraining steps an arm, 24 NER sentences,
2 seeds. Its default design is checked against `make demo`'s without running it.
"""

from __future__ import annotations

import ast
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from support.flows import CORPORA, REPO

EXAMPLE = REPO / "examples" / "run_science.py"
# Runs the file as ``python examples/run_science.py ARGS`` does, then says whether anything imported Prefect.
AS_SCRIPT = (
    "import runpy, sys; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__'); "
    "print('prefect imported:', 'prefect' in sys.modules)"
)


def _tiny(base_model: Path) -> list[str]:
    ner = (
        f"{{name: science-terms-ner, type: ner, format: conll, path: {CORPORA}/tasks/science-terms-ner, "
        "labels: [O, B-TERM, I-TERM], tag_scheme: IOB2, max_train_examples: 24, max_eval_examples: 12, "
        "max_test_examples: 12}"
    )
    source = (
        f"{{type: local, name: foldoc, paths: [{CORPORA}/science/foldoc.jsonl.gz], format: jsonl, max_documents: 300}}"
    )
    return [
        f"base_model.name_or_path={base_model}",
        f"corpus.sources=[{source}]",
        "corpus.dedup.num_perm=32",
        "tokenizer.vocab_size=800",
        "vocab.curve_sizes=[800]",
        "vocab.extension.enabled=false",
        *("pretrain.budget_tokens=4096", "pretrain.max_steps=2", "pretrain.seq_len=32", "pretrain.batch_size=4"),
        *("pretrain.checkpoint_every=1", "pretrain.eval_documents=8"),
        f"finetune.tasks=[{ner}]",
        "finetune.seeds=[1, 2]",
        *("finetune.epochs=1", "finetune.batch_size=8", "finetune.max_length=32", "compare.bootstrap_samples=100"),
    ]


@pytest.mark.slow
def test_the_example_runs_every_stage_without_prefect_and_prints_the_verdict(tiny_model: Path, tmp_path: Path):
    out = tmp_path / "run"
    cmd = [sys.executable, "-c", AS_SCRIPT, str(EXAMPLE), "--out", str(out), *_tiny(tiny_model)]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    report = out / "report" / "report.html"
    assert report.is_file()
    assert f"report: {report}" in proc.stdout.splitlines()
    # The answer it prints is the one written beside the page, and its verdict names both of the demo's arms.
    answer = (out / "report" / "answer.txt").read_text(encoding="utf-8").rstrip()
    assert answer and answer in proc.stdout
    verdict = answer[answer.index("Verdict") :]
    assert all(arm in verdict for arm in ("continued", "control")), verdict
    for arm in ("continued", "control"):
        assert (out / "pretrain" / arm / "model").is_dir()
    assert "prefect imported: False" in proc.stdout.splitlines()


def test_the_example_runs_the_demos_design_by_default():
    """Its ``DEMO`` overrides are the ones ``make demo`` gives ``domainbert run science`` (``--workers`` aside)."""
    [recipe] = [
        line for line in (REPO / "Makefile").read_text().splitlines() if "domainbert run science --workers" in line
    ]
    words = shlex.split(recipe.strip())
    demo = [w for w in words[words.index("science") + 1 :] if "=" in w and not w.startswith("-")]
    tree = ast.parse(EXAMPLE.read_text(encoding="utf-8"))
    [value] = [
        node.value for node in tree.body if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "DEMO"
    ]
    assert ast.literal_eval(value) == demo
