"""The front door stays readable: a short README, no commit hashes in what users read, and a glance figure whose
labels fit and whose key covers no interval.

What a user reads (README.md, docs/**/*.md, the domain YAMLs, prefect.yaml, docker-compose.yml, the Makefile)
names no commit of this repository: measured figures and their commits live in bench/results/ and studies/.
A hex word is a commit hash only if git knows it as a commit, so a content hash that looks like one passes.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path

import pytest

from domainbert.report import answer_figure as answer
from domainbert.report.rows import Comparison, FamilyWise, ScoreRow

REPO = Path(__file__).resolve().parents[3]
README_LIMIT = 6000  # characters as `wc -c` counts them (bytes of UTF-8: "±" is two)
LINE_LIMIT = 300  # characters on one line of prose (outside code blocks)
HEX_WORD = re.compile(r"\b[0-9a-f]{7,40}\b")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def readme_problems(text: str) -> list[str]:
    """What makes a README too long to read at the door: its size, and prose lines over the limit."""
    size = len(text.encode("utf-8"))
    problems = [f"{size:,} characters (bytes), over {README_LIMIT:,}"] if size > README_LIMIT else []
    for line in FENCE.sub("", text).splitlines():
        if len(line) > LINE_LIMIT:
            problems.append(f"a line of {len(line)} characters: {line[:60]}...")
    return problems


def user_texts() -> list[Path]:
    names = ["README.md", "prefect.yaml", "docker-compose.yml", "Makefile"]
    return (
        [REPO / n for n in names] + sorted((REPO / "docs").rglob("*.md")) + sorted((REPO / "domains").glob("*.yaml"))
    )


def commits_named(text: str) -> set[str]:
    """The hex words of ``text`` that are commits of this repository (asked of git in one call)."""
    words = sorted(set(HEX_WORD.findall(text)))
    if not words:
        return set()
    query = "".join(f"{w}^{{commit}}\n" for w in words)
    done = subprocess.run(
        ["git", "cat-file", "--batch-check"], cwd=REPO, input=query, capture_output=True, text=True, check=True
    )
    answers = done.stdout.splitlines()
    return {w for w, a in zip(words, answers, strict=True) if a.split()[1:2] == ["commit"]}


@pytest.fixture(scope="module")
def git_history() -> None:
    inside = subprocess.run(["git", "rev-parse", "--is-inside-work-tree"], cwd=REPO, capture_output=True, text=True)
    if inside.returncode != 0 or inside.stdout.strip() != "true":
        pytest.skip("not a git checkout: no commits to recognise")


def test_the_readme_is_short_and_its_lines_are_readable():
    assert readme_problems((REPO / "README.md").read_text(encoding="utf-8")) == []


def test_a_long_readme_or_a_long_line_is_caught():
    assert readme_problems("a short line of prose.\n" * 300) == ["6,900 characters (bytes), over 6,000"]
    assert readme_problems("±\n" * 2001) == ["6,003 characters (bytes), over 6,000"]  # 4,002 letters, as wc -c counts
    long_cell = "| `make demo` | the demo | " + "19 min 31 s on one CPU, " * 15 + "|"
    assert len(readme_problems(f"# x\n\n{long_cell}\n")) == 1
    assert readme_problems("```text\n" + "x" * 400 + "\n```\n") == []  # a printed page is shown as printed


def test_no_user_text_names_a_commit(git_history):
    named = {
        f"{p.relative_to(REPO)}: {', '.join(sorted(c))}"
        for p in user_texts()
        if (c := commits_named(p.read_text(encoding="utf-8")))
    }
    assert not named, "commit hashes belong in bench/results/ or studies/, not in:\n" + "\n".join(sorted(named))


def test_a_commit_is_recognised_and_a_content_hash_is_not(git_history):
    head = subprocess.run(
        ["git", "rev-parse", "--short=7", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
    ).stdout.strip()
    content = hashlib.sha1(b"a file's content, not a commit").hexdigest()
    assert commits_named(f"measured at {head} (sha1 {content}, 1000000 tokens)") == {head}


def _drawn(tmp_path: Path, monkeypatch, rows: int) -> object:
    """The answer figure of a page like the demo's (``rows`` arms on one task), as drawn and saved."""
    kept = {}
    save = answer.save_png

    def keep(fig, path, **kw):
        kept["fig"] = fig
        return save(fig, path, **kw)

    monkeypatch.setattr(answer, "save_png", keep)
    task = "science-terms-ner"
    scores = [
        ScoreRow(task, "ner", "f1", m, (1, 2, 3, 4, 5), 5, 1, (v,) * 5, v, 0.0, 0, 0, None)
        for m, v in [("base", 0.314), ("original", 0.308), ("floor", 0.207)]
    ]
    arms = [f"arm-{i}" for i in range(rows)]
    comparisons = [
        Comparison(
            task=task,
            metric="f1",
            model=arm,
            reference="base",
            confidence=0.95,
            collapsed={arm: 1} if i == 2 else {},
            runs={arm: 5, "base": 5},
            diff=0.003 + 0.004 * i,
            ci_low=-0.008 + 0.004 * i,
            ci_high=0.012 + 0.004 * i,
            n_seeds=5,
            p_value=0.04 if i == 1 else 0.5,
            unadjusted="no significant difference",
            family=FamilyWise(
                comparisons=2 * rows,
                p_holm=0.04 if i == 1 else 0.9,
                significant=i == 1,
                level=0.975,
                low=-0.011 + 0.004 * i,
                high=0.019 + 0.004 * i,
                detectable=0.019,
            ),
        )
        for i, arm in enumerate(arms)
    ]
    assert answer.answer_figure(scores, comparisons, arms, tmp_path) == "answer.png"
    return kept["fig"]


@pytest.mark.parametrize("rows", [2, 3])
def test_the_answer_figure_keeps_its_labels_in_the_picture_and_its_key_off_the_intervals(tmp_path, monkeypatch, rows):
    fig = _drawn(tmp_path, monkeypatch, rows)
    renderer = fig.canvas.get_renderer()
    page = fig.bbox
    for ax in (a for a in fig.axes if a.get_visible()):
        label = ax.xaxis.label.get_window_extent(renderer)
        assert page.x0 <= label.x0 and label.x1 <= page.x1, f"the axis label is cut: {ax.xaxis.label.get_text()!r}"
        key = ax.get_legend().get_window_extent(renderer)
        assert page.x0 <= key.x0 and key.x1 <= page.x1 and page.y0 <= key.y0, "the key is cut"
        assert not key.overlaps(ax.get_window_extent(renderer)), "the key covers the plotted intervals"
        texts = [t.get_text() for t in ax.get_legend().get_texts()]
        assert {"95% interval, survives Holm", "95% interval, does not", "family-wise interval"} <= set(texts)
        assert ("collapsed runs" in texts) == (rows > 2)
