"""The CLI: user errors are one line on stderr, exit code 2, no traceback."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from domainbert.core.paths import domains_dir


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


def test_validate_refuses_a_vocabulary_the_sources_cannot_hold_and_takes_the_size_it_names():
    """The vocabulary stage needs 2 train words per token (``vocab.min_words_per_token``); sources too small for
    that whatever the corpus keeps are one line from ``validate``, with the largest size they can hold, before
    the corpus is built. At that size it passes; one token more, it does not."""
    def refused(size: int) -> str:  # the error line (validate's warnings on the tasks follow it)
        proc = run_cli("validate", "science", f"tokenizer.vocab_size={size}")
        assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
        [line] = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
        assert "science.yaml: tokenizer.vocab_size: the corpus sources hold at most " in line, line
        return line

    line = refused(2_000_000)
    most = int(re.search(r"hold at most ([\d,]+) words", line).group(1).replace(",", ""))
    largest = int(re.search(r"set tokenizer.vocab_size to ([\d,]+) or less", line).group(1).replace(",", ""))
    assert largest == most // 2
    assert run_cli("validate", "science", f"tokenizer.vocab_size={largest}").returncode == 0
    refused(largest + 1)


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


def test_version_prints_the_package_version():
    from domainbert import __version__

    proc = run_cli("--version")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == f"domainbert {__version__}"


def test_unknown_profile_lists_the_profiles_the_file_defines(tmp_path):
    data = yaml.safe_load((domains_dir() / "science.yaml").read_text())
    data["profiles"]["gpu"] = {}
    path = tmp_path / "science.yaml"
    path.write_text(yaml.safe_dump(data))
    proc = run_cli("corpus", str(path), "--profile", "ofline", "--out", str(tmp_path / "run"))
    assert_user_error(proc, "unknown profile 'ofline'", "this domain has: full, gpu, offline, scratch-study")
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "unknown profile" not in run_cli("validate", str(path), "--profile", "gpu").stderr  # a name it has


def _complete(*words: str) -> list[str]:
    env = {**os.environ, "_DOMAINBERT_COMPLETE": "complete_bash", "COMP_WORDS": " ".join(("domainbert", *words)),
           "COMP_CWORD": str(len(words))}
    proc = subprocess.run([sys.executable, "-m", "domainbert.cli"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split()


def test_shell_completion_of_commands_domains_and_profiles(tmp_path):
    assert set(_complete("co")) == {"corpus", "compare"}
    assert _complete("pretrain", "sci") == ["science"]
    assert _complete("pretrain", "science", "--profile", "") == ["full", "offline"]
    # The shell is detected from the process tree (shellingham), so the command runs under bash as a user's
    # would; bash must fork for it ("; exit"), or it would exec the command in its own place.
    proc = subprocess.run(["bash", "-c", '"$0" -m domainbert.cli --show-completion; exit $?', sys.executable],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "_DOMAINBERT_COMPLETE=complete_bash" in proc.stdout, proc.stderr


def test_report_on_a_folder_without_a_run_is_one_line(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    other = tmp_path / "other"
    (other / "notes").mkdir(parents=True)
    (other / "notes" / "todo.txt").write_text("not a run\n")
    missing = tmp_path / "missing" / "run"
    for folder in (empty, other, missing):
        proc = run_cli("report", "science", "--out", str(folder))
        assert_user_error(proc, str(folder), "nothing to report", "corpus/manifest.json",
                          "finetune/<model>/<task>/seed-*/result.json")
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not (folder / "report").exists()
    assert not (tmp_path / "missing").exists()  # refused without creating the folder it was pointed at


def test_compare_refuses_a_run_given_twice(tmp_path):
    for name in ("one", "two"):
        (tmp_path / name / "science").mkdir(parents=True)
    # two folders of one name would be one domain: the second would replace the first without a word
    assert_user_error(run_cli("compare", str(tmp_path / "one" / "science"), str(tmp_path / "two" / "science"),
                              "--out", str(tmp_path / "page")), "two runs are named 'science'")
    # one folder under two names would count its results as two domains' evidence
    assert_user_error(run_cli("compare", f"a={tmp_path / 'one' / 'science'}", f"b={tmp_path / 'one' / 'science'}",
                              "--out", str(tmp_path / "page")), "the same run is given twice, as 'a' and 'b'")


def test_compare_refuses_an_empty_folder(tmp_path):
    """An empty folder (a typo's fresh one, a run not made yet) is no run: one line naming it, exit 2, no page."""
    for name in ("science", "law"):
        (tmp_path / name).mkdir()
    proc = run_cli("compare", str(tmp_path / "science"), str(tmp_path / "law"), "--out", str(tmp_path / "page"))
    assert_user_error(proc, f"{tmp_path / 'science'}: no run of 'science' here")
    assert len([line for line in proc.stderr.splitlines() if line.strip()]) == 1
    assert not (tmp_path / "page").exists()


def test_help_prints_the_docstrings_examples_as_written():
    """Help is plain text: an example holding brackets (an override's list) is not read as markup and eaten."""
    proc = run_cli("validate", "--help")
    assert proc.returncode == 0, proc.stderr
    assert '"pretrain.arms=[continued,scratch]"' in proc.stdout, proc.stdout
    assert "``" not in run_cli("pretrain", "--help").stdout


def test_a_misused_option_is_a_plain_line_naming_it():
    proc = run_cli("finetune", "science", "--bogus")
    assert proc.returncode == 2
    assert "No such option: --bogus" in proc.stderr and "╭" not in proc.stderr, proc.stderr
