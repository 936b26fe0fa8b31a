"""No fine-tuning step reads the device except where the loop logs (issue 43): ``fit`` on a 2-layer hidden-128
BERT classifier, every host read counted per step (``support.host_reads``); and a non-finite loss, now read at the
next logging step rather than at its own, still fails the run naming the step it happened at."""

from __future__ import annotations

import pytest

from domainbert.core.errors import ModelError
from domainbert.finetune import trainer
from support.finetune import tiny_classifier, token_examples
from support.host_reads import HostReads


def _settings() -> trainer.TrainSettings:
    return trainer.TrainSettings(epochs=1, lr=1e-3, batch_size=2, length_group_size=2, patience=10, seed=1)


def _fit() -> dict:
    """``fit`` for 30 steps of 2 examples, one evaluation at the end (scored 0: evaluation is not counted)."""
    train = token_examples(60)
    lengths = [len(f["input_ids"]) for f in train]
    return trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": 0.0}, "acc", _settings(), pad_id=0)


def test_no_fine_tuning_step_reads_the_device_but_where_the_loop_logs(monkeypatch):
    reads, logged = HostReads(), set()
    step_fn, log_fn, eval_fn = trainer.Optimisation.step, trainer._log_progress, trainer._evaluate

    def step(self, batch, weight, world, index, s):
        reads.step = index + 1
        return step_fn(self, batch, weight, world, index, s)

    def log_progress(state, *args):
        logged.add(state.step)
        return log_fn(state, *args)

    def evaluate(state, *args):
        logged.add(state.step)
        return eval_fn(state, *args)

    monkeypatch.setattr(trainer.Optimisation, "step", step)
    monkeypatch.setattr(trainer, "_log_progress", log_progress)
    monkeypatch.setattr(trainer, "_evaluate", evaluate)
    with reads:
        result = _fit()

    assert result["steps"] == 30 and len(result["history"]) == 1
    quiet = [step for step in range(1, 31) if step not in logged]
    assert len(quiet) >= 15, sorted(logged)
    for step in range(1, 31):
        found = reads.at(step)
        assert found.pop("known", 0) <= 1, reads.report(step)  # transformers' SDPA padding-mask check
        if step in quiet:
            assert found == {}, f"step {step} read the device: {reads.report(step)}"
        else:  # the loop logs here: the losses since the last log are read, in one transfer
            assert found == {"Tensor.tolist": 1}, reads.report(step)
    assert result["loss_start"] is not None and result["loss_end"] is not None  # the late reads filled the windows


def test_a_non_finite_loss_read_at_a_logging_step_names_the_step_it_happened_at(monkeypatch):
    step_fn = trainer.Optimisation.step

    def step(self, batch, weight, world, index, s):
        value = step_fn(self, batch, weight, world, index, s)
        return value * float("nan") if index == 4 else value  # step 5's loss is NaN; the loop reads it later

    monkeypatch.setattr(trainer.Optimisation, "step", step)
    with pytest.raises(ModelError, match=r"fine-tuning loss is nan at step 5:"):
        _fit()
