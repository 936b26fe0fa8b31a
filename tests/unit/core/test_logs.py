"""One log format: every domainbert process prints its lines as Prefect's console does (``core.logs``)."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from domainbert.core import logs


def _prefect_standard() -> dict:
    import prefect.logging

    settings = yaml.safe_load((Path(prefect.logging.__file__).parent / "logging.yml").read_text())
    return settings["formatters"]["standard"]


def test_the_format_is_prefects_standard_console_format() -> None:
    standard = _prefect_standard()
    assert (logs.LOG_FORMAT, logs.LOG_DATEFMT) == (standard["format"], standard["datefmt"])


def test_a_configured_process_prints_the_line_prefects_formatter_prints(tmp_path: Path) -> None:
    from prefect.logging.formatters import PrefectFormatter

    code = (
        "import logging; from domainbert.core import logs; logs.configure(); "
        "logging.getLogger('domainbert.finetune.stage').info('fine-tuning %s', 'base'); "
        "logging.getLogger('domainbert').debug('not shown at INFO')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    (line,) = proc.stderr.splitlines()
    standard = _prefect_standard()
    record = logging.LogRecord(
        "domainbert.finetune.stage", logging.INFO, __file__, 1, "fine-tuning %s", ("base",), None
    )
    expected = PrefectFormatter(format=standard["format"], datefmt=standard["datefmt"]).format(record)
    stamp = r"\d\d:\d\d:\d\d\.\d{3}"
    assert re.fullmatch(stamp + r" \| INFO    \| domainbert\.finetune\.stage - fine-tuning base", line), line
    assert re.sub(stamp, "T", line) == re.sub(stamp, "T", expected)


def test_a_worker_rank_goes_before_the_logger_name() -> None:
    code = (
        "import logging; from domainbert.core import logs; logs.configure(logging.WARNING, prefix='rank 1 '); "
        "logging.getLogger('domainbert.x').warning('w'); logging.getLogger('domainbert.x').info('i')"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert re.fullmatch(r"\d\d:\d\d:\d\d\.\d{3} \| WARNING \| rank 1 domainbert\.x - w\n", proc.stderr), proc.stderr


def test_verbose_shows_domainberts_debug_lines_in_every_process_it_starts() -> None:
    code = (
        "import logging; from domainbert.core import logs; logs.configure(); "
        "logging.getLogger('domainbert.finetune.ner').debug('3 repaired'); logging.getLogger('other').debug('no')"
    )
    quiet = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    env = {**os.environ, logs.VERBOSE_ENV: "1"}
    verbose = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert quiet.stderr == ""
    assert re.fullmatch(r"\S+ \| DEBUG   \| domainbert\.finetune\.ner - 3 repaired\n", verbose.stderr), verbose.stderr


def test_a_prefect_stage_shows_debug_lines_only_under_verbose(monkeypatch) -> None:
    from domainbert.flows.tasks import stage_logs_to_prefect

    target = logging.getLogger("domainbert")
    for verbose, level in (("", logging.INFO), ("1", logging.DEBUG)):
        monkeypatch.setenv(logs.VERBOSE_ENV, verbose)
        with stage_logs_to_prefect():
            assert target.getEffectiveLevel() == level
