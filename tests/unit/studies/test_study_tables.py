"""Every study file's score tables are what ``studies/rescore.py --table`` prints from the committed score files,
and every committed score file is read by some study file's table.

A table is a fenced block whose first line is the command (``$ python studies/rescore.py FILE... --table``) and
whose other lines are its output; the test runs the command's code and compares line by line.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
STUDIES = ROOT / "studies"
BLOCK = re.compile(r"^```\n\$ python studies/rescore\.py (?P<args>[^\n]*)\n(?P<table>.*?)\n```$", re.M | re.S)
NAMED = re.compile(r"studies/scores/[A-Za-z0-9*._-]+\.json\.gz")


def tables(md: Path) -> list[tuple[list[str], str]]:
    return [(shlex.split(m.group("args")), m.group("table")) for m in BLOCK.finditer(md.read_text(encoding="utf-8"))]


def rescored(args: list[str]) -> str:
    sys.path.insert(0, str(ROOT))
    from studies.rescore import merged_runs, score_table

    assert args[-1] == "--table", args
    files, renames, seeds, rest = [], [], None, args[:-1]
    while rest:
        arg = rest.pop(0)
        if arg == "--rename":
            renames.append(rest.pop(0))
        elif arg == "--seeds":
            seeds = [int(s) for s in rest]
            rest = []
        else:
            files.append(ROOT / arg)
    _, runs = merged_runs(files, renames)
    if seeds:
        runs = [r for r in runs if r["seed"] in seeds or r["model"] == "floor"]
    return score_table(runs)


STUDY_FILES = sorted(STUDIES.glob("*.md"))


@pytest.mark.parametrize("md", [p for p in STUDY_FILES if tables(p)], ids=lambda p: p.name)
def test_each_table_of_a_study_file_is_its_score_file_rescored(md: Path) -> None:
    for args, table in tables(md):
        assert rescored(args) == table, f"{md.name}: python studies/rescore.py {' '.join(args)}"


@pytest.mark.parametrize("md", STUDY_FILES, ids=lambda p: p.name)
def test_every_score_file_a_study_names_has_its_table_there(md: Path) -> None:
    named: set[str] = set()
    for ref in NAMED.findall(md.read_text(encoding="utf-8")):
        if "*" in ref:
            named.update(p.relative_to(ROOT).as_posix() for p in ROOT.glob(ref))
        else:
            named.add(ref)
    tabled = {a for args, _ in tables(md) for a in args if a.startswith("studies/scores/")}
    assert (ROOT / "studies" / "scores").is_dir()
    assert named <= tabled, sorted(named - tabled)
    assert all((ROOT / name).is_file() for name in named), sorted(n for n in named if not (ROOT / n).is_file())


def test_every_committed_score_file_is_read_by_a_study_file() -> None:
    committed = {p.relative_to(ROOT).as_posix() for p in (STUDIES / "scores").glob("*.json.gz")}
    tabled = {a for md in STUDY_FILES for args, _ in tables(md) for a in args if a.startswith("studies/scores/")}
    assert committed and committed == tabled, (sorted(committed - tabled), sorted(tabled - committed))


def test_the_command_line_prints_the_same_table(tmp_path: Path) -> None:
    md = STUDIES / "01-science-vs-general.md"
    ((args, table),) = tables(md)
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run([sys.executable, str(STUDIES / "rescore.py"), *args], cwd=ROOT, capture_output=True,
                         text=True, check=True, env=env)
    assert out.stdout.rstrip("\n") == table
    assert "| science-terms-ner | continued | 22 |" in table  # study 1's 22 paired seeds, as its answer says
