"""``domainbert plan``: stage statuses from the recorded fingerprints, budgets and FLOPs, a time estimate."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from domainbert.config.domain import load_domain
from domainbert.core.artifacts import atomic_output
from domainbert.core.models import load_mlm_model
from domainbert.corpus.build import stage_fingerprint
from domainbert.plan.estimate import estimate_seconds
from domainbert.plan.stage_plans import render, stage_plans
from domainbert.pretrain.objective import flops_per_token
from domainbert.pretrain.step_plan import make_plan
from domainbert.pretrain.task_text import arm_config, estimated_task_tokens
from support.pretrain import make_cfg


def _record_corpus(cfg, layout, tmp_path):
    """The fixture corpus, recorded as the corpus stage records a finished build of ``cfg``."""
    shutil.move(layout.corpus, tmp_path / "shards")
    with atomic_output(layout.corpus, config=cfg.corpus.model_dump(mode="json"), fp=stage_fingerprint(cfg)) as tmp:
        shutil.copytree(tmp_path / "shards", tmp, dirs_exist_ok=True)


def test_plan_follows_the_recorded_fingerprints_and_counts_budget_and_flops(base_model, layout, tmp_path):
    cfg = make_cfg(base_model, "pretrain.arms=[continued]")
    plans = {p.name: p for p in stage_plans(cfg, layout)}
    assert plans["corpus"].status == "will run"  # a corpus folder without the stage's record
    assert plans["vocab"].status == plans["pretrain continued"].status == "after corpus"
    runs = len(cfg.finetune.seeds) * len(cfg.finetune.tasks) * 2  # base and continued
    assert plans["finetune"].status == f"will run {runs} of {runs} (after corpus)"
    pcfg = cfg.pretrain.for_arm("continued")
    plan = make_plan(pcfg)
    detail = plans["pretrain continued"].detail
    assert (detail["steps"], detail["tokens"]) == (plan.total_steps, plan.planned_tokens)
    per_token = flops_per_token(load_mlm_model(str(base_model)), pcfg.seq_len, pcfg.mask_rate, pcfg.sparse_prediction)
    assert math.isclose(detail["flops"], per_token * plan.planned_tokens)
    # sparse prediction under a masking schedule: the head's FLOPs at the steps' mean rate (0.24), not a phase's
    phased = make_cfg(base_model, "pretrain.arms=[continued]", "pretrain.sparse_prediction=true",
                      "pretrain.mask_schedule=[{until: 0.6, rate: 0.3}, {until: 1.0, rate: 0.15}]")
    flops = next(p for p in stage_plans(phased, layout) if p.name == "pretrain continued").detail["flops"]
    model = load_mlm_model(str(base_model))
    assert math.isclose(flops, flops_per_token(model, pcfg.seq_len, 0.24, True) * plan.planned_tokens)
    assert not math.isclose(flops, flops_per_token(model, pcfg.seq_len, 0.3, True) * plan.planned_tokens)

    _record_corpus(cfg, layout, tmp_path)
    plans = {p.name: p for p in stage_plans(cfg, layout)}
    assert plans["corpus"].status == "up to date" and plans["vocab"].status == "will run"
    assert plans["pretrain continued"].status == "will run"  # built from the corpus and the base, not the vocab
    both = {p.name: p.status for p in stage_plans(make_cfg(base_model, "pretrain.arms=[continued, extended]"), layout)}
    assert both["pretrain extended"] == "after vocab" and both["finetune"].endswith("(after vocab)")
    changed = make_cfg(base_model, "pretrain.arms=[continued]", "corpus.dedup.threshold=0.7")
    assert stage_plans(changed, layout)[0].status == "will rerun: config or inputs changed"

    seconds = estimate_seconds(cfg, stage_plans(cfg, layout), workers=2)
    assert set(seconds) == {"pretrain continued", "finetune"} and all(0 < s < math.inf for s in seconds.values())
    text = render(stage_plans(cfg, layout), seconds)
    assert "pretrain continued   will run" in text and "estimated model time" in text


def test_plan_command_prints_one_line_per_stage(base_model, layout, capsys):
    from domainbert.cli import run_cli

    assert run_cli(["plan", "science", f"base_model.name_or_path={base_model}", "finetune.forgetting_task.enabled=true", "--no-estimate",
                    "--out", str(layout.root)]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = [line for line in out if not line.startswith(("warning: ", "power ", "disk: "))]
    assert [" ".join(line.split()[:2]) for line in lines] == [
        "corpus will", "vocab after", "pretrain base-warmup", "pretrain continued", "pretrain control",
        "pretrain tapt", "finetune will", "forgetting meter:"]
    # the general-English task's share of the runs, in one line
    [meter] = [line for line in lines if line.startswith("  forgetting meter: general-lexname, ")]
    assert "finetune.forgetting_task.enabled: false drops it" in meter
    # and the design's power, per task
    assert [line.split(":")[0] for line in out if line.startswith("power ")] == [
        "power science-terms-ner", "power science-subject", "power general-lexname"]
    assert "pretrain base-warmup not needed (the base checkpoint has its MLM head)" in lines
    # each arm's schedules, in its line
    [continued] = [line for line in lines if line.startswith("pretrain continued")]
    assert "schedule: lr linear (warm-up 6%, then linear decay to 0); masking 0.15" in continued
    # the demo's TAPT arm: its budget is passes over a task text the arm's own stage builds; until then the
    # task files size it, read as that stage reads them
    [tapt] = [line for line in lines if line.startswith("pretrain tapt")]
    assert tapt.split()[2:4] == ["will", "run"] and "(task text estimated from the task files)" in tapt
    cfg = load_domain("science", [f"base_model.name_or_path={base_model}"])
    tokens = int(tapt.split(" tokens")[0].split()[-1].replace(",", ""))
    pcfg = arm_config(cfg, "tapt", layout, estimate=True)
    assert pcfg.budget_tokens == math.ceil(cfg.pretrain.tapt.epochs * estimated_task_tokens(cfg))
    assert tokens == make_plan(pcfg).planned_tokens


def test_plan_warns_of_a_budget_of_a_million_passes_over_the_corpus(base_model, layout, capsys):
    from domainbert.cli import run_cli

    (layout.corpus / "manifest.json").write_text(json.dumps({"estimated_tokens": {"train": 800_000}}))
    args = ["plan", "science", f"base_model.name_or_path={base_model}", "--no-estimate", "--out", str(layout.root)]
    assert run_cli([*args, "pretrain.budget_tokens=1000000000000"]) == 0
    warnings = [line for line in capsys.readouterr().out.splitlines() if line.startswith("warning: ")]
    assert any("1,250,000 passes over the 800,000-token corpus" in w for w in warnings), warnings
    assert run_cli(args) == 0  # the profile's own budget: no budget warning
    out = capsys.readouterr().out.splitlines()
    assert not any("passes over" in line for line in out if line.startswith("warning: "))


def test_plan_takes_run_s_workers_0_the_default_as_one_run_at_a_time(base_model, layout, capsys):
    """``run --workers 0`` (its default) trains one run at a time in-process: ``plan`` takes the same value and
    prices it as one worker, and two workers at half the fine-tuning time (the guess scales with workers)."""
    from domainbert.cli import run_cli

    args = ["plan", "science", f"base_model.name_or_path={base_model}", "--no-calibrate", "--out", str(layout.root)]

    def finetune_minutes(*extra: str) -> float:
        assert run_cli([*args, *extra]) == 0
        [line] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("finetune ")]
        return float(line.rsplit("~", 1)[1].split()[0])

    default, zero, one, two = finetune_minutes(), finetune_minutes("--workers", "0"), *(
        finetune_minutes("--workers", n) for n in ("1", "2"))
    assert default == zero == one > 0
    assert two == pytest.approx(one / 2, abs=0.1)


def test_plan_lists_the_base_warmup_of_a_headless_checkpoint(base_model, layout, tmp_path):
    from transformers import BertModel

    headless = tmp_path / "headless"
    BertModel.from_pretrained(base_model).save_pretrained(headless)  # an encoder without its MLM head
    shutil.copy(base_model / "tokenizer.json", headless)
    shutil.copy(base_model / "tokenizer_config.json", headless)
    cfg = make_cfg(headless, "pretrain.arms=[continued]", "pretrain.base_warmup.steps=7")
    _record_corpus(cfg, layout, tmp_path)
    plans = {p.name: p for p in stage_plans(cfg, layout)}
    warmup = plans["pretrain base-warmup"]
    assert warmup.status == "will run"
    hw = cfg.pretrain.base_warmup  # its own batch and length, not the arms'
    assert (warmup.detail["steps"], warmup.detail["tokens"]) == (7, 7 * hw.batch_size * hw.seq_len)
    assert plans["pretrain continued"].status == "after pretrain base-warmup"
    seconds = estimate_seconds(cfg, list(plans.values()))
    assert seconds["pretrain base-warmup"] > 0
    tokens = 7 * hw.batch_size * hw.seq_len
    text = render(list(plans.values()), seconds)
    assert f"pretrain base-warmup will run  7 steps, {tokens:,} tokens, lr 0.0005 (encoder 5e-05)" in text


def test_every_full_profile_validates_and_plans_offline(tmp_path, capsys, monkeypatch):
    """The full profiles name Hub models (bert-base-cased, microsoft/deberta-v3-base, xlm-roberta-base): offline,
    `validate` and `plan` still answer, without a traceback, and say why there is no time estimate."""
    from domainbert.cli import run_cli

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    for domain in ("science", "law", "economics", "tweets"):
        assert run_cli(["validate", domain, "--profile", "full"]) == 0
        assert run_cli(["plan", domain, "--profile", "full", "--out", str(tmp_path / domain)]) == 0
        out = capsys.readouterr().out
        assert "pretrain scratch" in out and "no time estimate: the base model" in out, out
        [scratch] = [line for line in out.splitlines() if line.startswith("pretrain scratch")]
        assert ("replaced-token detection" in scratch) == (domain == "economics"), scratch  # EconBERTa's objective
    assert run_cli(["validate", "tweets", "--profile", "multilingual"]) == 0  # XLM-T's setting offline


def test_plan_prints_each_arm_s_schedule_and_replay_in_its_line(base_model, layout):
    cfg = make_cfg(base_model, "pretrain.arms=[continued, control]", "pretrain.lr_schedule.kind=wsd",
                   "pretrain.lr_schedule.decay_shape=cosine", "pretrain.replay.fraction=0.25",
                   "pretrain.mask_schedule=[{until: 0.6, rate: 0.3}, {until: 1.0, rate: 0.15}]")
    lines = {line.split()[1]: line for line in render(stage_plans(cfg, layout), None).splitlines()
             if line.startswith("pretrain ")}
    wsd = "schedule: lr warmup-stable-decay (warm-up 6%, cosine decay over the last 10%); masking 0.3 to 60% -> 0.15"
    assert f"{wsd} to 100%; replay 25% general text" in lines["continued"]
    assert lines["control"].endswith(f"{wsd} to 100%")  # the control reads general text throughout
