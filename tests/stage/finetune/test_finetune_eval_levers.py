"""The prediction speed switches (``finetune.eval_inference_mode``, ``finetune.eval_length_sorted``) leave the
predictions as they were: logits within float rounding of the switch-off path, and a run's answers, scores
and curve identical with the switches on and off."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from domainbert.finetune.batching import predict_logits
from domainbert.finetune.jobs import Job, load_task_data, run_record, task_config
from domainbert.finetune.runner import run_finetune
from domainbert.finetune.stage import settings_for
from support.finetune import make_cfg

# fp32 logits of one example batched with others of another length: padding is masked out of attention, so
# only the order of float sums may differ
TOLERANCE = 1e-5


def token_model():
    from transformers import BertConfig, BertForTokenClassification

    torch.manual_seed(0)
    config = BertConfig(vocab_size=100, hidden_size=128, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=256, max_position_embeddings=64, num_labels=3)
    return BertForTokenClassification(config).eval()


def features(n: int, unmasked: bool = False) -> list[dict]:
    g = torch.Generator().manual_seed(3)
    out = []
    for i in range(n):
        length = 3 + (i * 7) % 20  # lengths out of order, so sorting regroups them
        ids = torch.randint(5, 100, (length,), generator=g).tolist()
        out.append({"input_ids": ids, "attention_mask": [1] * length, "labels": [0] * length})
    return out


def test_length_sorted_batches_give_the_input_orders_logits():
    model, feats = token_model(), features(40)
    sorted_ = predict_logits(model, feats, 8, 0, length_sorted=True)
    plain = predict_logits(model, feats, 8, 0, length_sorted=False)
    assert [a.shape for a in sorted_] == [(len(f["input_ids"]), 3) for f in feats]
    worst = max(float(np.abs(a - b).max()) for a, b in zip(sorted_, plain, strict=True))
    assert worst <= TOLERANCE, worst


def test_the_tolerance_catches_padding_that_attention_sees(monkeypatch):
    """The same comparison fails when padded positions are attended to: the tolerance is tight enough to see
    what sorting would break if masking did not hold."""
    import domainbert.finetune.batching as batching

    model, feats = token_model(), features(40)
    plain = predict_logits(model, feats, 8, 0, length_sorted=False)
    collate = batching.collate

    def unmasked(rows, pad_id):
        batch = collate(rows, pad_id)
        batch["attention_mask"] = torch.ones_like(batch["attention_mask"])
        return batch

    monkeypatch.setattr(batching, "collate", unmasked)
    sorted_ = predict_logits(model, feats, 8, 0, length_sorted=True)
    worst = max(float(np.abs(a - b).max()) for a, b in zip(sorted_, plain, strict=True))
    assert worst > 100 * TOLERANCE, worst


def test_inference_mode_gives_no_grads_logits_bit_for_bit():
    model, feats = token_model(), features(24)
    fast = predict_logits(model, feats, 8, 0, inference_mode=True)
    slow = predict_logits(model, feats, 8, 0, inference_mode=False)
    assert all(np.array_equal(a, b) for a, b in zip(fast, slow, strict=True))


@pytest.mark.parametrize("task", ["ner", "cls"])
def test_a_run_scores_the_same_with_the_switches_on_and_off(tiny_bert, tasks_dir, task):
    cfg = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=2")
    off_cfg = make_cfg(tiny_bert, tasks_dir, "finetune.epochs=2", "finetune.eval_inference_mode=false",
                       "finetune.eval_length_sorted=false")
    data = load_task_data(cfg, task_config(cfg, task))
    on = settings_for(cfg, 1, "finetune", task_config(cfg, task))
    off = settings_for(off_cfg, 1, "finetune", task_config(off_cfg, task))
    assert (on.eval_inference_mode, on.eval_length_sorted) == (True, True)
    assert (off.eval_inference_mode, off.eval_length_sorted) == (False, False)
    assert dataclasses.replace(off, eval_inference_mode=True, eval_length_sorted=True) == on
    a = run_finetune(data, str(tiny_bert), on, cfg.finetune.max_length)
    b = run_finetune(data, str(tiny_bert), off, cfg.finetune.max_length)
    assert a["pred"] == b["pred"] and a["test"] == b["test"] and a["validation"] == b["validation"]
    assert [e["validation"] for e in a["history"]] == [e["validation"] for e in b["history"]]
    # speed settings: a result made with either is current for the other
    job = Job("base", str(tiny_bert), task, 1, "finetune")
    assert run_record(cfg, job)[2] == run_record(off_cfg, job)[2]
