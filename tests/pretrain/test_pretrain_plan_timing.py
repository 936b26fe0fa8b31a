"""``plan``'s time estimate is measured here: probes timed on this machine, cached per shape and load."""

from __future__ import annotations

import math

from pretrain_fixtures import make_cfg

from domainbert import plan_timing
from domainbert.core.paths import machine_cache
from domainbert.run_plan import estimate, render, stage_plans

ARM = "pretrain continued"


def _cfg(base_model, *more):
    return make_cfg(base_model, "pretrain.arms=[continued]", "finetune.only_tasks=[science-terms-ner]", *more)


def _probes(est):
    """The estimate's lines about timed steps (a run's setup is timed on every plan, never cached)."""
    return [h for h in est.how if "tokens/s" in h]


class _Clock:
    """A probe clock that moves only by what each probe step is made to take (the steps still run)."""

    def __init__(self) -> None:
        self.now, self.step_s = 0.0, 0.1

    def __call__(self) -> float:
        return self.now


def test_the_estimate_follows_the_measured_rate_and_the_cache_its_shape(base_model, layout, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_timing, "current_load", lambda: 0.5)
    clock, timed = _Clock(), plan_timing._timed
    monkeypatch.setattr(plan_timing, "clock", clock)

    def advancing(step, n):
        def run():
            step()
            clock.now += clock.step_s

        return timed(run, n)

    monkeypatch.setattr(plan_timing, "_timed", advancing)
    cfg = _cfg(base_model)
    plans = stage_plans(cfg, layout)
    tokens = next(p for p in plans if p.name == ARM).detail["tokens"]
    first = estimate(cfg, plans)
    assert first is not None and first.calibrated and first.seconds["finetune"] > 0
    watch = 1 + cfg.pretrain.watch_share  # the arm's perplexity curve, on top of its steps
    assert math.isclose(first.seconds[ARM], watch * tokens * 0.1 / (4 * 32))  # 0.1 s a step of 4 x 32 tokens
    [line] = [h for h in first.how if h.startswith("pretrain mlm")]
    assert "4 x 32 tokens" in line and "measured now at load 0.5" in line, first.how
    assert len(list((machine_cache() / plan_timing.CACHE).glob("*.json"))) == 3  # pretrain, finetune, score

    clock.step_s = 0.3  # the cache serves every probe: the same rates, said to be cached
    plan_timing._timed_here.clear()  # from the disk, as in a new plan
    again = estimate(cfg, plans)
    assert again.seconds == first.seconds and all("(cached, measured at load 0.5)" in h for h in _probes(again))

    # the machine got busier: the cache no longer fits the load, every probe is timed again, three times slower
    monkeypatch.setattr(plan_timing, "current_load", lambda: 0.5 + plan_timing.os.cpu_count())
    plan_timing._timed_here.clear()  # a new plan: within one, a shape is probed once
    slow = estimate(cfg, plans)
    assert all("measured now" in h for h in _probes(slow)), slow.how
    assert all(math.isclose(slow.seconds[k], 3 * first.seconds[k]) for k in first.seconds)
    text = render(plans, slow.seconds, slow)
    assert "calibrated with timed steps" in text and "tokens/s (measured now" in text

    # another shape is another probe; fine-tuning's shape did not change, its probes stay cached
    other_cfg = _cfg(base_model, "pretrain.batch_size=2")
    other = estimate(other_cfg, stage_plans(other_cfg, layout))
    [line] = [h for h in other.how if h.startswith("pretrain mlm")]
    assert "2 x 32 tokens" in line and "measured now" in line
    assert all("cached" in h for h in _probes(other) if not h.startswith("pretrain"))


def test_no_calibrate_is_an_instant_guess_said_to_be_one(base_model, layout, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_timing, "_timed", lambda step, n: math.nan)  # would poison any probe
    cfg = _cfg(base_model)
    plans = stage_plans(cfg, layout)
    guess = estimate(cfg, plans, calibrate=False)
    assert guess is not None and not guess.calibrated
    assert all(math.isfinite(s) and s > 0 for s in guess.seconds.values())
    assert not (machine_cache() / plan_timing.CACHE).exists()
    assert "an uncalibrated guess" in render(plans, guess.seconds, guess)
    assert any(h.startswith("uncalibrated guess: 6 FLOPs per parameter") for h in guess.how)


def test_fine_tuning_is_timed_with_its_workers_at_once_and_each_run_pays_its_setup(base_model, layout, tmp_path, monkeypatch):
    import re
    import threading

    from domainbert.run_plan import _finetune_tokens

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    side_by_side = threading.Barrier(2, timeout=30)  # broken unless two probes step at the same time
    steppers: set[int] = set()

    def timed(step, n):
        step()  # the real step, in whichever thread times it
        if threading.current_thread() is not threading.main_thread():
            steppers.add(threading.get_ident())
            side_by_side.wait()
        return 1e-3

    monkeypatch.setattr(plan_timing, "_timed", timed)
    cfg = _cfg(base_model)
    plans = stage_plans(cfg, layout)
    est = estimate(cfg, plans, workers=2)
    assert len(steppers) >= 2 and not side_by_side.broken
    [train_line] = [h for h in est.how if h.startswith("finetune ner")]
    assert "2 runs at once" in train_line, est.how
    [setup_line] = [h for h in est.how if "a run to load the model and encode the task" in h]
    setup = float(re.search(r": ([0-9.]+) s a run", setup_line).group(1))
    assert setup > 0  # the run's own prepare_run on the base and the task, timed
    [task] = cfg.finetune.tasks
    runs = len(next(p for p in plans if p.name == "finetune").detail["todo_tasks"])
    width = plan_timing.task_length(cfg, task)
    train, score = _finetune_tokens(cfg, task, width)
    assert math.isclose(est.seconds["finetune"], runs * (setup + (train + score) * 1e-3) / 2, abs_tol=0.05 * runs)

    one = estimate(cfg, plans, workers=1)  # one run at a time is another probe shape, with its own line
    assert not any("runs at once" in h for h in one.how if h.startswith("finetune"))
