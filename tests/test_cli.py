"""The CLI: user errors are one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

from domainbert.paths import domains_dir


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "domainbert.cli", *args], capture_output=True, text=True,
                          cwd=cwd, env={**os.environ, "DOMAINBERT_LOG_LEVEL": "WARNING"}, timeout=120)


def assert_user_error(proc: subprocess.CompletedProcess, *fragments: str) -> None:
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in proc.stderr, (fragment, proc.stderr)


def test_validate_all_domains_succeeds():
    proc = run_cli("validate")
    assert proc.returncode == 0, proc.stderr
    for name in ("science", "economics", "law", "tweets"):
        assert f"ok  {name}" in proc.stdout


def test_unknown_domain(tmp_path):
    assert_user_error(run_cli("corpus", "astrology", "--out", str(tmp_path)), "unknown domain 'astrology'", "science")


def test_misspelt_override_key(tmp_path):
    assert_user_error(run_cli("pretrain", "science", "pretrain.max_stpes=5", "--out", str(tmp_path)),
                      "science.yaml", "pretrain.max_stpes", "unknown key")


def test_misspelt_key_in_a_domain_file(tmp_path):
    data = yaml.safe_load((domains_dir() / "science.yaml").read_text())
    data["vocab"]["refrences"] = data["vocab"].pop("references")
    path = tmp_path / "typo.yaml"
    path.write_text(yaml.safe_dump(data))
    assert_user_error(run_cli("validate", str(path)), str(path), "vocab.refrences", "unknown key")


def test_missing_domain_file(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    assert_user_error(run_cli("validate", str(missing)), str(missing), "not found")
