"""Every repository path the docs name exists: README.md, docs/*.md, bench/README.md, studies/README.md, the
domain files' comments, the Makefile, and the module docstrings and comments under src/, flows/, bench/ and
studies/.

A path is a word that starts with one of the repository's top folders (``studies/``, ``bench/``, ``docs/``,
``deploy/``, ``corpora/``, ``src/``, ``flows/``, ``domains/``, ``tests/``) and is not itself part of a longer
path; a link's target in a Markdown file is read relative to that file. Left out: what a run writes (``runs/``,
the JSON and figures under ``bench/results/``, which git ignores) and patterns (``<name>``, ``*``, ``{x}``,
``...``).
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
TOP = ("studies", "bench", "docs", "deploy", "corpora", "src", "flows", "domains", "tests")
PATH = re.compile(r"(?<![\w./~$-])(?:" + "|".join(TOP) + r")/[\w./-]*")
LINK = re.compile(r"\]\((?!https?:|mailto:|#)([^)\s]+)\)")
PATTERN = re.compile(r"[<*{]|\.\.\.|…")
# Files a doc tells the reader to write, not files of the repository.
EXAMPLES = {"domains/contracts.yaml"}  # docs/own-domain.md's worked example


def exists(name: str) -> bool:
    """The path, or the module a dotted name is in (``bench/pretrain.loss_fell``, ``bench/pretrain_recipes``)."""
    module = name.split(".", 1)[0]
    return any((ROOT / candidate).exists() for candidate in (name, name + ".py", module + ".py"))


def python_prose(path: Path) -> str:
    """A module's docstrings (module, classes, functions) and its comments."""
    source = path.read_text(encoding="utf-8")
    parts = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                parts.append(doc)
    parts += [t.string for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT]
    return "\n".join(parts)


def yaml_comments(path: Path) -> str:
    return "\n".join(line.split("#", 1)[1] for line in path.read_text(encoding="utf-8").splitlines() if "#" in line)


def sources() -> list[tuple[Path, str]]:
    out = [(p, p.read_text(encoding="utf-8")) for p in
           [ROOT / "README.md", ROOT / "bench" / "README.md", ROOT / "studies" / "README.md",
            *sorted((ROOT / "docs").glob("*.md"))]]
    out += [(p, yaml_comments(p)) for p in sorted((ROOT / "domains").glob("*.yaml"))]
    out.append((ROOT / "Makefile", yaml_comments(ROOT / "Makefile")))
    for top in ("src", "flows", "bench", "studies"):
        out += [(p, python_prose(p)) for p in sorted((ROOT / top).rglob("*.py"))]
    return out


def missing(path: Path, text: str) -> list[str]:
    gone = []
    for match in PATH.finditer(text):
        name = match.group(0).rstrip(".,:;'`\"")
        end = text[match.end():match.end() + 1]
        if PATTERN.search(name) or end in "<*{" and end:
            continue
        if name.startswith("bench/results/") and not name.endswith(".md"):
            continue  # a benchmark's own output (gitignored)
        if name not in EXAMPLES and not exists(name):
            gone.append(name)
    if path.suffix == ".md":
        for target in LINK.findall(text):
            target = target.split("#", 1)[0]
            if target and not PATTERN.search(target) and not (path.parent / target).exists():
                gone.append(f"link {target}")
    return gone


@pytest.mark.parametrize("path,text", sources(), ids=lambda v: str(v.relative_to(ROOT)) if isinstance(v, Path) else "")
def test_every_path_a_doc_names_exists(path: Path, text: str) -> None:
    assert missing(path, text) == []


def test_a_path_that_is_not_there_is_found(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    text = "See studies/no-such-study.md, [the index](studies/README.md) and bench/results/<name>.json."
    assert missing(doc, text) == ["studies/no-such-study.md", "link studies/README.md"]
    assert missing(ROOT / "doc.md", "See studies/README.md and `bench/results/pretrain.json`.") == []


@pytest.mark.parametrize("path", sorted((ROOT / "studies").glob("*.md")) + sorted((ROOT / "bench" / "results").glob("*.md")),
                         ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_of_a_study_or_results_file_resolves(path: Path) -> None:
    """Study and results files keep their history's own paths as written; their links must still resolve."""
    targets = [t.split("#", 1)[0] for t in LINK.findall(path.read_text(encoding="utf-8"))]
    assert [t for t in targets if t and not (path.parent / t).exists()] == []
