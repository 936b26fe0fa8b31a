"""Token budgets and the sequence-length schedule."""

from __future__ import annotations

import pytest

from domainbert.core.errors import ConfigError
from domainbert.pretrain.step_plan import make_plan
from support.pretrain import make_cfg


def test_budget_buys_whole_steps(base_model):
    plan = make_plan(make_cfg(base_model, "pretrain.budget_tokens=1000").pretrain)
    assert plan.total_steps == 8 and plan.planned_tokens == 8 * 4 * 32  # ceil(1000 / 128)
    assert make_plan(make_cfg(base_model, "pretrain.grad_accum=2").pretrain, world_size=2).total_steps == 2
    assert make_plan(make_cfg(base_model, "pretrain.max_steps=3").pretrain).total_steps == 3


def test_bert_length_schedule_with_constant_batch_tokens(base_model):
    pcfg = make_cfg(base_model, "pretrain.seq_len=128", "pretrain.batch_size=16", "pretrain.budget_tokens=204800",
                    "pretrain.seq_len_schedule=[{fraction: 0.9, seq_len: 128}, {fraction: 0.1, seq_len: 512}]").pretrain
    plan = make_plan(pcfg)
    assert plan.total_steps == 100
    (short, long_), = [plan.phases]
    assert (short.start, short.end, short.seq_len, short.batch_size) == (0, 90, 128, 16)
    assert (long_.start, long_.end, long_.seq_len, long_.batch_size) == (90, 100, 512, 4)
    assert plan.phase_at(89).seq_len == 128 and plan.phase_at(90).seq_len == 512
    assert plan.planned_tokens == 204800


def test_length_schedule_with_constant_batch_size(base_model):
    pcfg = make_cfg(base_model, "pretrain.seq_len=128", "pretrain.batch_size=16", "pretrain.budget_tokens=300000",
                    "pretrain.constant_batch_tokens=false",
                    "pretrain.seq_len_schedule=[{fraction: 0.5, seq_len: 128}, {fraction: 0.5, seq_len: 512}]").pretrain
    plan = make_plan(pcfg)
    # mean tokens per step = 0.5 * 2048 + 0.5 * 8192 = 5120 -> ceil(300000 / 5120) = 59 steps
    assert plan.total_steps == 59
    assert [p.batch_size for p in plan.phases] == [16, 16]


def test_schedule_fractions_must_sum_to_one(base_model):
    with pytest.raises(ConfigError, match="sum to 1"):
        make_cfg(base_model, "pretrain.seq_len_schedule=[{fraction: 0.5, seq_len: 128}]")
