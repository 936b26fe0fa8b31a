"""The schedule, masking-phase and replay settings of ``pretrain``: exact rates by step, and bad input refused."""

from __future__ import annotations

import pytest

from domainbert.config.domain import load_domain
from domainbert.core.errors import ConfigError

PHASES = "pretrain.mask_schedule=[{until: 0.6, rate: 0.3}, {until: 1.0, rate: 0.15}]"


def test_the_masking_rate_follows_its_phases_by_share_of_steps():
    p = load_domain("science", overrides=[PHASES]).pretrain
    assert [p.mask_rate_at(s, 10) for s in range(10)] == [0.3] * 6 + [0.15] * 4
    assert [p.mask_rate_at(s, 5) for s in range(5)] == [0.3, 0.3, 0.3, 0.15, 0.15]
    three = load_domain("science", overrides=[
        "pretrain.mask_schedule=[{until: 0.25, rate: 0.5}, {until: 0.75, rate: 0.3}, {until: 1.0, rate: 0.05}]"
    ]).pretrain
    assert [three.mask_rate_at(s, 8) for s in range(8)] == [0.5, 0.5, 0.3, 0.3, 0.3, 0.3, 0.05, 0.05]


def test_without_phases_every_step_masks_at_mask_rate():
    p = load_domain("science", overrides=["pretrain.mask_rate=0.2"]).pretrain
    assert {p.mask_rate_at(s, 7) for s in range(7)} == {0.2}
    assert p.mean_mask_rate == 0.2


def test_the_mean_masking_rate_weighs_each_phase_by_its_share_of_the_steps():
    """What the FLOP counts of sparse prediction read: 0.6 x 0.3 + 0.4 x 0.15 = 0.24, not the first phase's."""
    p = load_domain("science", overrides=[PHASES]).pretrain
    assert p.mean_mask_rate == pytest.approx(0.24)
    assert p.mean_mask_rate == pytest.approx(sum(p.mask_rate_at(s, 1000) for s in range(1000)) / 1000)


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("pretrain.mask_schedule=[{until: 0.6, rate: 0.3}, {until: 0.9, rate: 0.15}]", "last must be 1.0"),
        ("pretrain.mask_schedule=[{until: 0.6, rate: 0.3}, {until: 0.5, rate: 0.2}, {until: 1.0, rate: 0.1}]",
         "must grow"),
        ("pretrain.lr_schedule.decay_shape=exponential", "decay_shape"),
        ("pretrain.replay.fraction=1.0", "replay.fraction"),
    ],
)
def test_bad_schedules_are_refused_naming_the_field(override, message):
    with pytest.raises(ConfigError, match=message):
        load_domain("science", overrides=[override])


def test_replay_applies_to_the_arms_that_read_domain_or_task_text():
    p = load_domain("science", overrides=["pretrain.replay.fraction=0.25"]).pretrain
    assert p.replay.replays("continued") and p.replay.replays("tapt") and not p.replay.replays("control")
    only = load_domain("science", overrides=["pretrain.replay.fraction=0.25", "pretrain.replay.arms=[tapt]"]).pretrain
    assert only.replay.replays("tapt") and not only.replay.replays("continued")
    assert not load_domain("science").pretrain.replay.replays("continued")
    with pytest.raises(ConfigError, match="control"):
        load_domain("science", overrides=["pretrain.replay.fraction=0.25", "pretrain.replay.arms=[control]"])


def test_the_equal_token_control_trains_continued_s_total_whatever_continued_replays():
    p = load_domain("science", overrides=["pretrain.replay.fraction=0.25", "pretrain.budget_tokens=4096"]).pretrain
    assert p.arm_budget("control") == p.arm_budget("continued") == 4096  # replay is part of the total, not added


def test_the_schedule_line_names_the_shape_warm_up_and_masking():
    wsd = load_domain("science", overrides=[
        PHASES, "pretrain.lr_schedule.kind=wsd", "pretrain.lr_schedule.decay_fraction=0.2",
        "pretrain.lr_schedule.decay_shape=1-sqrt"]).pretrain.for_arm("continued")
    assert wsd.schedule_line() == (
        "lr warmup-stable-decay (warm-up 6%, 1-sqrt decay over the last 20%); masking 0.3 to 60% -> 0.15 to 100%"
    )
    default = load_domain("science").pretrain.for_arm("continued")
    assert default.schedule_line() == "lr linear (warm-up 6%, then linear decay to 0); masking 0.15"
