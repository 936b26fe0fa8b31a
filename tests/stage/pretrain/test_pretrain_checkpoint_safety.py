"""Checkpoints are loaded without unpickling code, and a bad newest checkpoint falls back to the previous one."""

from __future__ import annotations

import json
import logging
import os
import random
import shutil

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from domainbert.core.safeload import CheckpointError, safe_torch_load, vet_pickle
from domainbert.pretrain import checkpoint as ckpt
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import make_cfg


class _Planted:
    """A pickle payload that creates a file when unpickled."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.makedirs, (self.marker,))


def test_rng_states_round_trip_through_a_weights_only_load(tmp_path):
    random.seed(1), np.random.seed(2), torch.manual_seed(3)
    torch.save(ckpt.rng_state(), tmp_path / "rng.pt")
    want = (random.random(), float(np.random.rand()), float(torch.rand(1)))
    random.seed(9), np.random.seed(9), torch.manual_seed(9)
    ckpt.set_rng_state(safe_torch_load(tmp_path / "rng.pt"))
    assert (random.random(), float(np.random.rand()), float(torch.rand(1))) == want


def test_a_planted_pickle_is_refused_and_not_executed(tmp_path):
    marker = tmp_path / "payload-ran"
    evil = tmp_path / "rng-rank0.pt"
    torch.save({"torch": torch.zeros(3), "x": _Planted(str(marker))}, evil)
    with pytest.raises(CheckpointError, match="refused to load") as info:
        safe_torch_load(evil)
    assert str(evil) in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(CheckpointError, match="os.makedirs|posix.makedirs|refused"):
        vet_pickle(evil)
    assert not marker.exists()


def test_truncated_file_is_a_one_line_error(tmp_path):
    path = tmp_path / "optimizer.pt"
    torch.save({"a": torch.arange(1000)}, path)
    path.write_bytes(path.read_bytes()[:200])
    with pytest.raises(CheckpointError, match="truncated or corrupt"):
        safe_torch_load(path)


def _weights(layout):
    return load_file(layout.pretrained_model("continued") / "model.safetensors")


def _rerun(cfg, layout):
    shutil.rmtree(layout.pretrained_model("continued"))
    (layout.pretrain("continued") / "summary.json").unlink()
    return pretrain_arm(cfg, "continued", layout)


def test_bad_newest_checkpoint_falls_back_to_the_previous_one(base_model, layout, tmp_path, caplog):
    cfg = make_cfg(base_model, "pretrain.checkpoint_every=2", "pretrain.keep_checkpoints=3")  # 8 steps
    pretrain_arm(cfg, "continued", layout)
    reference = _weights(layout)
    root = layout.pretrain("continued") / "checkpoints"
    assert [s for s, _ in ckpt.list_checkpoints(root)] == [2, 4, 6]

    # Truncated weights in the newest checkpoint: resume from step 4, same final weights.
    weights = root / "step-6" / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[: weights.stat().st_size // 2])
    with caplog.at_level(logging.WARNING):
        summary = _rerun(cfg, layout)
    assert summary["resumed_from"] == [4]
    assert "step 6 is unusable" in caplog.text and "truncated" in caplog.text
    for key, value in reference.items():
        torch.testing.assert_close(_weights(layout)[key], value, atol=1e-5, rtol=1e-4)

    # Same size, flipped bytes (hash mismatch) and a planted pickle: both skipped, step 2 is used.
    for step in (4, 6):
        shutil.rmtree(root / f"step-{step}")
        shutil.copytree(root / "step-2", root / f"step-{step}")
    opt = root / "step-6" / "optimizer.pt"
    data = bytearray(opt.read_bytes())
    data[len(data) // 2] ^= 0xFF
    opt.write_bytes(bytes(data))
    marker = tmp_path / "payload-ran"
    rng = root / "step-4" / "rng-rank0.pt"
    torch.save({"x": _Planted(str(marker))}, rng)
    # The manifest rewritten too (as an attacker would): the pickle itself must be refused.
    state = json.loads((root / "step-4" / ckpt.STATE).read_text())
    state[ckpt.FILES] = ckpt.file_manifest(root / "step-4")
    (root / "step-4" / ckpt.STATE).write_text(json.dumps(state))
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        summary = _rerun(cfg, layout)
    assert summary["resumed_from"] == [2]
    assert "sha256 mismatch" in caplog.text and "refused to load" in caplog.text
    assert not marker.exists()


def test_every_kept_checkpoint_loads_with_from_pretrained(base_model, layout):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    cfg = make_cfg(base_model, "pretrain.checkpoint_every=2", "pretrain.keep_checkpoints=2")
    pretrain_arm(cfg, "continued", layout)
    kept = ckpt.list_checkpoints(layout.pretrain("continued") / "checkpoints")
    assert [s for s, _ in kept] == [4, 6]
    for _, folder in kept:
        model, info = AutoModelForMaskedLM.from_pretrained(str(folder), output_loading_info=True)
        assert not info["missing_keys"] and not info["unexpected_keys"], info
        saved = load_file(str(folder / "model.safetensors"))
        emb = next(k for k in saved if k.endswith("word_embeddings.weight"))
        torch.testing.assert_close(model.state_dict()[emb], saved[emb])
        tok = AutoTokenizer.from_pretrained(str(folder))
        assert tok("a kernel")["input_ids"][0] == tok.cls_token_id and len(tok) == model.config.vocab_size
