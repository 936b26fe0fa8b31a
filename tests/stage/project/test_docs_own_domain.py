"""docs/own-domain.md: the project its guide lays out, with the template YAML it prints, validates and plans."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from support.docs import own_domain_project

REPO = Path(__file__).resolve().parents[3]
GUIDE = REPO / "docs" / "own-domain.md"


def test_the_guides_project_validates_and_plans(tmp_path, monkeypatch, capsys, caplog):
    import logging

    from domainbert.cli import run_cli

    caplog.set_level(logging.INFO, logger="domainbert")

    own_domain_project(tmp_path / "contracts-project")
    monkeypatch.chdir(tmp_path / "contracts-project")
    monkeypatch.delenv("DOMAINBERT_HOME", raising=False)
    assert run_cli(["validate", "contracts"]) == 0
    out = capsys.readouterr().out
    guide_file = tmp_path / "contracts-project" / "domains" / "contracts.yaml"
    assert f"ok  contracts (offline): 1 source(s), arms continued, control, tapt, tasks clause-type, parties-ner [{guide_file}]" in out
    assert run_cli(["validate", "contracts", "--profile", "full"]) == 0
    assert run_cli(["plan", "contracts", "--no-estimate"]) == 0
    out = capsys.readouterr().out
    assert f"domain file: {guide_file} (profile offline)" in caplog.text  # every command says which file it read
    assert "corpus" in out and "will run" in out and "pretrain tapt" in out
    # The template's count of fine-tuning runs is plan's (the warmed base's `original` included).
    [runs] = re.findall(r"x 2 tasks = (\d+) \(and a floor per task\)", GUIDE.read_text(encoding="utf-8"))
    assert f"{runs} runs + 2 floor(s)" in out, out
    # General text that is all forgetting set leaves the warm-up nothing: validate says so, as plan would.
    (tmp_path / "contracts-project" / "data" / "general" / "wordnet-glosses-00.jsonl.gz").unlink()
    assert run_cli(["validate", "contracts"]) == 2
    assert "no general-domain text left for the base warm-up" in capsys.readouterr().err
    shutil.copy(REPO / "corpora" / "general" / "wordnet-glosses-00.jsonl.gz", tmp_path / "contracts-project" / "data" / "general")
    # A label the guide's task does not declare is one line naming the file.
    (tmp_path / "contracts-project" / "data" / "tasks" / "parties-ner" / "test.conll").write_text("Acme\tB-ORG\n\n")
    assert run_cli(["validate", "contracts"]) == 2
    assert "parties-ner" in capsys.readouterr().err


def test_the_template_states_every_setting_that_decides_the_cost():
    """Left to their defaults, the warm-up (400 steps, not the cached 140) and TAPT (100 passes) made the
    "minimal" template hours of pretraining on a CPU; each cost setting is written out with what it costs."""
    import yaml

    from domainbert.config.domain import load_domain
    from domainbert.pretrain.step_plan import make_plan

    [template] = re.findall(r"```yaml\n(.*?)```", GUIDE.read_text(encoding="utf-8"), flags=re.S)
    data = yaml.safe_load(template)
    pretrain, shipped = data["pretrain"], load_domain("science").pretrain
    assert pretrain["base_warmup"]["steps"] == shipped.base_warmup.steps  # the offline profiles' cached warm-up
    assert pretrain["tapt"]["epochs"] == shipped.tapt.epochs
    assert pretrain["budget_tokens"] and data["finetune"]["seeds"]
    lines = template.splitlines()
    for key in ("budget_tokens:", "base_warmup:", "tapt:", "seeds:"):
        [at] = [i for i, line in enumerate(lines) if line.strip().startswith(key)]
        assert lines[at - 1].strip().startswith("#"), f"{key} has no sentence on its cost"
    warm = shipped.base_warmup
    assert f"{warm.steps * warm.batch_size * warm.seq_len:,} tokens" in template
    steps = make_plan(shipped.model_copy(update={"budget_tokens": pretrain["budget_tokens"]})).total_steps
    assert f"{steps} steps of {shipped.batch_size} sequences of {pretrain['seq_len']} tokens" in template
