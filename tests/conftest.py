"""Shared test setup: offline, quiet, small; the lanes' time limits; the fixtures tests share across folders.

Tests write only under tmp_path. The builders these fixtures call live in ``tests/support/`` (plain modules, not
tests; ``tests/`` is on ``sys.path`` because this file sits there), so a test file never imports another one.
The lanes are folders: ``tests/unit/`` (pure functions), ``tests/stage/`` (stages on tiny models) and
``tests/system/`` (servers, signals, DeepSpeed, documented commands, calibration); ``LANE_TIMEOUT_S`` gives the
first two a tighter per-test limit than pyproject's ``timeout``."""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Set before transformers/datasets/prefect are imported by any test module.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")
os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
# One CPU thread for torch (OpenMP, MKL) in each test process and in every process a test starts: the suite runs
# two test processes on a 2-core CPU, and torch's default of one thread per core would put four or more busy
# threads on two cores. A test of the thread defaults themselves unsets these (tests/system/pretrain/).
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# Prefect's home (its ephemeral server's database) per test process: parallel test processes (pytest-xdist)
# never share one SQLite file, and nothing is left in the user's ~/.prefect.
if "PREFECT_HOME" not in os.environ:
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix="domainbert-tests-prefect-")
    atexit.register(shutil.rmtree, os.environ["PREFECT_HOME"], True)


import pytest  # noqa: E402 - after the environment above

# Fixtures of a folder whose tests sit in several lanes (tests/support/fixtures_<folder>.py).
pytest_plugins = ["support.fixtures_report"]


@pytest.fixture(scope="session", autouse=True)
def _machine_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """This machine's cache (``core.paths.machine_cache``: langid tables, the warmed-up base) under the session's
    temporary folder: tests never write to the user's cache, and share one cache among themselves."""
    os.environ["XDG_CACHE_HOME"] = str(tmp_path_factory.mktemp("machine-cache"))


@pytest.fixture(scope="session", autouse=True)
def _stop_prefect_temporary_server():
    """Stop Prefect's temporary API server (started by flows run in this process) while the session's output is
    still open: stopped at exit instead, it logs "Stopping temporary server" to a stream pytest has closed."""
    yield
    if "prefect.server.api.server" in sys.modules:
        from prefect.server.api.server import SubprocessASGIServer

        for server in list(SubprocessASGIServer._instances.values()):
            server.stop()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The documented commands this session ran (tests/system/project/test_documented_commands.py): exit code and time of each,
    or why it was not run, the table a release note quotes."""
    rows: dict[str, dict] = {}
    for reports in terminalreporter.stats.values():
        for report in reports:
            row = dict(getattr(report, "user_properties", ())).get("documented_command")
            if row and getattr(report, "when", "call") in ("call", "setup"):
                rows[row["command"]] = {**rows.get(row["command"], {}), **row}
    if not rows:
        return
    terminalreporter.write_sep("-", "documented commands: exit code, seconds (or why not run)")
    for command, row in rows.items():
        if "exit" in row:
            terminalreporter.write_line(f"{row['exit']:>4} {row['seconds']:>8.1f} s  {command}")
        else:
            terminalreporter.write_line(f"   -        -    {command}  [{row['kind']}: {row['reason']}]")


# Per-test limits (seconds, pytest-timeout) by lane folder; tests/system/ keeps pyproject's ``timeout``. A test that
# sets its own ``@pytest.mark.timeout`` keeps it.
LANE_TIMEOUT_S = {"unit": 60, "stage": 300}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the markers this adds
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Each test under ``tests/<lane>/`` gets its lane's marker (``-m unit``) and its lane's time limit; the tests
    marked slow run first."""
    tests = config.rootpath / "tests"
    for item in items:
        try:
            lane = item.path.relative_to(tests).parts[0]
        except ValueError:
            continue
        if lane in ("unit", "stage", "system"):
            item.add_marker(getattr(pytest.mark, lane))
        if lane in LANE_TIMEOUT_S and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(LANE_TIMEOUT_S[lane]))
    # The slow tests first, each folder's order kept: the test processes (``make test``'s ``--dist worksteal``)
    # then end on short tests, not one process finishing a two-minute test while the other waits.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


# Fixtures shared across folders (each test's lane may differ from its neighbours').


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """300 FOLDOC entries (the pretraining tests' corpus)."""
    from support.pretrain import foldoc_texts

    return foldoc_texts(300)


@pytest.fixture(scope="session")
def base_model(tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> Path:
    """A 2-layer hidden-128 BertForMaskedLM with a WordPiece vocabulary trained on ``texts``."""
    from support.pretrain import tiny_bert, wordpiece_tokenizer

    return tiny_bert(wordpiece_tokenizer(texts), tmp_path_factory.mktemp("base") / "model")


@pytest.fixture(scope="session")
def headless_base(tmp_path_factory: pytest.TempPathFactory, texts: list[str]) -> Path:
    """A tiny BERT saved as a bare ``BertModel`` (pooler, no MLM head), like the offline MiniLM package."""
    import torch
    from transformers import BertConfig, BertModel

    from support.pretrain import wordpiece_tokenizer

    tokenizer = wordpiece_tokenizer(texts)
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=128, pad_token_id=tokenizer.pad_token_id)
    folder = tmp_path_factory.mktemp("headless") / "model"
    BertModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def layout(tmp_path: Path, texts: list[str]):
    """A run folder whose corpus holds ``texts``."""
    from domainbert.core.paths import RunLayout
    from support.pretrain import write_corpus

    lay = RunLayout(tmp_path / "run")
    write_corpus(lay.corpus, texts)
    return lay


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random 2-layer hidden-128 BERT with the fine-tuning tests' WordPiece vocabulary."""
    from support.finetune import build_tiny_bert

    return build_tiny_bert(tmp_path_factory.mktemp("models") / "tiny-bert")


@pytest.fixture(scope="module")
def tasks_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fine-tuning tests' two tiny tasks, ``ner`` and ``cls``."""
    from support.finetune import write_tasks

    return write_tasks(tmp_path_factory.mktemp("tasks"))


@pytest.fixture
def small_domain(tmp_path: Path):
    """``make(docs, tasks, **decontamination)``: the science domain with ``docs`` as its only source (no filters,
    no near dedup, one worker) and ``tasks`` as its fine-tuning tasks."""
    from support.corpus import small_domain as make

    return lambda docs, tasks, **decon: make(tmp_path, docs, tasks, **decon)


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    """The vocab tests' synthetic domain corpus (300 training and 20 validation texts)."""
    from support.vocab import make_texts, write_corpus

    return write_corpus(tmp_path / "corpus", make_texts(300, 1), make_texts(20, 2))


@pytest.fixture
def control_file(tmp_path: Path) -> Path:
    """The vocab tests' general control text: 600 texts without domain words, as JSON lines."""
    from support.vocab import write_control

    return write_control(tmp_path / "general.jsonl")


@pytest.fixture(scope="session")
def tiny_base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 2-layer, hidden-128 BertForMaskedLM with an uncased WordPiece vocab trained on general text."""
    from support.vocab import tiny_base as build

    return build(tmp_path_factory.mktemp("tiny-base"))


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The flow tests' tiny base model."""
    from support.flows import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-model") / "bert-tiny")


@pytest.fixture
def tiny_domain(tmp_path: Path, tiny_model: Path) -> Path:
    """The flow tests' tiny domain YAML over ``tiny_model``."""
    from support.flows import CORPORA, TINY_YAML

    path = tmp_path / "tiny.yaml"
    path.write_text(TINY_YAML.format(corpora=CORPORA, base_model=tiny_model))
    return path


@pytest.fixture(scope="module")
def sqlite_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """``prefect server start`` on SQLite: (API URL, PREFECT_HOME)."""
    from support.flows import prefect_server

    home = tmp_path_factory.mktemp("prefect-sqlite")
    with prefect_server(home, None, home / "server.log") as url:
        yield url, home
