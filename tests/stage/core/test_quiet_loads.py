"""Loading a model prints none of transformers' expected notices (the LOAD REPORT of a new head, the "Loading
weights" bar) unless ``--verbose``; tokenizing long documents for packing prints no "indexing errors" warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from domainbert.core import models

VOCAB = Path(__file__).resolve().parents[3] / "corpora" / "vocab" / "bert-base-uncased-vocab.txt"


@pytest.fixture(scope="module")
def tiny_encoder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 1-layer BERT encoder without an MLM head: loading it as a masked LM makes transformers report keys."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    folder = tmp_path_factory.mktemp("encoder")
    BertModel(BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    BertTokenizerFast(vocab_file=str(VOCAB), do_lower_case=True, model_max_length=16).save_pretrained(folder)
    return folder


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.mark.parametrize("verbose", [False, True])
def test_loading_a_model_is_quiet_unless_verbose(tiny_encoder, capfd, monkeypatch, verbose):
    from transformers.utils import logging as hf_logging

    if verbose:
        monkeypatch.setenv(models.VERBOSE_ENV, "1")
    else:
        monkeypatch.delenv(models.VERBOSE_ENV, raising=False)
    hf_logging.set_verbosity_warning()
    hf_logging.enable_progress_bar()
    records = _Records()
    target = logging.getLogger("transformers")
    target.addHandler(records)
    try:
        models.load_mlm_model(str(tiny_encoder))
    finally:
        target.removeHandler(records)
    shown = "\n".join(records.lines) + capfd.readouterr().err
    assert ("LOAD REPORT" in shown) is verbose, shown
    assert ("Loading weights" in shown) is verbose, shown
    assert hf_logging.get_verbosity() == logging.WARNING and hf_logging.is_progress_bar_enabled()  # restored


def test_packing_tokenizes_long_documents_without_a_length_warning(tiny_encoder):
    from transformers.utils import logging as hf_logging

    from domainbert.pretrain.data import encode_documents

    hf_logging.set_verbosity_warning()
    records = _Records()
    target = logging.getLogger("transformers")
    target.addHandler(records)
    try:
        [(ids, _)] = encode_documents(models.load_tokenizer(tiny_encoder), ["word " * 100])
    finally:
        target.removeHandler(records)
    assert len(ids) == 100
    assert not [line for line in records.lines if "indexing errors" in line], records.lines


SAVE = """
import sys
from transformers import BertConfig, BertModel
from domainbert.core import models
if sys.argv[2] == "quiet":
    models.quiet_libraries()
BertModel(BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                     intermediate_size=64, max_position_embeddings=16)).save_pretrained(sys.argv[1])
"""


@pytest.mark.parametrize("quiet", [True, False])
def test_saving_a_model_shows_no_progress_bar_once_quieted(tmp_path, quiet):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    env["TQDM_MININTERVAL"] = "0"
    proc = subprocess.run([sys.executable, "-c", SAVE, str(tmp_path / "m"), "quiet" if quiet else "loud"],
                          capture_output=True, text=True, env=env, timeout=120, check=True)
    assert ("Writing model shards" in proc.stderr) is not quiet, proc.stderr



DASK = """
import logging, sys
from domainbert.core import models
if sys.argv[1] == "quiet":
    models.quiet_libraries()
import distributed  # configures its loggers from Dask's config as it is imported
print(logging.getLogger("distributed").getEffectiveLevel())
"""


@pytest.mark.parametrize("quiet", [True, False])
def test_dasks_cluster_logs_warnings_only_once_quieted(quiet):
    """The local Dask cluster of ``--workers`` logged some fifty INFO lines under ``domainbert run`` as it started
    and stopped its workers; quieted, the command and the processes it starts log Dask's warnings only."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("DASK_")}
    proc = subprocess.run([sys.executable, "-c", DASK, "quiet" if quiet else "loud"],
                          capture_output=True, text=True, env=env, timeout=180, check=True)
    assert int(proc.stdout.split()[-1]) == (logging.WARNING if quiet else logging.INFO), proc.stdout


DEEPSPEED = """
import sys
from domainbert.core import models
models.ACCELERATOR_DEVICES = tuple(sys.argv[2:])  # the device nodes this test says the machine has
if sys.argv[1] == "quiet":
    models.quiet_libraries()
from deepspeed.accelerator import get_accelerator
print(get_accelerator().device_name())
"""


@pytest.mark.parametrize(("quiet", "devices"), [(True, "none"), (False, "none"), (True, "one")])
def test_deepspeed_is_told_it_runs_on_the_cpu_where_there_is_no_accelerator(tmp_path, quiet, devices):
    """DeepSpeed warned "Setting accelerator to CPU ... unable to detect" in every process of a CPU run (three
    times a demo). Quieted on a machine without an accelerator device it is told so; where a device node exists
    (here a stand-in file) it detects as it always did."""
    import os
    import subprocess
    import sys

    import torch

    if torch.cuda.is_available():
        pytest.skip("DeepSpeed finds the GPU here and has nothing to warn about")
    nodes = [] if devices == "none" else [str(tmp_path / "nvidiactl")]
    for node in nodes:
        Path(node).touch()
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    proc = subprocess.run([sys.executable, "-c", DEEPSPEED, "quiet" if quiet else "loud", *nodes],
                          capture_output=True, text=True, env=env, timeout=180, check=True)
    assert proc.stdout.split()[-1] == "cpu", proc.stdout
    told = quiet and devices == "none"
    assert ("unable to detect" in proc.stdout + proc.stderr) is not told, proc.stdout + proc.stderr
