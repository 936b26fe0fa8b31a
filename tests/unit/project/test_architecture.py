"""docs/architecture.md stays true: every module is on the map, the map names no module that is gone, and its
layers are the layers import-linter checks (pyproject.toml)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "src" / "domainbert"
DOC = ROOT / "docs" / "architecture.md"


def _sections() -> dict[str, set[str]]:
    """Package -> the module file names its section of the map names (``top`` for the top-level modules)."""
    out: dict[str, set[str]] = {}
    current = None
    for line in DOC.read_text(encoding="utf-8").splitlines():
        heading = re.match(r"^### (?:`domainbert\.(\w+)`|top-level modules)", line)
        if heading:
            current = heading.group(1) or "top"
            out[current] = set()
        elif line.startswith("## "):
            current = None
        elif current and line.startswith("- "):
            out[current] |= set(re.findall(r"`(\w+\.py)`", line))
    return out


def _modules(folder: Path) -> set[str]:
    return {p.name for p in folder.glob("*.py") if p.name != "__init__.py"}


def test_every_module_is_on_the_map_and_the_map_names_only_real_modules():
    sections = _sections()
    packages = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file() and not p.is_symlink())
    assert set(packages) <= set(sections), f"packages without a section: {set(packages) - set(sections)}"
    for package in packages:
        assert sections[package] == _modules(PACKAGE / package), package
    top = _modules(PACKAGE) | _modules(ROOT / "flows")
    assert sections["top"] == top


def test_the_layers_table_is_the_import_linter_layers():
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    layers = next(c for c in contracts if c["type"] == "layers")["layers"]
    rows = [row.split("|") for row in DOC.read_text(encoding="utf-8").splitlines() if re.match(r"^\| \d+ \|", row)]
    table = [re.findall(r"`(domainbert(?:\.\w+)+)`", cells[2]) for cells in rows]  # the package column
    assert [set(names) for names in table] == [{n.strip() for n in layer.split("|")} for layer in layers]
    # every package and top-level module of domainbert stands in some layer
    in_layers = {name.split(".")[1] for names in table for name in names}
    present = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()} | {
        p.stem for p in PACKAGE.glob("*.py") if p.name != "__init__.py"}
    assert present == in_layers
