"""The one optimizer set-up: which parameters decay, the schedule's exact factors, the fused kernel."""

from __future__ import annotations

import torch
from transformers import BertConfig, BertForMaskedLM

from domainbert.core.optim import adamw, linear_schedule, linear_warmup_decay, param_groups


def test_schedule_warms_up_then_decays_to_zero():
    f = linear_schedule(4, 10)
    assert [f(s) for s in range(11)] == [0.25, 0.5, 0.75, 1.0, 1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0]
    assert [linear_schedule(0, 4)(s) for s in range(5)] == [1.0, 0.75, 0.5, 0.25, 0.0]


def test_biases_and_layer_norms_do_not_decay():
    model = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                       intermediate_size=32))
    model.bert.embeddings.position_embeddings.weight.requires_grad_(False)
    decay, no_decay = param_groups(model, 0.01)
    names = {id(p): n for n, p in model.named_parameters()}
    assert (decay["weight_decay"], no_decay["weight_decay"]) == (0.01, 0.0)
    assert all(p.ndim == 2 for p in decay["params"])
    assert {names[id(p)] for p in no_decay["params"]} >= {"bert.embeddings.LayerNorm.weight",
                                                         "bert.encoder.layer.0.attention.self.query.bias"}
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert len(decay["params"]) + len(no_decay["params"]) == len(trainable)  # frozen ones left out


def test_adamw_steps_and_the_scheduler_scales_its_lr():
    w = torch.nn.Parameter(torch.ones(2, 2))
    opt = adamw([{"params": [w], "weight_decay": 0.0}], lr=0.1)
    sched = linear_warmup_decay(opt, 2, 4)
    assert opt.param_groups[0]["lr"] == 0.05  # the first warmup factor is applied at construction
    w.sum().backward()
    opt.step()
    sched.step()
    assert torch.allclose(w.detach(), torch.full((2, 2), 0.95)) and opt.param_groups[0]["lr"] == 0.1
