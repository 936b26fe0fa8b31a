"""``plan``'s time estimate is measured here: probes timed on this machine, cached per shape and load."""

from __future__ import annotations

import math
import time

import pytest

from domainbert.core.paths import machine_cache
from domainbert.finetune.expectations import expected_runs
from domainbert.plan import probes
from domainbert.plan.estimate import estimate
from domainbert.plan.stage_plans import render, stage_plans
from support.pretrain import make_cfg

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
    monkeypatch.setattr(probes, "current_load", lambda: 0.5)
    clock, timed = _Clock(), probes._timed
    monkeypatch.setattr(probes, "clock", clock)

    def advancing(step, n):
        def run():
            step()
            clock.now += clock.step_s

        return timed(run, n)

    monkeypatch.setattr(probes, "_timed", advancing)
    cfg = _cfg(base_model)
    plans = stage_plans(cfg, layout)
    tokens = next(p for p in plans if p.name == ARM).detail["tokens"]
    first = estimate(cfg, plans)
    assert first is not None and first.calibrated and "finetune" in first.seconds
    watch = 1 + cfg.pretrain.watch_share  # the arm's perplexity curve, on top of its steps
    assert math.isclose(first.seconds[ARM], watch * tokens * 0.1 / (4 * 32))  # 0.1 s a step of 4 x 32 tokens
    [line] = [h for h in first.how if h.startswith("pretrain mlm")]
    assert "4 x 32 tokens" in line and "measured now at load 0.5" in line, first.how
    assert len(list((machine_cache() / probes.CACHE).glob("*.json"))) == 1  # fine-tuning's probe is never cached

    clock.step_s = 0.3  # the cache serves every probe: the same rates, said to be cached
    probes._timed_here.clear()  # from the disk, as in a new plan
    again = estimate(cfg, plans)
    assert again.seconds == first.seconds and all("(cached, measured at load 0.5)" in h for h in _probes(again))

    # the machine got busier: the cache no longer fits the load, every probe is timed again, three times slower
    monkeypatch.setattr(probes, "current_load", lambda: 0.5 + probes.os.cpu_count())
    probes._timed_here.clear()  # a new plan: within one, a shape is probed once
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
    monkeypatch.setattr(probes, "_timed", lambda step, n: math.nan)  # would poison any probe
    cfg = _cfg(base_model)
    plans = stage_plans(cfg, layout)
    guess = estimate(cfg, plans, calibrate=False)
    assert guess is not None and not guess.calibrated
    assert all(math.isfinite(s) and s > 0 for s in guess.seconds.values())
    assert not (machine_cache() / probes.CACHE).exists()
    assert "an uncalibrated guess" in render(plans, guess.seconds, guess)
    assert any(h.startswith("uncalibrated guess: 6 FLOPs per parameter") for h in guess.how)
    # fine-tuning: the encoder without its word embeddings, each example at its task's mean length (a sentence
    # is shorter than max_length: counting max_length put the demo's fine-tuning at 186 minutes, against 11)
    from transformers import AutoModelForMaskedLM

    from domainbert.plan.estimate import _finetune_examples, _mean_tokens

    [task] = cfg.finetune.tasks
    mean = _mean_tokens(cfg, task)
    assert 2 < mean < cfg.finetune.max_length
    model = AutoModelForMaskedLM.from_pretrained(base_model)
    encoder = sum(p.numel() for p in model.parameters()) - model.get_input_embeddings().weight.numel()
    train, scored = _finetune_examples(cfg, task, once=False)
    runs = len(next(p for p in plans if p.name == "finetune").detail["todo_tasks"])
    expected = runs * (train + scored / 3) * mean * 6 * encoder / probes.GUESS_FLOPS
    assert math.isclose(guess.seconds["finetune"], expected, rel_tol=1e-9)


class _Ticks:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def test_a_fine_tuning_run_is_its_setup_and_its_examples_at_a_short_real_runs_costs(base_model, layout, monkeypatch):
    from domainbert.plan.estimate import _finetune_examples
    from domainbert.task_data.splits import load_task

    monkeypatch.setattr(probes, "clock", _Ticks())  # each part of the short run takes 1 s
    cfg = _cfg(base_model)
    plans = stage_plans(cfg, layout)
    est = estimate(cfg, plans, workers=1)
    [task] = cfg.finetune.tasks
    data = load_task(task)
    picked = min(probes.SAMPLE[0], len(data.splits["train"]))
    held = min(probes.SAMPLE[1], len(data.splits["validation"]))
    train, scored = _finetune_examples(cfg, task, once=False)
    runs = len(next(p for p in plans if p.name == "finetune").detail["todo_tasks"])
    assert math.isclose(est.seconds["finetune"], runs * (1 + train / picked + scored / held))
    [line] = [h for h in est.how if h.startswith(task.name)]
    assert "a short real run" in line and "1.0 s to load and encode" in line and "timed now" in line
    [retries] = [h for h in est.how if h.startswith("not in it: collapse retries")]
    assert f"up to ~{est.seconds['finetune'] / 60:.1f} min more" in retries
    none = estimate(_cfg(base_model, "finetune.collapse_retry_lr_factor=null"), plans, workers=1)
    assert not [h for h in none.how if "collapse retries" in h]
    # each run is counted to its schedule's end: with early stopping on its own validation, that is the most
    [most] = [h for h in est.how if h.startswith("fine-tuning at most")]
    assert f"after {cfg.finetune.early_stopping_patience} evaluations without a gain" in most
    stopped_for_all = estimate(_cfg(base_model, "finetune.early_stopping=reference"), plans, workers=1)
    assert not [h for h in stopped_for_all.how if h.startswith("fine-tuning at most")]
    # Runs that stop at the reference's step validate once; the probe times a short run of its own, no stop needed.
    ref = _cfg(base_model, "finetune.early_stopping=reference")
    assert _finetune_examples(ref, task, once=True) == (
        train,
        len(data.splits["validation"]) + len(data.splits["test"]),
    )
    assert scored > _finetune_examples(ref, task, once=True)[1]
    assert estimate(ref, stage_plans(ref, layout), workers=1).seconds["finetune"] > 0
    # finetune.min_steps stretches a short schedule: the plan counts the updates the trainer will take
    n_train, n_val = len(data.splits["train"]), len(data.splits["validation"])
    per_epoch = math.ceil(n_train / cfg.finetune.batch_size)
    steps = 7 * per_epoch + 3
    assert steps > math.ceil(cfg.finetune.epochs * per_epoch)
    longer = _cfg(base_model, f"finetune.min_steps={steps}")
    every_epoch = task.model_copy(update={"eval_delay": 0})
    stretched, scored_more = _finetune_examples(longer, every_epoch, once=False)
    assert math.isclose(stretched, n_train * steps / per_epoch)
    # validated at each of the 7 whole epochs and at the schedule's end, 3 steps after the last of them
    assert scored_more == (steps // per_epoch + 1) * n_val + len(data.splits["test"])
    assert _finetune_examples(_cfg(base_model, "finetune.min_steps=1"), task, once=False) == (train, scored)
    # a task validated from epoch eval_delay on: the passes before it are not counted, the schedule's end is
    _, from_third = _finetune_examples(longer, every_epoch.model_copy(update={"eval_delay": 3}), once=False)
    assert from_third == (steps // per_epoch - 2 + 1) * n_val + len(data.splits["test"])
    past_end = every_epoch.model_copy(update={"eval_delay": 50})
    assert _finetune_examples(longer, past_end, once=False)[1] == n_val + len(data.splits["test"])


def test_under_the_reference_only_the_runs_that_stop_at_its_step_are_counted_validating_once(base_model, layout):
    """The reference's own search run and frozen runs (another rate, a head alone) validate every epoch."""
    cfg = _cfg(base_model, "finetune.early_stopping=reference", "finetune.mode=both")
    detail = next(p for p in stage_plans(cfg, layout) if p.name == "finetune").detail
    runs = [r for r in expected_runs(cfg, layout, planned=True) if r.mode != "floor"]
    modes = sorted(r.mode for r in runs)
    assert "frozen" in modes and "finetune" in modes
    # every planned run but base's first fine-tuning seed (the search's run, adopted), then the search's run
    assert len(detail["todo_tasks"]) == len(detail["todo_validate_once"]) == len(runs)
    assert detail["todo_validate_once"][-1] is False  # the search's own run
    assert sum(detail["todo_validate_once"]) == modes.count("finetune") - 1
    each = _cfg(base_model, "finetune.mode=both")
    assert not any(next(p for p in stage_plans(each, layout) if p.name == "finetune").detail["todo_validate_once"])


def test_the_fine_tuning_probe_is_the_median_of_its_rounds(base_model, layout, monkeypatch):
    """A burst of load during one round does not set the estimate: three rounds, the median of each part."""
    from domainbert.finetune import runner

    parts = iter([(1.0, 0.300, 0.010), (1.0, 0.077, 0.010), (1.0, 0.100, 0.010)])  # one round under a burst
    monkeypatch.setattr(runner, "timed_short_run", lambda *args: next(parts))
    cfg = _cfg(base_model)
    [task] = cfg.finetune.tasks
    rates = probes.run_rates(cfg, task)
    assert rates.train_s_per_example == 0.100 and rates.setup_s == 1.0
    assert "the median of 3 rounds" in rates.what


def test_two_rounds_that_agree_end_the_fine_tuning_probe(base_model, layout, monkeypatch):
    """Two rounds within ``AGREE`` of each other in every part: no third round (it could not move the median
    out of their band); one part apart and the third round runs."""
    from domainbert.finetune import runner

    calls: list[int] = []

    def reads(*rounds):
        parts = iter(rounds)
        return lambda *args: calls.append(1) or next(parts)

    cfg = _cfg(base_model)
    [task] = cfg.finetune.tasks
    # the setup 0.4 s apart (within SETUP_SLACK_S), training and scoring within 5%
    monkeypatch.setattr(runner, "timed_short_run", reads((1.0, 0.100, 0.010), (1.4, 0.105, 0.0105), (9.0, 9.0, 9.0)))
    rates = probes.run_rates(cfg, task)
    assert len(calls) == 2 and "the median of 2 rounds" in rates.what
    assert 0.100 <= rates.train_s_per_example <= 0.105 and 1.0 <= rates.setup_s <= 1.4
    calls.clear()
    slow_load = (2.0, 0.100, 0.010)  # the setup a second apart and twice as long
    monkeypatch.setattr(runner, "timed_short_run", reads((1.0, 0.100, 0.010), slow_load, (1.2, 0.100, 0.010)))
    assert probes.run_rates(cfg, task).setup_s == 1.2 and len(calls) == 3
    calls.clear()
    apart = (1.05, 0.105, 0.0125)  # scoring 25% slower in the second round
    monkeypatch.setattr(runner, "timed_short_run", reads((1.0, 0.100, 0.010), apart, (1.0, 0.100, 0.011)))
    rates = probes.run_rates(cfg, task)
    assert len(calls) == 3 and rates.score_s_per_example == 0.011 and "the median of 3 rounds" in rates.what


def test_the_short_runs_of_several_workers_run_at_once(base_model, layout, monkeypatch):
    import threading

    from domainbert.finetune import runner

    side_by_side = threading.Barrier(2, timeout=60)  # broken unless two short runs are under way together
    real = runner.timed_short_run

    def together(*args):
        side_by_side.wait()
        return real(*args)

    loads: list[tuple[float, float]] = []
    real_load = runner.prepare_run

    def load(*args):
        start = time.monotonic()
        out = real_load(*args)
        loads.append((start, time.monotonic()))
        return out

    monkeypatch.setattr(runner, "timed_short_run", together)
    monkeypatch.setattr(runner, "prepare_run", load)
    cfg = _cfg(base_model)
    est = estimate(cfg, stage_plans(cfg, layout), workers=2)
    assert not side_by_side.broken and est.seconds["finetune"] > 0
    assert any("2 runs at once" in h for h in est.how), est.how
    # the loads took turns: two at once left transformers' meta-device context on the whole process
    spans = sorted(loads)
    rounds = next(int(h.split("the median of ")[1].split()[0]) for h in est.how if "the median of " in h)
    assert rounds in (2, probes.ROUNDS) and len(spans) == 2 * rounds
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False))
    import torch

    assert torch.empty(1).device.type == "cpu" and torch.nn.Linear(2, 2).weight.device.type == "cpu"


def test_a_from_scratch_arm_is_timed_and_sized_as_its_own_architecture_not_the_bases() -> None:
    from domainbert.config.domain import load_domain
    from domainbert.plan.probes import architecture, scratch_model

    cfg = load_domain("science", ["finetune.forgetting_task.enabled=true", "pretrain.scratch_size=mini", "tokenizer.vocab_size=8000"])
    base, scratch = architecture(cfg, "continued"), architecture(cfg, "scratch")
    assert (base.num_hidden_layers, base.hidden_size) == (6, 384)  # the packaged MiniLM
    assert (scratch.num_hidden_layers, scratch.hidden_size, scratch.vocab_size) == (4, 256, 8000)
    assert architecture(cfg, None).to_dict() == base.to_dict()  # the warm-up trains the base
    params = sum(p.numel() for p in scratch_model(cfg).parameters())
    assert 4e6 < params < 6e6  # 8,000 x 256 embeddings and four 256-wide layers, not the base's 22 M


@pytest.mark.slow  # the plan's real probes: two tasks' short runs and three pretraining shapes
def test_plan_detect_prices_a_run_with_the_short_runs_the_plan_timed(base_model, layout, monkeypatch, capsys):
    """``plan --detect`` prices the designs it lists with the fine-tuning probes the plan's own estimate timed:
    each task's short runs once per command, not once for the plan and again for the designs."""
    from domainbert.cli import run_cli

    timed: list[tuple[str, int]] = []
    real = probes.run_rates

    def counted(cfg, task, together=1):
        timed.append((task.name, together))
        return real(cfg, task, together)

    monkeypatch.setattr(probes, "run_rates", counted)
    args = ["plan", "science", f"base_model.name_or_path={base_model}", "--detect", "3", "--out", str(layout.root)]
    assert run_cli(args) == 0
    out = capsys.readouterr().out
    assert sorted(timed) == [("science-subject", 1), ("science-terms-ner", 1)], timed
    assert "h of model time here" in out, out
