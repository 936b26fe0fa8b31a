"""Preflight checks fail fast with errors naming the field or folder."""

from __future__ import annotations

import pytest

from domainbert.core.errors import ConfigError, ModelError
from domainbert.core.models import load_mlm_model, load_tokenizer
from domainbert.pretrain.preflight import check_whole_word, run_preflight, tokenizer_lowercases
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import make_cfg, tiny_bert, wordpiece_tokenizer


def _check(model, tok, **kw):
    args = {"source": "m", "seq_len": 32, "lowercase": True, "lowercase_field": "base_model.lowercase",
            "whole_word": False, **kw}
    run_preflight(model, tok, **args)


def test_good_pair_passes_and_casing_is_detected(base_model, texts):
    model, tok = load_mlm_model(base_model), load_tokenizer(base_model)
    _check(model, tok)
    assert tokenizer_lowercases(tok)
    assert not tokenizer_lowercases(wordpiece_tokenizer(texts, lowercase=False))


def test_sequence_longer_than_position_embeddings(base_model, layout):
    with pytest.raises(ConfigError, match="position embeddings") as err:
        pretrain_arm(make_cfg(base_model, "pretrain.seq_len=256"), "continued", layout)
    assert err.value.field == "pretrain.seq_len"
    assert not layout.pretrained_model("continued").exists()


def test_casing_mismatch_names_the_field(base_model, layout):
    with pytest.raises(ConfigError, match="lowercases") as err:
        pretrain_arm(make_cfg(base_model, "base_model.lowercase=false"), "continued", layout)
    assert err.value.field == "base_model.lowercase"


def test_missing_mask_token_and_slow_tokenizer_for_whole_words(base_model):
    from transformers import ByT5Tokenizer  # a Python-backend (slow) tokenizer: no word ids

    model = load_mlm_model(base_model)
    tok = load_tokenizer(base_model)
    tok.mask_token = None
    with pytest.raises(ModelError, match="mask_token"):
        _check(model, tok)
    with pytest.raises(ConfigError, match="fast tokenizer") as err:
        check_whole_word(ByT5Tokenizer(), True, "byt5")
    assert err.value.field == "pretrain.whole_word_mask"
    check_whole_word(ByT5Tokenizer(), False, "byt5")  # token-level masking needs no word ids


def test_special_token_outside_embeddings(tmp_path, texts):
    tok = wordpiece_tokenizer(texts, vocab_size=300)
    folder = tiny_bert(tok, tmp_path / "m")
    model = load_mlm_model(folder)
    model.resize_token_embeddings(3)  # [MASK] (id 4) is past the last row
    with pytest.raises(ModelError):
        _check(model, load_tokenizer(folder))
