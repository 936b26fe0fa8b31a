"""The Makefile's setup recipe as make expands it (``make -n``: the commands printed, none run)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]

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


def test_the_environment_is_byte_compiled_once_on_every_core_after_pip(tmp_path: Path) -> None:
    """pip installs without compiling; one step after them compiles the environment's packages with a worker
    per core (``workers=0``), so a process's first imports find their bytecode."""
    venv = tmp_path / "venv"
    done = subprocess.run(["make", "-n", "setup", f"VENV={venv}"], cwd=REPO, capture_output=True, text=True,
                          check=True)
    lines = done.stdout.replace("\\\n", " ").splitlines()
    installs = [i for i, line in enumerate(lines) if " -m pip install " in line and "--upgrade pip" not in line]
    assert installs and all("--no-compile" in lines[i] for i in installs)
    [compile_step] = [i for i, line in enumerate(lines) if "COMPILE_ENV" in line]
    assert compile_step > max(installs) and lines[compile_step].startswith(f"{venv}/bin/python -c")
    shown = subprocess.run(["make", "-s", "-f", "-", "show"], cwd=REPO, capture_output=True, text=True, check=True,
                           input="include Makefile\nshow:\n\t@echo \"$$COMPILE_ENV\"\n").stdout
    assert "compileall.compile_dir(" in shown and "workers=0" in shown and 'get_path("purelib")' in shown
