"""Mean-pooled sequence classification: padding does not change an example's logits, the pooled vector is the
mean of the real tokens' states, and both pooling choices train through the stage."""

from __future__ import annotations

import pytest
import torch
from test_finetune_stage import make_cfg, tasks_dir  # noqa: F401 - the shared task fixture

from domainbert.core.paths import RunLayout
from domainbert.finetune.pooling import MeanPoolClassifier
from domainbert.finetune.stage import finetune_one


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
