"""DeepSpeed for real: 2 CPU processes over gloo under the ``deepspeed`` launcher, ZeRO-2 and ZeRO-3,
checkpoint consolidation and resume. No op is compiled: pretrain.runtime skips DeepSpeed's
shared-memory comm op, which training never uses."""

from __future__ import annotations

import json
import shutil
import socket

import pytest
import torch
from safetensors.torch import load_file

from domainbert.core.models import load_mlm_model
from domainbert.pretrain.checkpoint import consolidate_zero_checkpoint, list_checkpoints
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import hf_zero_config, make_cfg

pytestmark = [pytest.mark.deepspeed, pytest.mark.slow]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ds_cfg(base_model, stage: int, *extra: str):
    return make_cfg(base_model, "pretrain.deepspeed.enabled=true", f"pretrain.deepspeed.zero_stage={stage}",
                    "pretrain.launch.launcher=deepspeed", "pretrain.launch.num_processes=2",
                    f"pretrain.launch.master_port={_free_port()}", *extra)


def test_zero2_two_processes_from_a_hugging_face_json(base_model, layout, tmp_path):
    """ZeRO-2 from a DeepSpeed JSON written for the Hugging Face Trainer, "auto" wherever it fills a value
    (gradient_clipping "auto" once failed inside DeepSpeed with a TypeError)."""
    user = tmp_path / "zero2.json"
    user.write_text(json.dumps(hf_zero_config(2)))
    summary = pretrain_arm(_ds_cfg(base_model, 0, f"pretrain.deepspeed.config_file={user}"), "continued", layout)
    # Two ranks of 4 x 32 tokens per step: the 1024-token budget takes 4 steps.
    assert (summary["world_size"], summary["zero_stage"], summary["engine"]) == (2, 2, "deepspeed")
    assert summary["steps"] == 4 and summary["tokens_consumed"] == 1024
    assert summary["domain_perplexity"] < summary["domain_perplexity_before"]
    model = load_mlm_model(layout.pretrained_model("continued"))
    base = load_mlm_model(base_model)
    assert not torch.equal(model.bert.encoder.layer[0].attention.self.query.weight,
                           base.bert.encoder.layer[0].attention.self.query.weight)


def test_zero3_checkpoint_consolidates_and_resumes(base_model, layout):
    cfg = _ds_cfg(base_model, 3, "pretrain.checkpoint_every=2")
    first = pretrain_arm(cfg, "continued", layout)
    assert first["steps"] == 4 and first["zero_stage"] == 3
    weights = load_file(layout.pretrained_model("continued") / "model.safetensors")
    assert weights["bert.embeddings.word_embeddings.weight"].shape == (600, 128)  # gathered, not a ZeRO shard
    [(step, folder)] = list_checkpoints(layout.pretrain("continued") / "checkpoints")
    assert step == 2 and sorted(p.name for p in (folder / "ds").iterdir())[0].startswith("zero_pp_rank_0")
    consolidated = consolidate_zero_checkpoint(folder)
    assert consolidated["bert.encoder.layer.1.output.dense.weight"].shape == (128, 256)
    # The kept ZeRO-3 checkpoint also loads with from_pretrained: its gathered weights are the consolidated ones.
    from transformers import AutoModelForMaskedLM

    hf, info = AutoModelForMaskedLM.from_pretrained(str(folder), output_loading_info=True)
    assert not info["missing_keys"] and not info["unexpected_keys"]
    torch.testing.assert_close(hf.state_dict()["bert.encoder.layer.1.output.dense.weight"],
                               consolidated["bert.encoder.layer.1.output.dense.weight"])

    # Lose the result, keep the checkpoint: the rerun resumes at step 2 and ends where the first run did.
    shutil.rmtree(layout.pretrained_model("continued"))
    (layout.pretrain("continued") / "summary.json").unlink()
    second = pretrain_arm(cfg, "continued", layout)
    assert second["resumed_from"] == [2]
    assert json.loads((layout.pretrain("continued") / "summary.json").read_text())["steps"] == 4
    for (_, a), (_, b) in zip(first["loss_curve"], second["loss_curve"], strict=True):
        assert a == pytest.approx(b, abs=1e-4)
    again = load_file(layout.pretrained_model("continued") / "model.safetensors")
    for key, value in weights.items():
        torch.testing.assert_close(again[key], value, atol=1e-5, rtol=1e-4, msg=key)


def test_replaced_token_detection_on_two_zero2_ranks(base_model, layout):
    """RTD under DeepSpeed: the generator shares the embeddings across ranks, the discriminator's unused MLM
    head does not stall ZeRO-2, and the saved folder is the discriminator alone."""
    summary = pretrain_arm(_ds_cfg(base_model, 2, "pretrain.rtd.arms=[continued]"), "continued", layout)
    assert (summary["world_size"], summary["objective"], summary["steps"]) == (2, "rtd", 4)
    assert summary["domain_perplexity"] < summary["domain_perplexity_before"]
    assert 0 < summary["discriminator_accuracy"] <= 1
    weights = load_file(layout.pretrained_model("continued") / "model.safetensors")
    assert not any(k.startswith(("generator", "detection_head")) for k in weights)
    assert "bert.encoder.layer.1.output.dense.weight" in weights
