"""The route from a result file to the page's "Verdict:" line stays the four modules docs/architecture.md draws:
each module of the route imports, from the report package, only other modules of the route and the statistics it
calls (none writes the page's sentences), and the drawing names those four modules in that order."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
REPORT = ROOT / "src" / "domainbert" / "report"
ROUTE = ("inputs", "results", "rows", "verdict")
STATISTICS = {"stats", "paired", "draws", "power", "model_comparison"}  # called on the way: numbers in, numbers or
# model_comparison's frozen types out
# what each route module may import from the report package: other route modules (results builds rows' types) and
# the statistics it calls
ALLOWED = {
    "inputs": set(),
    "results": {"inputs", "rows", "stats", "model_comparison"},
    "rows": {"draws", "power", "model_comparison"},
    "verdict": {"inputs", "results", "rows"},
}


def report_imports(source: str) -> set[str]:
    """The report modules a module's source imports (at its top or inside a function)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "domainbert.report":
                out |= {a.name for a in node.names}
            elif node.module.startswith("domainbert.report."):
                out.add(node.module.split(".")[2])
        elif isinstance(node, ast.Import):
            out |= {a.name.split(".")[2] for a in node.names if a.name.startswith("domainbert.report.")}
    return out


@pytest.mark.parametrize("index", range(len(ROUTE)))
def test_each_route_module_imports_only_the_route_before_it_and_its_statistics(index: int) -> None:
    module = ROUTE[index]
    imported = report_imports((REPORT / f"{module}.py").read_text(encoding="utf-8"))
    assert imported <= ALLOWED[module], f"{module} imports {imported - ALLOWED[module]} from off the route"


def test_the_check_fails_on_a_module_that_takes_a_sentence_from_off_the_route() -> None:
    source = "from domainbert.report.rows import ScoreRow\nfrom domainbert.report.summary import points\n"
    assert report_imports(source) - set(ROUTE) == {"summary"}
    inner = "def f():\n    from domainbert.report import references\n"
    assert report_imports(inner) == {"references"}


def test_architecture_md_draws_the_route_s_four_modules_in_order() -> None:
    doc = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = doc.split('"Verdict:" line passes through four modules:', 1)[1].split("```")[1]
    steps = re.findall(r"^\s*-> report\.(\w+)", block, flags=re.M)
    assert tuple(steps) == ROUTE
    assert set().union(*ALLOWED.values()) <= set(ROUTE) | STATISTICS
