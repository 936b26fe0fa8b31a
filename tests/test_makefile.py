"""The Makefile's setup recipe as make expands it (``make -n``: the commands printed, none run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make")


def _pip_installs(venv: Path, *variables: str) -> list[str]:
    done = subprocess.run(["make", "-n", "setup", f"VENV={venv}", *variables], cwd=REPO, capture_output=True,
                          text=True, check=True)
    lines = done.stdout.replace("\\\n", " ").splitlines()  # a recipe line continued with a backslash is one
    return [line for line in lines if " -m pip install " in line]


def test_torch_alone_comes_from_the_index_torch_index_url_names(tmp_path: Path) -> None:
    """Without it pip's configured indexes serve torch (the CPU wheel on local disk where they hold it); with it,
    torch's install names that index and nothing else's does (domainbert's dependencies stay on pip's)."""
    index = "https://example.invalid/whl/cpu"
    named = _pip_installs(tmp_path / "venv", f"TORCH_INDEX_URL={index}")
    [torch_line] = [line for line in named if "torch==2.13.0" in line]
    assert f"--index-url {index}" in torch_line
    assert all("--index-url" not in line for line in named if line is not torch_line)
    plain = _pip_installs(tmp_path / "venv")
    assert len(plain) == len(named) >= 3 and all("--index-url" not in line for line in plain)
