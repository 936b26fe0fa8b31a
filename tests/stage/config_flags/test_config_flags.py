"""Settings far from the literature's defaults, and budgets under a tenth of a pass or over a hundred passes,
are named; the shipped profiles' settings are not."""

from __future__ import annotations

from pathlib import Path

import pytest

from domainbert.config.domain import load_domain
from domainbert.config_flags import budget_flags, passes, setting_flags


@pytest.mark.parametrize("domain", ["science", "economics", "law", "tweets"])
def test_the_shipped_offline_profiles_raise_no_setting_flag_but_a_from_scratch_arm_at_their_budgets(domain):
    cfg = load_domain(domain, [])
    flags = setting_flags(cfg)
    if "scratch" in cfg.pretrain.arms:  # a few hundred thousand tokens: the arm cannot learn, and plan says so
        (flag,) = flags
        assert flag.startswith(f"pretrain: scratch from scratch on {cfg.pretrain.budget_tokens:,} tokens")
    else:
        assert flags == []
    assert setting_flags(load_domain(domain, ["pretrain.budget_tokens=10000000"])) == []


def test_a_from_scratch_arm_under_ten_million_tokens_is_flagged_and_a_checkpoint_arm_is_not():
    small = ["pretrain.budget_tokens=9999999"]
    assert any("from scratch on 9,999,999 tokens" in f for f in setting_flags(load_domain("law", small)))
    assert setting_flags(load_domain("law", [*small, "pretrain.arms=[continued, extended]"])) == []


def test_a_top_level_learning_rate_far_from_an_arms_default_is_named_with_its_source():
    cfg = load_domain("science", ["pretrain.lr=5e-3"])
    flags = setting_flags(cfg)
    assert len(flags) == 3  # continued, control and extended: 50 times their 1e-4
    assert all("5e-3" in f or "0.005" in f for f in flags) and all("set by pretrain.lr" in f for f in flags)
    # the same rate is ordinary for a from-scratch arm (5e-4 default, 10x = still flagged; 2e-3 is within 5x)
    scratch = load_domain("science", ["pretrain.arms=[scratch]", "pretrain.arm_optim={scratch: {lr: 2.0e-3}}",
                                      "pretrain.budget_tokens=10000000"])
    assert setting_flags(scratch) == []


def test_masking_warmup_and_sequence_length_flags():
    flags = setting_flags(load_domain("science", ["pretrain.mask_rate=0.6", "pretrain.warmup_ratio=0.5",
                                                  "pretrain.seq_len=32"]))
    assert any("mask_rate is 0.6" in f for f in flags)
    assert sum("warms its learning rate up over 50%" in f for f in flags) == 3  # continued, control, extended
    assert any("sequences of 32 tokens" in f for f in flags)
    # a masking schedule: each phase's rate is checked, not the mask_rate it replaces
    phased = setting_flags(load_domain("science", [
        "pretrain.mask_schedule=[{until: 0.5, rate: 0.5}, {until: 0.9, rate: 0.3}, {until: 1.0, rate: 0.05}]"]))
    masking = [f for f in phased if "untested in the literature" in f]
    assert len(masking) == 2 and "phase 1 (until 50%) is 0.5" in masking[0] and "phase 3" in masking[1], masking


def test_a_million_passes_and_a_sliver_of_a_pass_are_flagged():
    cfg = load_domain("science", ["pretrain.budget_tokens=1000000000000"])
    assert passes(cfg, 799_314) == pytest.approx(1.251e6, rel=1e-3)
    [flag] = budget_flags(cfg, 799_314)
    assert "1,251,073 passes" in flag and "memorise" in flag
    [flag] = budget_flags(load_domain("science", ["pretrain.budget_tokens=50000"]), 799_314)
    assert "0.0626 passes" in flag
    assert budget_flags(load_domain("science", []), 799_314) == []  # the demo's 86,016 tokens: 0.11 passes
    assert budget_flags(cfg, None) == []  # no corpus yet: nothing to say


@pytest.mark.parametrize("native", [True, False])
def test_bf16_is_auto_where_native_and_flagged_where_torch_would_emulate_it(monkeypatch, native):
    import torch

    from domainbert.config_flags import machine_flags
    from domainbert.core.distributed import resolve_precision
    from domainbert.pretrain.runtime import autocast_dtype

    # What the CPU reports about itself, as on an AVX512-BF16 machine and on an AVX2-only one.
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: native)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cpu = torch.device("cpu")
    assert resolve_precision("auto", cpu) == ("bf16" if native else "fp32")
    assert autocast_dtype("auto") == (torch.bfloat16 if native else None)
    assert resolve_precision("bf16", cpu) == "bf16" and resolve_precision("fp32", cpu) == "fp32"
    for domain in ("science", "economics", "law", "tweets"):
        assert machine_flags(load_domain(domain, [])) == []  # the offline profiles say auto
    flags = machine_flags(load_domain("science", ["pretrain.precision=bf16"]))
    assert len(flags) == (0 if native else 1) and all("pretrain.precision is bf16" in f for f in flags)


def test_before_the_corpus_exists_the_budget_is_weighed_against_the_most_its_source_files_hold(tmp_path):
    import gzip
    import json

    from domainbert.config_flags import source_budget_flags
    from domainbert.corpus.source_check import source_tokens_at_most

    line = b'{"text": "word word"}\n'
    (tmp_path / "a.jsonl").write_bytes(line * 100)
    (tmp_path / "b.jsonl.gz").write_bytes(gzip.compress(line * 1000))  # gzip records the size it unpacks to
    sources = [{"type": "local", "name": "s", "paths": [str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl.gz")]}]
    cfg = load_domain("science", [f"corpus.sources={json.dumps(sources)}", "pretrain.budget_tokens=10000000"])
    at_most = source_tokens_at_most(cfg.corpus.sources)
    assert at_most == len(line) * 1100 // 2  # at most one token per 2 bytes of text
    [flag] = source_budget_flags(cfg, at_most)
    assert "at least 826 passes" in flag and "the corpus is not built yet" in flag
    assert source_budget_flags(load_domain("science", []), at_most) == []  # 86,016 tokens: 7 passes at most
    # under a tenth of a pass over the files is no warning: filters and deduplication may shrink the corpus
    assert source_budget_flags(load_domain("science", ["pretrain.budget_tokens=10"]), at_most) == []
    assert source_tokens_at_most(load_domain("science", [], profile="full").corpus.sources) is None  # a Hub dataset


@pytest.mark.parametrize("domain", ["science", "economics", "law", "tweets"])
def test_the_shipped_budgets_are_in_range_of_their_source_files(domain):
    from domainbert.config_flags import source_budget_flags
    from domainbert.corpus.source_check import source_tokens_at_most

    cfg = load_domain(domain, [])
    assert source_budget_flags(cfg, source_tokens_at_most(cfg.corpus.sources)) == []


def test_validate_and_plan_warn_of_an_absurd_budget_before_the_corpus_exists(tmp_path, capsys, monkeypatch):
    from domainbert.cli import run_cli
    from domainbert.core.paths import project_root

    root = project_root()
    monkeypatch.chdir(tmp_path)  # validate reads runs/science/ under the working folder: a demo run's corpus there
    text = (root / "domains" / "science.yaml").read_text().replace("../corpora", str(root / "corpora"))
    domain = tmp_path / "science.yaml"
    domain.write_text(text.replace("budget_tokens: 86016", "budget_tokens: 1000000000000000"))
    assert run_cli(["validate", str(domain)]) == 0
    err = capsys.readouterr().err
    assert "warning: pretrain.budget_tokens 1,000,000,000,000,000 is at least" in err, err
    out = tmp_path / "run"
    assert run_cli(["plan", "science", "pretrain.budget_tokens=1000000000000000", "--no-estimate", "--out", str(out)]) == 0
    assert "warning: pretrain.budget_tokens 1,000,000,000,000,000 is at least" in capsys.readouterr().out


def test_an_arms_own_budget_is_what_it_trains_and_is_weighed_and_the_control_follows_continued():
    from domainbert.core.paths import RunLayout
    from domainbert.pretrain.stage import arm_fingerprint

    own = "pretrain.arm_optim={scratch: {budget_tokens: 24576000}, continued: {budget_tokens: 172032}}"
    cfg = load_domain("science", ["pretrain.arms=[continued, control, scratch]", "pretrain.budget_tokens=86016", own])
    p = cfg.pretrain
    assert [p.for_arm(a).budget_tokens for a in ("continued", "control", "scratch")] == [172032, 172032, 24576000]
    assert setting_flags(cfg) == []  # scratch's own 24.6 M tokens is over the 10 M the check asks for
    flags = budget_flags(cfg, 800_000)  # 30.7 passes and 0.215: neither flagged
    assert flags == []
    [flag] = budget_flags(cfg, 200_000)  # scratch's budget: 123 passes
    # continued's (and so the control's) 172,032 tokens under a tenth of a pass: one flag, named by its setting
    [flag_small] = budget_flags(cfg, 2_000_000)
    assert flag_small.startswith("pretrain.arm_optim.continued.budget_tokens 172,032 is 0.086 passes")
    assert flag.startswith("pretrain.arm_optim.scratch.budget_tokens 24,576,000 is 123 passes")
    # the budget is part of what the arm's result depends on; another arm's budget is not
    layout = RunLayout(Path("run"))
    fp = arm_fingerprint(cfg, "continued", layout)
    more = load_domain("science", ["pretrain.arms=[continued, control, scratch]", "pretrain.budget_tokens=86016",
                                   own.replace("172032", "172033")])
    other = load_domain("science", ["pretrain.arms=[continued, control, scratch]", "pretrain.budget_tokens=86016",
                                    own.replace("24576000", "12288000")])
    assert arm_fingerprint(more, "continued", layout) != fp
    assert arm_fingerprint(other, "continued", layout) == fp


def test_validate_takes_run_s_overrides_and_warns_of_a_from_scratch_arm_it_would_run(capsys):
    """`validate science "pretrain.arms=[continued,scratch]"`: the overrides apply (they are not domain names),
    and the warning is the one `plan` gives for such an arm."""
    from domainbert.cli import run_cli

    assert run_cli(["validate", "science", "pretrain.arms=[continued,scratch]"]) == 0
    captured = capsys.readouterr()
    assert "unknown domain" not in captured.err and "ok  science (offline)" in captured.out
    assert "arms continued, scratch" in captured.out
    assert "warning: pretrain: scratch from scratch on" in captured.err, captured.err
    assert run_cli(["validate", "science", "pretrain.max_stpes=5"]) == 2
    assert "pretrain.max_stpes" in capsys.readouterr().err
