"""The attention the trainer picks (eager with lane dropout for bf16/fp16 CPU training with attention dropout,
else SDPA) and the CPU lane dropout itself."""

from __future__ import annotations

import torch

from domainbert.core.models import load_mlm_model
from domainbert.pretrain.cpu_dropout import ATTENTION, LaneDropout, lane_dropout
from domainbert.pretrain.model import training_attention
from domainbert.pretrain.objective import MLMObjective


def _batch(vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (3, 24), generator=gen)
    labels = torch.full_like(ids, -100)
    labels[:, 3::5] = ids[:, 3::5]
    return ids, labels


def test_low_precision_cpu_training_with_attention_dropout_uses_eager_attention(base_model):
    cpu, bf16 = torch.device("cpu"), torch.bfloat16
    model = load_mlm_model(base_model)
    assert model.config.attention_probs_dropout_prob > 0
    dropouts = sum(isinstance(m, torch.nn.Dropout) for m in model.modules())
    assert training_attention(model, cpu, bf16) == ATTENTION
    assert model.config._attn_implementation == ATTENTION
    assert sum(isinstance(m, LaneDropout) for m in model.modules()) == dropouts > 0
    assert training_attention(model, cpu, None) == "sdpa"  # fp32: SDPA is as fast
    assert model.config._attn_implementation == "sdpa"
    no_dropout = load_mlm_model(base_model)
    no_dropout.config.attention_probs_dropout_prob = 0.0
    assert training_attention(no_dropout, cpu, bf16) == "sdpa"
    assert training_attention(load_mlm_model(base_model), torch.device("cuda"), bf16) == "sdpa"


def test_eager_and_sdpa_compute_the_same_loss(base_model):
    eager, sdpa = load_mlm_model(base_model), load_mlm_model(base_model)
    assert training_attention(eager, torch.device("cpu"), torch.bfloat16) == ATTENTION
    sdpa.set_attn_implementation("sdpa")
    ids, labels = _batch(eager.config.vocab_size)
    losses = []
    for model in (eager, sdpa):
        model.eval()  # no dropout: the two implementations must agree to rounding
        losses.append(MLMObjective(model, sparse=True)(ids, labels))
    torch.testing.assert_close(losses[0], losses[1], rtol=1e-5, atol=1e-5)
    # In training mode attention dropout is active in the eager path too: the loss differs from eval mode.
    eager.train()
    torch.manual_seed(1)
    assert not torch.isclose(MLMObjective(eager, sparse=True)(ids, labels), losses[0])


def test_lane_dropout_keeps_one_minus_p_scaled_and_repeats_with_the_seed():
    x = torch.ones(200_000, requires_grad=True)
    torch.manual_seed(3)
    y = lane_dropout(x, 0.1)
    torch.manual_seed(3)
    assert torch.equal(y, lane_dropout(x, 0.1))  # the default generator drives it: seeded runs repeat
    scale = 65536 / (65536 - 6554)
    kept = y != 0
    assert abs(kept.float().mean().item() - 0.9) < 0.005
    assert torch.allclose(y[kept], torch.full_like(y[kept], scale))
    y.sum().backward()
    assert torch.allclose(x.grad, y.detach())  # gradient is the same mask and scale
    assert lane_dropout(x, 0.1, training=False) is x and lane_dropout(x, 0.0) is x
    assert not lane_dropout(torch.ones(5), 1.0).any()
    for dtype in (torch.bfloat16, torch.float16):
        z = lane_dropout(torch.ones(50_000, dtype=dtype), 0.25)
        assert z.dtype == dtype and abs((z != 0).float().mean().item() - 0.75) < 0.01
