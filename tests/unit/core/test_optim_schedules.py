"""The learning-rate schedules of ``core.optim`` against values worked out by hand, and through ``LambdaLR``."""

from __future__ import annotations

import math

import pytest
import torch

from domainbert.core.optim import schedule, warmup_stable_decay


def test_wsd_warms_up_holds_the_peak_then_decays_along_each_shape():
    # 100 steps, 10 of warm-up, the last 20% decaying: the decay starts at step 80, step 85 is a quarter in.
    for shape, quarter in (("linear", 0.75), ("cosine", 0.5 * (1 + math.cos(math.pi / 4))), ("1-sqrt", 0.5)):
        f = warmup_stable_decay(10, 100, 0.2, shape)
        assert [f(s) for s in (0, 4, 9)] == pytest.approx([0.1, 0.5, 1.0]), shape
        assert [f(s) for s in (10, 50, 79, 80)] == [1.0, 1.0, 1.0, 1.0], shape
        assert f(85) == pytest.approx(quarter), shape
        assert f(100) == pytest.approx(0.0, abs=1e-12), shape
    assert warmup_stable_decay(10, 100, 0.2, "cosine")(90) == pytest.approx(0.5)  # half-way down
    assert warmup_stable_decay(10, 100, 0.2, "1-sqrt")(99) == pytest.approx(1 - math.sqrt(19 / 20))


def test_a_decay_longer_than_the_run_after_warm_up_starts_when_the_warm_up_ends():
    f = warmup_stable_decay(4, 10, 0.9, "linear")
    assert [f(s) for s in range(4, 11)] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6, 0.0])


def test_constant_holds_the_peak_after_its_warm_up_and_linear_is_bert_s():
    const = schedule("constant", 4, 10)
    assert [const(s) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert const(1000) == 1.0
    linear = schedule("linear", 4, 10)
    assert [linear(s) for s in (0, 3, 4, 7, 10)] == pytest.approx([0.25, 1.0, 1.0, 0.5, 0.0])
    with pytest.raises(ValueError, match="unknown"):
        schedule("step", 4, 10)


def test_the_optimizer_follows_the_schedule_step_by_step():
    param = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.SGD([param], lr=2e-4)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule("wsd", 2, 10, 0.5, "1-sqrt"))
    seen = []
    for _ in range(10):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    want = [1e-4, 2e-4, 2e-4, 2e-4, 2e-4, 2e-4] + [2e-4 * (1 - math.sqrt(k / 5)) for k in range(1, 5)]
    assert seen == pytest.approx(want)
