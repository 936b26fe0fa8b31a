"""An arm started from a kept checkpoint step of an earlier arm (``pretrain.start_from``): the source keeps that
step whatever keep_checkpoints says, the arm starts from its weights, its learning rate continues the schedule
from that step (no re-warm-up) or warms up afresh, and it resumes from its own checkpoint to the same weights."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from domainbert.core.errors import ConfigError
from domainbert.pretrain import checkpoint as ckpt
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import make_cfg

# 12 steps of 4 x 32 tokens for each arm, checkpoints at 4 and 8, one kept; control starts from continued's 4.
START = (
    "pretrain.arms=[continued, control]", "pretrain.budget_tokens=1536", "pretrain.keep_checkpoints=1",
    "pretrain.lr=1.0e-3", "pretrain.warmup_ratio=0.25", "pretrain.log_every=1", "pretrain.watch_points=0", "finetune.only_tasks=[science-terms-ner]",
)


def _lrs(layout, arm):
    lines = (layout.pretrain(arm) / "metrics.jsonl").read_text().splitlines()
    return [r["lr"] for r in map(json.loads, lines) if r["kind"] == "train"]


def test_an_arm_continues_from_a_kept_step_and_resumes_exactly(base_model, layout):
    cfg = make_cfg(base_model, *START, "pretrain.start_from={control: {arm: continued, step: 4}}")
    pretrain_arm(cfg, "continued", layout)
    # the step control starts from is kept beside the newest one (keep_checkpoints: 1)
    assert [s for s, _ in ckpt.list_checkpoints(layout.pretrain("continued") / "checkpoints")] == [4, 8]
    whole = pretrain_arm(cfg, "control", layout)
    assert whole["start_head"] == "the continued arm's at step 4"
    # no re-warm-up: control's step k is step 4 + k of a 16-step linear decay, logged after the step
    assert _lrs(layout, "control") == pytest.approx([1e-3 * (12 - k) / 16 for k in range(1, 13)], abs=1e-12)
    # its start is continued's step-4 weights, not the base's nor continued's result
    started = ckpt.list_checkpoints(layout.pretrain("continued") / "checkpoints")[0][1]
    assert whole["domain_perplexity_before"] != pretrain_arm(cfg, "continued", layout)["domain_perplexity_before"]

    # a run stopped after control's step 8: its checkpoint is all that is left
    saved = load_file(layout.pretrained_model("control") / "model.safetensors")
    shutil.rmtree(layout.pretrained_model("control"))
    for name in ("summary.json", "metrics.jsonl"):
        (layout.pretrain("control") / name).unlink()
    resumed = pretrain_arm(cfg, "control", layout)
    assert resumed["resumed_from"] == [8]
    assert _lrs(layout, "control") == pytest.approx([1e-3 * (12 - k) / 16 for k in range(9, 13)], abs=1e-12)
    got = load_file(layout.pretrained_model("control") / "model.safetensors")
    for key in saved:
        torch.testing.assert_close(got[key], saved[key], atol=1e-6, rtol=1e-5, msg=key)
    assert started.is_dir()

    # re-warmed: a fresh warm-up of 3 of control's 12 steps, then the linear decay over its own 9
    rewarmed = make_cfg(base_model, *START, "pretrain.start_from={control: {arm: continued, step: 4, rewarm: true}}")
    pretrain_arm(rewarmed, "control", layout)
    want = [2 / 3, 1.0, *((12 - k) / 9 for k in range(3, 13))]
    assert _lrs(layout, "control") == pytest.approx([1e-3 * f for f in want], abs=1e-12)

    # a step continued did not keep: one line naming the field and the steps kept
    later = make_cfg(base_model, *START, "pretrain.start_from={control: {arm: continued, step: 12}}")
    with pytest.raises(ConfigError) as err:
        pretrain_arm(later, "control", layout)
    assert str(err.value) == "pretrain.start_from.control.step: continued keeps no checkpoint at step 12 (kept: 4, 8)"
    # continued's recipe changed and it has not trained again: its checkpoint is not the start control names
    changed = make_cfg(base_model, *START, "pretrain.start_from={control: {arm: continued, step: 4}}",
                       "pretrain.arm_optim={continued: {lr: 2.0e-3}}")
    with pytest.raises(ConfigError, match=r"^pretrain.start_from.control.arm: continued's checkpoint at step 4 is "
                                          r"from another configuration of continued"):
        pretrain_arm(changed, "control", layout)
