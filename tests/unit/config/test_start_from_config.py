"""``pretrain.start_from``: the starts a run can make, the learning rate of a started arm step by step with and
without re-warm-up, the start in an arm's fingerprint (a default config keeps its fingerprints) and in ``plan``."""

from __future__ import annotations

import math

import pytest
import torch

from domainbert.config.domain import load_domain
from domainbert.core.errors import ConfigError
from domainbert.core.paths import RunLayout
from domainbert.plan.stage_plans import _schedule_line
from domainbert.pretrain import stage
from domainbert.pretrain.engine import lr_scheduler

ARMS = "pretrain.arms=[continued, extended, scratch, control, self-pretrain]"


def _cfg(*overrides: str):
    return load_domain("science", overrides=[ARMS, "pretrain.checkpoint_every=100", *overrides])


@pytest.mark.parametrize(
    ("start", "message"),
    [
        ("{continued: {arm: control, step: 100}}", r"start_from.continued.arm: control must be an arm listed before"),
        ("{control: {arm: tapt, step: 100}}", r"start_from.control.arm: tapt must be an arm listed before"),
        ("{self-pretrain: {arm: continued, step: 100}}", r"continued's weights have another vocabulary"),
        ("{control: {arm: continued, step: 150}}", r"start_from.control.step: 150 is not a checkpoint step"),
        ("{tapt: {arm: continued, step: 100}}", r"start_from.tapt: tapt is not one of the arms"),
        ("{control: {arm: continued, step: 100, warm: true}}", r"warm"),
    ],
)
def test_a_start_the_run_cannot_make_is_refused_naming_the_field(start, message):
    with pytest.raises(ConfigError, match=message):
        _cfg(f"pretrain.start_from={start}")


def _lrs(pcfg, start, total_steps: int) -> list[float]:
    """The rate each of ``total_steps`` steps trains with."""
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=pcfg.peak_lr)
    scheduler = lr_scheduler(optimizer, pcfg, total_steps, start)
    rates = []
    for _ in range(total_steps):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    return rates


def test_without_re_warm_up_the_schedule_continues_from_the_step_and_with_it_warms_up_afresh():
    wsd = ("pretrain.lr=1.0e-3", "pretrain.warmup_ratio=0.25", "pretrain.lr_schedule.kind=wsd",
           "pretrain.lr_schedule.decay_fraction=0.25", "pretrain.lr_schedule.decay_shape=1-sqrt")
    cfg = _cfg(*wsd, "pretrain.checkpoint_every=10", "pretrain.start_from={control: {arm: continued, step: 20}}")
    pcfg, start = cfg.pretrain.for_arm("control"), cfg.pretrain.start_from["control"]
    # step i of 20 is step 20 + i of 40: the peak until the decay's last 10 steps, then 1 - sqrt(progress)
    rates = _lrs(pcfg, start, 20)
    assert rates[0] == rates[9] == 1e-3
    assert rates[10:] == pytest.approx([1e-3 * (1 - math.sqrt(k / 10)) for k in range(10)], abs=1e-15)
    # re-warmed: a warm-up of 5 of its own 20 steps, the peak, the decay over its own last 5
    rewarmed = start.model_copy(update={"rewarm": True})
    rates = _lrs(pcfg, rewarmed, 20)
    assert rates[:5] == pytest.approx([1e-3 * k / 5 for k in range(1, 6)], abs=1e-15)
    assert rates[5] == rates[14] == 1e-3
    assert rates[16] == pytest.approx(1e-3 * (1 - math.sqrt(1 / 5)), abs=1e-15)
    # a linear decay continued from step 20 of 30: (30 - s) / 30, no warm-up
    linear = _cfg("pretrain.lr=1.0e-3", "pretrain.checkpoint_every=10",
                  "pretrain.start_from={control: {arm: continued, step: 20}}")
    rates = _lrs(linear.pretrain.for_arm("control"), start, 10)
    assert rates == pytest.approx([1e-3 * (10 - k) / 30 for k in range(10)], abs=1e-15)


def test_the_start_enters_its_arm_s_fingerprint_alone(tmp_path):
    layout = RunLayout(tmp_path)
    default = _cfg()
    fps = {arm: stage.arm_fingerprint(default, arm, layout) for arm in ("continued", "control")}
    starts = {
        step: _cfg(f"pretrain.start_from={{control: {{arm: continued, step: {step}, rewarm: {rewarm}}}}}")
        for step, rewarm in ((100, "false"), (200, "false"), (300, "true"))
    }
    started = {step: stage.arm_fingerprint(cfg, "control", layout) for step, cfg in starts.items()}
    assert len({fps["control"], *started.values()}) == 4  # the start, its step and rewarm change it
    assert {stage.arm_fingerprint(cfg, "continued", layout) for cfg in starts.values()} == {fps["continued"]}
    # a change of the source's recipe reruns the arm that starts from it
    source_changed = _cfg("pretrain.arm_optim={continued: {lr: 2.0e-4}}",
                          "pretrain.start_from={control: {arm: continued, step: 100}}")
    assert stage.arm_fingerprint(source_changed, "control", layout) != started[100]


def test_plan_names_the_start_in_the_arm_s_schedule_line():
    cfg = _cfg("pretrain.start_from={control: {arm: continued, step: 200}}")
    assert _schedule_line(cfg.pretrain.for_arm("control"), "control") == (
        "from continued@200, no re-warm-up; lr linear (warm-up 0%, then linear decay to 0); masking 0.15"
    )
    rewarm = _cfg("pretrain.start_from={control: {arm: continued, step: 200, rewarm: true}}")
    assert _schedule_line(rewarm.pretrain.for_arm("control"), "control").startswith(
        "from continued@200, re-warm-up; lr linear (warm-up 6%"
    )
    assert _schedule_line(cfg.pretrain.for_arm("continued"), "continued").startswith("lr linear (warm-up 6%")
