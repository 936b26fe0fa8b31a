"""Weights that cannot be trusted or read stop a run at once, in one line, and are never retried: a pickle-only
model folder is refused before any run (with the command that converts it), a corrupt weights file is a
``ModelError``, and a training process's user error reaches its launcher as one."""

from __future__ import annotations

import json
import pickle
import shutil
import subprocess
import sys

import pytest

from domainbert.cli import run_cli
from domainbert.core.errors import DomainbertError, ModelError
from domainbert.core.models import load_mlm_model, resolve_model_ref
from domainbert.core.processes import run_command
from domainbert.core.safeload import main as convert
from support.finetune import cfg_overrides


def _pickle_only(tiny_bert, folder):
    import torch
    from safetensors.torch import load_file

    shutil.copytree(tiny_bert, folder)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    return folder


def test_a_pickle_only_extra_model_is_refused_before_any_run(tmp_path, tiny_bert, tasks_dir, capsys):  # noqa: F811
    other = _pickle_only(tiny_bert, tmp_path / "other")
    extra = "finetune.extra_models=" + json.dumps({"other": str(other)})
    argv = ["finetune", "science", *cfg_overrides(tiny_bert, tasks_dir), extra, "--out", str(tmp_path / "run")]
    assert run_cli(argv) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in err
    assert f"{other}: its weights are a pickle (pytorch_model.bin)" in lines[0]
    assert f"python -m domainbert.core.safeload {other}" in lines[0]
    assert not (tmp_path / "run" / "finetune").exists()  # refused before the first run


def test_the_converter_reads_tensors_only_and_the_folder_then_loads(tmp_path, tiny_bert, capsys):
    import torch

    other = _pickle_only(tiny_bert, tmp_path / "other")
    assert convert([str(other)]) == 0
    assert resolve_model_ref(str(other)) == str(other.resolve())
    loaded, original = load_mlm_model(other), load_mlm_model(tiny_bert)
    assert torch.equal(loaded.bert.embeddings.word_embeddings.weight, original.bert.embeddings.word_embeddings.weight)
    planted = tmp_path / "planted"
    shutil.copytree(tiny_bert, planted)
    (planted / "model.safetensors").unlink()
    marker = tmp_path / "ran"

    class Payload:
        def __reduce__(self):
            return (subprocess.call, (["touch", str(marker)],))

    (planted / "pytorch_model.bin").write_bytes(pickle.dumps({"w": Payload()}))
    capsys.readouterr()
    assert convert([str(planted)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {planted / 'pytorch_model.bin'}: ") and err.count("\n") == 1, err
    assert not marker.exists() and not (planted / "model.safetensors").exists()


def test_a_corrupt_weights_file_is_a_model_error_that_is_not_retried(tmp_path, tiny_bert):
    from prefect.states import Failed

    from domainbert.flows.tasks import _retry_unless_user_error

    broken = tmp_path / "broken"
    shutil.copytree(tiny_bert, broken)
    weights = broken / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:5000])
    with pytest.raises(ModelError, match="cannot load model") as info:
        load_mlm_model(broken)
    assert str(broken) in str(info.value) and "\n" not in str(info.value)
    assert _retry_unless_user_error(None, None, Failed(data=info.value)) is False
    assert _retry_unless_user_error(None, None, Failed(data=RuntimeError("a lost node"))) is True


def test_a_training_process_user_error_reaches_the_launcher_as_one(tmp_path):
    from domainbert.core.errors import USER_ERROR_MARK

    user = f"import sys; print('{USER_ERROR_MARK}/m: corrupt', file=sys.stderr); sys.exit(1)"
    with pytest.raises(DomainbertError, match="^/m: corrupt$"):
        run_command([sys.executable, "-c", user], tmp_path / "launch.log")
    with pytest.raises(RuntimeError, match="training processes failed"):
        run_command([sys.executable, "-c", "raise SystemExit(3)"], tmp_path / "launch.log")
