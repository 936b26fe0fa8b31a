"""The domain config is resolved once per run: saved in the run folder, carried to every task as data, and
an edit of the YAML during a run does not reach that run's later stages."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from domainbert.config.domain import RESOLVED_CONFIG
from domainbert.flows.options import RunSpec, start_run
from support.flows import REPO, base_env, stop_group


def test_a_resolved_spec_rebuilds_the_run_config_without_the_yaml(tiny_domain: Path, tmp_path: Path) -> None:
    spec = start_run(RunSpec(domain=str(tiny_domain), overrides=["pretrain.max_steps=3"], out=str(tmp_path / "r")))
    saved = json.loads((tmp_path / "r" / RESOLVED_CONFIG).read_text())
    assert saved["domain_file"] == str(tiny_domain.resolve()) and saved["overrides"] == ["pretrain.max_steps=3"]
    assert saved["profile"] == "offline" and saved["config"]["pretrain"]["max_steps"] == 3
    # What a remote worker receives: JSON only, the YAML gone.
    tiny_domain.unlink()
    remote = RunSpec.model_validate(json.loads(json.dumps(spec.model_dump(mode="json"))))
    assert remote.config() == spec.config() and remote.config().pretrain.max_steps == 3
    assert start_run(remote) == remote  # a stage flow inside the run does not resolve or write again


@pytest.mark.slow
def test_editing_the_yaml_during_a_run_leaves_its_later_stages_alone(
        sqlite_server: tuple[str, Path], tiny_domain: Path, tmp_path: Path) -> None:
    url, home = sqlite_server
    out = tmp_path / "run"
    log = tmp_path / "run.log"
    domainbert = str(Path(sys.executable).with_name("domainbert"))
    with open(log, "wb") as f:
        proc = subprocess.Popen([domainbert, "run", str(tiny_domain), "finetune.floor=false", "--out", str(out)],
                                stdout=f, stderr=subprocess.STDOUT, env=base_env(home, url), cwd=REPO,
                                start_new_session=True)
    edited = False
    try:
        deadline = time.monotonic() + 600
        while proc.poll() is None and time.monotonic() < deadline:
            if not edited and (out / "corpus" / "_domainbert.json").is_file():
                # The corpus is built, the pretraining and fine-tuning stages are still to come.
                assert not (out / "pretrain" / "continued" / "summary.json").exists()
                text = tiny_domain.read_text()
                tiny_domain.write_text(text.replace("max_steps: 2", "max_steps: 3").replace("epochs: 1", "epochs: 2"))
                edited = True
            time.sleep(0.05)
        rc = proc.wait(timeout=900)
    finally:
        stop_group(proc)
    assert rc == 0, log.read_text(errors="replace")[-5000:]
    assert edited
    from domainbert.config.domain import load_domain

    now = load_domain(tiny_domain)
    assert (now.pretrain.max_steps, now.finetune.epochs) == (3, 2)  # the edit took effect in the file
    saved = json.loads((out / RESOLVED_CONFIG).read_text())["config"]
    assert (saved["pretrain"]["max_steps"], saved["finetune"]["epochs"]) == (2, 1)
    summary = json.loads((out / "pretrain" / "continued" / "summary.json").read_text())
    assert summary["steps"] == 2
    record = json.loads((out / "finetune" / "continued" / "terms-ner" / "seed-1" / "_domainbert.json").read_text())
    assert record["config"]["finetune"]["epochs"] == 1
