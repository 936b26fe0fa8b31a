"""Sequence-classification heads: padding does not change a mean-pooled example's logits, the pooled vector is
the mean of the real tokens' states, both pooling choices train through the stage, the stock head's pooler is
drawn from the seed, and the head is part of a classification result's fingerprint only."""

from __future__ import annotations

import pytest
import torch

from domainbert.core.paths import RunLayout
from domainbert.finetune.pooling import MeanPoolClassifier
from domainbert.finetune.stage import finetune_one
from support.finetune import make_cfg


@pytest.fixture
def classifier(tiny_bert) -> MeanPoolClassifier:
    from transformers import AutoModel

    torch.manual_seed(0)
    return MeanPoolClassifier(AutoModel.from_pretrained(tiny_bert), 3).eval()


def test_padding_does_not_change_the_logits_and_pooling_is_the_token_mean(classifier):
    ids = torch.tensor([[2, 11, 12, 13, 3]])
    alone = classifier(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    padded = torch.tensor([[2, 11, 12, 13, 3, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1, 0, 0]])
    assert torch.allclose(classifier(input_ids=padded, attention_mask=mask).logits, alone, atol=1e-5)
    hidden = classifier.encoder(input_ids=ids).last_hidden_state
    expected = classifier.classifier(hidden.mean(1))
    assert torch.allclose(alone, expected, atol=1e-5)


def test_loss_is_cross_entropy_or_binary_for_multi_label(classifier):
    ids = torch.tensor([[2, 11, 3], [2, 12, 3]])
    out = classifier(input_ids=ids, labels=torch.tensor([0, 2]))
    assert torch.isclose(out.loss, torch.nn.functional.cross_entropy(out.logits, torch.tensor([0, 2])))
    classifier.multi_label = True
    target = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    out = classifier(input_ids=ids, labels=target)
    assert torch.isclose(out.loss, torch.nn.functional.binary_cross_entropy_with_logits(out.logits, target))


@pytest.mark.parametrize("pooling", ["mean", "cls"])
def test_both_poolings_learn_the_tiny_task(tmp_path, tiny_bert, tasks_dir, pooling):  # noqa: F811
    cfg = make_cfg(tiny_bert, tasks_dir, f"finetune.pooling={pooling}", "finetune.epochs=6")
    res = finetune_one(cfg, RunLayout(tmp_path / "run"), "base", str(tiny_bert), "cls", 1)
    assert res["test"]["macro_f1"] > 0.6 and not res["collapsed"]


def test_the_head_is_part_of_a_classification_result_and_not_of_an_ner_one(tiny_bert, tasks_dir):  # noqa: F811
    from domainbert.finetune.jobs import Job, run_record

    mean, cls = (make_cfg(tiny_bert, tasks_dir, f"finetune.pooling={p}") for p in ("mean", "cls"))
    for task, differs in (("cls", True), ("ner", False)):
        job = Job("base", str(tiny_bert), task, 1, "finetune")
        assert (run_record(mean, job)[2] != run_record(cls, job)[2]) is differs


def test_the_stock_head_starts_from_a_pooler_drawn_from_the_seed_not_the_checkpoints(tiny_bert, tasks_dir):  # noqa: F811
    from safetensors.torch import load_file

    from domainbert.finetune.pooling import head_pooler
    from domainbert.finetune.runner import load_task_model
    from domainbert.task_data.splits import load_task

    cfg = make_cfg(tiny_bert, tasks_dir)
    data = load_task(next(t for t in cfg.finetune.tasks if t.name == "cls"))
    saved = load_file(tiny_bert / "model.safetensors")["pooler.dense.weight"]

    def pooler_weight(seed: int) -> torch.Tensor:
        torch.manual_seed(seed)
        return head_pooler(load_task_model(str(tiny_bert), data, "cls")).dense.weight.detach().clone()

    one, again, other = pooler_weight(1), pooler_weight(1), pooler_weight(2)
    assert torch.equal(one, again) and not torch.equal(one, other) and not torch.equal(one, saved)
    assert head_pooler(load_task_model(str(tiny_bert), data, "mean")) is None  # its encoder's pooler goes unused
