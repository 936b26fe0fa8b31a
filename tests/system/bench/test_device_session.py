"""bench/device_session.py: the one prepared call a lent GPU gets. ``--cpu-smoke`` runs every part's code path on
the CPU (the GPU check's configurations, a law run with its chunked variant, science's from-scratch study) and
each part's record is checked for the fields a device session is read for (one test: the run takes minutes); the
GPU check's whole record is checked here too (this run is the GPU check's CPU smoke run). The budget's slices, skips and failures are
checked without running anything heavy."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "bench"
sys.path.insert(0, str(BENCH))

import device_session  # noqa: E402
import device_session_parts as parts  # noqa: E402

PRETRAINING = ["own-128", "own-512", "torchrun-128", "hf-group-texts-bf16-128", "hf-group-texts-bf16-512"]


def _session(out: Path, *args: str, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(out / "results"), "OMP_NUM_THREADS": "1",
           "XDG_CACHE_HOME": str(out / "cache")}  # the base warm-up's machine cache: the test's own
    argv = [sys.executable, str(BENCH / "device_session.py"), "--out", str(out / "device"), "--work", str(out / "work"),
            *args]
    return subprocess.run(argv, cwd=out, env=env, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_the_cpu_dry_run_runs_every_part_and_each_record_holds_its_figures(tmp_path):
    """One test for the one run (minutes): a fixture shared by several tests would run once per test process
    that takes one of them."""
    proc = _session(tmp_path, "--cpu-smoke", "--budget-s", "1500", timeout=1800)
    assert proc.returncode == 0, proc.stderr[-4000:]
    smoke = json.loads(proc.stdout), tmp_path / "device"
    every_part_ran_and_wrote_its_record(smoke)
    gpu_check_part_holds_every_figure(smoke)
    law_part_compares_both_checkpoints_truncated_and_chunked_with_the_floor(smoke)
    scratch_part_pairs_scratch_with_continued_on_both_science_tasks(smoke)


def every_part_ran_and_wrote_its_record(smoke):
    session, out = smoke
    assert session == json.loads((out / "session.json").read_text())  # stdout is the JSON alone
    assert session["mode"] == "cpu-smoke" and session["budget_s"] == 1500 and session["git_commit"]
    assert list(session["parts"]) == list(parts.PARTS)
    # what comes back from a lease: the session's and the parts' JSON alone, the run folders elsewhere
    assert sorted(p.name for p in out.iterdir()) == sorted(["session.json", *(f"{n}.json" for n in parts.PARTS)])
    for name in parts.PARTS:
        record = json.loads((out / f"{name}.json").read_text())
        assert record["part"] == name and record["status"] == "done", record
        assert session["parts"][name] == {k: record[k] for k in ("status", "reason", "seconds")}
        assert 0 < record["seconds"] <= record["allowance_s"] + 60


def gpu_check_part_holds_every_figure(smoke):
    _, out = smoke
    part = json.loads((out / "gpu-check.json").read_text())
    assert part["compile"] is False  # compiling on a CPU takes minutes: the GPU session turns it on
    record = part["record"]
    assert record["mode"] == "cpu-smoke" and "real tok/s" in record["table"][0]
    for key in ("device", "git_commit", "configurations", "ratios", "targets", "machine", "table"):
        assert key in record, key
    assert {"torch", "cuda", "name", "peak_flops"} <= set(record["device"])
    configs = record["configurations"]
    assert list(configs) == parts.GPU_CONFIGS.split(",")  # in the session's order of priority
    assert "loader" not in configs and set(part["configurations_run"]) == set(configs) - {"deepspeed-zero2-128"}
    for name in PRETRAINING:
        assert configs[name]["real_tokens_per_s"] > 0 and configs[name]["mfu"] > 0, (name, configs[name])
        assert configs[name]["peak_memory_mib"] > 0
    for name in ("own-128", "own-512", "torchrun-128"):
        assert 0 <= configs[name]["data_wait_share"] < 1
    assert configs["torchrun-128"]["launched_by_torchrun"] is True
    assert "skipped" in configs["deepspeed-zero2-128"]  # the smoke mode leaves DeepSpeed out and says so
    assert configs["hf-group-texts-bf16-128"]["torch_compile"] is False
    finetune = configs["finetune-ner"]
    assert finetune["examples_per_s"] > 0 and finetune["trainer_examples_per_s"] > 0
    assert set(finetune["learned"]) == {"ours", "trainer"} and "floor_test_f1" in finetune
    ratios = record["ratios"]
    assert ratios["own_vs_hf_group_texts_bf16_128"] > 0 and ratios["finetune_vs_trainer"] > 0
    assert ratios["own_vs_hf_group_texts_bf16_512"] > 0 and ratios["torchrun_vs_own_128"] > 0


def law_part_compares_both_checkpoints_truncated_and_chunked_with_the_floor(smoke):
    _, out = smoke
    part = json.loads((out / "law-chunked.json").read_text())
    assert part["seeds_done"] == [1] and part["models"] == ["base", "original"] and part["chunks"] == 2
    record = part["record"]
    tasks = {"law-license-category", "law-license-category-chunked"}
    assert {(c["task"], c["model"]) for c in record["vs_floor"]} == {(t, m) for t in tasks for m in part["models"]}
    for c in record["vs_floor"]:
        assert c["ci_low"] <= c["diff"] <= c["ci_high"] and c["verdict"]
    assert {s["model"] for s in record["scores"]} == {"base", "original", "floor"}
    assert {row["model"] for row in record["chunked_minus_truncated"]["law-license-category"]} == {"base", "original"}
    read = record["tokens_read"]["law-license-category"]
    assert 0 < read["read_truncated"] < read["read_chunked"] <= 1  # two windows read more of each licence
    assert "finetune.pooling=mean" in record["overrides"]


def scratch_part_pairs_scratch_with_continued_on_both_science_tasks(smoke):
    _, out = smoke
    part = json.loads((out / "scratch-catch-up.json").read_text())
    assert part["scratch_budget_tokens"] == 8192 and part["continued_budget_tokens"] == 4096
    for arm in ("continued", "scratch"):
        assert part["pretrain"][arm]["finished"] is True and part["pretrain"][arm]["steps"] >= 1
    tasks = {"science-terms-ner", "science-subject"}
    assert set(part["scratch_minus_continued"]) == tasks
    for task, c in part["scratch_minus_continued"].items():
        assert c["a"]["n"] == c["b"]["n"] == c["seeds"] == 1 and c["verdict"], (task, c)
    assert {(s["task"], s["model"]) for s in part["scores"]} >= {(t, m) for t in tasks for m in ("continued", "scratch")}
    assert {c["model"] for c in part["vs_floor"]} == {"continued", "scratch"}


def test_slices_add_up_to_the_budget_in_order():
    ends = device_session.slice_ends(100.0, 540.0, list(parts.PARTS))
    assert list(ends) == list(parts.PARTS) and ends["scratch-catch-up"] == pytest.approx(640.0)
    assert 100 < ends["gpu-check"] < ends["law-chunked"] < ends["scratch-catch-up"]
    alone = device_session.slice_ends(0.0, 540.0, ["law-chunked"])
    assert alone == {"law-chunked": pytest.approx(540.0)}  # a part asked for alone gets the whole budget


def test_a_part_that_cannot_fit_is_skipped_and_a_failing_one_recorded(tmp_path, monkeypatch):
    session = parts.Session(out=tmp_path, work=tmp_path / "work", smoke=True, args=argparse.Namespace())
    skipped = parts.run_part("gpu-check", session, allowance=20.0, min_seconds=60.0)
    assert skipped["status"] == "skipped" and "20 s left" in skipped["reason"] and skipped["seconds"] == 0.0

    def broken(session, deadline):
        raise RuntimeError("no CUDA device")

    monkeypatch.setitem(parts.PART_FUNCTIONS, "law-chunked", broken)
    failed = parts.run_part("law-chunked", session, allowance=100.0, min_seconds=60.0)
    assert failed["status"] == "failed" and failed["reason"] == "RuntimeError: no CUDA device"
    assert any("no CUDA device" in line for line in failed["traceback_tail"])


def test_the_session_goes_on_after_a_skip_and_says_why(tmp_path):
    # a budget no part fits: every part skipped with its reason, each record and the session written
    proc = _session(tmp_path, "--cpu-smoke", "--budget-s", "30", timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    session = json.loads(proc.stdout)
    for name in parts.PARTS:
        assert session["parts"][name]["status"] == "skipped" and "least" in session["parts"][name]["reason"]
        assert json.loads((tmp_path / "device" / f"{name}.json").read_text())["status"] == "skipped"
    assert _session(tmp_path, "--parts", "law", timeout=60).returncode == 2  # unknown part: refused


def test_the_checks_compile_flag_reaches_both_sides_and_only_keeps_its_order():
    import gpu_check

    plan = gpu_check.specs(gpu_check.parse_args(["--compile"]), Path("w"), Path("c"), "model", "cuda")
    for name in ("own-128", "own-512", "torchrun-128"):
        assert plan[name][0]["overrides"] == ["pretrain.compile=true"], name
    assert plan["deepspeed-zero2-128"][0]["overrides"] == [*gpu_check.ZERO2, "pretrain.compile=true"]
    assert plan["hf-group-texts-bf16-128"][0]["compile"] is plan["hf-group-texts-bf16-512"][0]["compile"] is True
    plain = gpu_check.specs(gpu_check.parse_args([]), Path("w"), Path("c"), "model", "cuda")
    assert plain["own-128"][0]["overrides"] == [] and plain["hf-group-texts-bf16-128"][0]["compile"] is False
    order = gpu_check.parse_args(["--only", parts.GPU_CONFIGS]).only
    assert order == parts.GPU_CONFIGS.split(",") and order[:3] == ["own-128", "hf-group-texts-bf16-128", "finetune-ner"]
