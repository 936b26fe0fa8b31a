"""The 2020s recipes on a tiny arm: warmup-stable-decay with a masking phase change and general-text replay,
trained to the logged values, resumed from a checkpoint to the same weights, the tokens counted by source,
the equal-token control, and the replay text decontaminated as the corpus is."""

from __future__ import annotations

import gzip
import json
import math
import shutil

import pytest
import torch
from safetensors.torch import load_file

from domainbert.corpus import store
from domainbert.corpus.decontaminate import eval_texts
from domainbert.pretrain.replay_text import ensure_replay_text, replay_text_dir
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import make_cfg

# 8 steps of 4 x 32 tokens, a checkpoint at step 4; the decay and the masking change both start at step 6.
RECIPE = (
    "pretrain.lr_schedule.kind=wsd", "pretrain.lr_schedule.decay_fraction=0.25",
    "pretrain.lr_schedule.decay_shape=1-sqrt", "pretrain.warmup_ratio=0.25", "pretrain.lr=1.0e-3",
    "pretrain.mask_schedule=[{until: 0.75, rate: 0.3}, {until: 1.0, rate: 0.15}]",
    "pretrain.replay.fraction=0.25", "pretrain.log_every=1", "pretrain.arms=[continued, control]",
    "finetune.only_tasks=[science-terms-ner]",
)


def _records(folder):
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def test_wsd_masking_phases_and_replay_train_resume_exactly_and_count_tokens(base_model, layout):
    cfg = make_cfg(base_model, *RECIPE)
    whole = pretrain_arm(cfg, "continued", layout)
    arm = layout.pretrain("continued")
    train = [r for r in _records(arm) if r["kind"] == "train"]
    # the lr logged after step k is the one step k + 1 uses: a warm-up of 2 steps, the peak, then 1-sqrt over the
    # last 2 steps (the decay's first step at the peak, as a linear decay's first step is)
    want = [1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1 - math.sqrt(1 / 2), 0.0]
    assert [r["lr"] for r in train] == pytest.approx([1e-3 * f for f in want], abs=1e-12)
    assert [r["mask_rate"] for r in train] == [0.3] * 6 + [0.15] * 2
    assert whole["tokens_consumed"] == 1024
    assert (whole["domain_tokens"], whole["general_tokens"], whole["replay_fraction"]) == (768, 256, 0.25)

    # a run stopped after step 4: its checkpoint is all that is left, both phase changes come after it
    saved = load_file(layout.pretrained_model("continued") / "model.safetensors")
    shutil.rmtree(layout.pretrained_model("continued"))
    for name in ("summary.json", "metrics.jsonl"):
        (arm / name).unlink()
    resumed = pretrain_arm(cfg, "continued", layout)
    assert resumed["resumed_from"] == [4]
    assert resumed["general_tokens"] == 256
    assert [s for s, _ in resumed["loss_curve"]] == list(range(1, 9))
    assert [v for _, v in resumed["loss_curve"]] == pytest.approx([v for _, v in whole["loss_curve"]], abs=1e-5)
    got = load_file(layout.pretrained_model("continued") / "model.safetensors")
    for key in saved:
        torch.testing.assert_close(got[key], saved[key], atol=1e-6, rtol=1e-5, msg=key)

    # the equal-token control: the same total tokens as continued, its domain and replayed ones together
    control = pretrain_arm(cfg, "control", layout)
    assert control["tokens_consumed"] == whole["domain_tokens"] + whole["general_tokens"]
    assert (control["domain_tokens"], control["general_tokens"], control["replay_fraction"]) == (0, 1024, 0.0)


def test_replayed_text_is_decontaminated_against_every_evaluation_set(base_model, layout, tmp_path):
    cfg = make_cfg(base_model, *RECIPE)
    test_texts = eval_texts(cfg.finetune.tasks, ["test"]).texts["science-terms-ner/test"]
    leaked = next(t for t in test_texts if 15 <= len(t.split()) <= 25)  # a sentence, less than the document
    general = tmp_path / "general.jsonl.gz"
    kept_sentence = "A lighthouse keeper tends the lamp on the rocky island every night."
    others = " ".join(f"The {w} of the harbour is painted white and blue each spring." for w in ("wall", "gate", "pier"))
    with gzip.open(general, "wt") as f:
        f.write(json.dumps({"text": f"{kept_sentence} {others}\n{leaked}"}) + "\n")
        for i in range(30):
            f.write(json.dumps({"text": f"gloss number {i}: an ordinary general English definition."}) + "\n")
    cfg = make_cfg(base_model, *RECIPE, f"vocab.control_corpus=[{general}]")
    folder = ensure_replay_text(cfg, layout)
    assert folder == replay_text_dir(layout)
    texts = [d["text"] for d in store.iter_documents(folder, "train")]
    assert len(texts) == 31 and not any(leaked in t for t in texts)
    assert f"{kept_sentence} {others}" in texts  # the matching sentence is cut, as the corpus stage cuts
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["decontamination_removed"]["science-terms-ner/test"]["sentences"] >= 1
