"""Early stopping on validation (``fit_state.FitState``, in ``trainer.fit``): the run keeps the weights of its
best validation evaluation, stops after ``patience`` evaluations that are no better, and does not count a tie on
the metric as worse while the training loss is still falling (a tagger at F1 0 that is learning to leave O is not
done)."""

from __future__ import annotations

import dataclasses

import torch

from domainbert.finetune import fit_state, trainer
from support.finetune import tiny_classifier, token_examples


def _state() -> fit_state.FitState:
    return fit_state.FitState(total=100, steps_per_epoch=10)


def _evaluate(state: fit_state.FitState, score: float, loss: float, model: torch.nn.Module, patience: int = 2) -> None:
    state.step += 10
    state.losses.append(loss)
    state.add_evaluation({"f1": score}, "f1", model, patience)


def test_the_best_evaluation_is_kept_and_patience_worse_ones_stop_the_run():
    state, model = _state(), torch.nn.Linear(2, 2)
    for score, loss in [(0.1, 1.0), (0.5, 0.9), (0.3, 0.8)]:
        _evaluate(state, score, loss, model)
        assert not state.stopped
    _evaluate(state, 0.4, 0.7, model)
    assert state.stopped and state.best_step == 20 and state.best == {"f1": 0.5}


def test_a_tie_with_a_falling_training_loss_is_not_worse_and_a_tie_without_one_is():
    state, model = _state(), torch.nn.Linear(2, 2)
    for loss in (1.0, 0.9, 0.8, 0.7):  # F1 stuck at 0 for four epochs while the loss falls
        _evaluate(state, 0.0, loss, model)
    assert not state.stopped and state.best_step == 40  # the latest of the tied evaluations is kept
    _evaluate(state, 0.0, 0.75, model)  # level again, but the loss rose since the kept evaluation
    _evaluate(state, 0.0, 0.71, model)
    assert state.stopped and state.best_step == 40


def test_fit_leaves_the_model_holding_the_weights_of_its_best_evaluation():
    """A real loop over a 2-layer hidden-128 classifier, validation scripted: best at the second of four epochs."""
    model, scores, snapshots = tiny_classifier(), iter([0.2, 0.9, 0.5, 0.4]), []

    def evaluate() -> dict:
        snapshots.append({k: v.detach().clone() for k, v in model.state_dict().items()})
        return {"acc": next(scores)}

    train = token_examples(20)
    settings = trainer.TrainSettings(epochs=6, lr=1e-3, batch_size=4, length_group_size=2, patience=2, seed=1)
    out = trainer.fit(model, train, [len(f["input_ids"]) for f in train], evaluate, "acc", settings, pad_id=0)

    assert out["stopped_early"] and len(out["history"]) == 4 and out["steps"] == 20  # stopped before epoch 6
    assert out["best_step"] == 10 and out["best"] == {"acc": 0.9}
    kept, later = snapshots[1], snapshots[3]
    assert all(torch.equal(v, kept[k]) for k, v in model.state_dict().items())
    assert not all(torch.equal(v, later[k]) for k, v in model.state_dict().items())


def test_a_run_stopped_at_the_references_step_ends_with_the_weights_the_reference_kept_there():
    """``stop_step`` (``finetune.early_stopping: reference``): the run trains to the step on the whole schedule,
    validates once there and keeps those weights, the same as an early-stopping run that kept that step."""
    reference, scores, kept = tiny_classifier(), iter([0.2, 0.9, 0.5, 0.4]), []

    def scripted() -> dict:
        kept.append({k: v.detach().clone() for k, v in reference.state_dict().items()})
        return {"acc": next(scores)}

    train = token_examples(20)
    lengths = [len(f["input_ids"]) for f in train]
    settings = trainer.TrainSettings(epochs=6, lr=1e-3, batch_size=4, length_group_size=2, patience=2, seed=1)
    chosen = trainer.fit(reference, train, lengths, scripted, "acc", settings, pad_id=0)
    assert chosen["best_step"] == 10

    model, calls = tiny_classifier(), []

    def evaluate() -> dict:
        calls.append(1)
        return {"acc": 0.1}  # worse than anything: a run at the chosen step keeps its weights regardless

    stopped = dataclasses.replace(settings, stop_step=chosen["best_step"])
    out = trainer.fit(model, train, lengths, evaluate, "acc", stopped, pad_id=0)
    assert out["steps"] == 10 and out["best_step"] == 10 and len(calls) == 1 and not out["stopped_early"]
    assert [h["step"] for h in out["history"]] == [10]
    assert all(torch.equal(v, kept[1][k]) for k, v in model.state_dict().items())
    # Stopped at step 10 of a 30-step schedule, not trained on a 10-step one: the rate had not decayed to 0.
    other = tiny_classifier()
    short = trainer.fit(other, train, lengths, evaluate, "acc", dataclasses.replace(settings, epochs=2), 0)
    assert short["steps"] == 10
    assert not all(torch.equal(v, kept[1][k]) for k, v in other.state_dict().items())


def test_a_run_stopped_in_the_first_tenth_of_its_schedule_compares_its_own_first_and_last_steps():
    """The loss windows of the collapse check are tenths of the steps run, not of the schedule: stopped at step 5
    of 50, tenths of the schedule would make the first and last windows the same five steps (a loss that
    "did not fall", read as a collapse)."""
    train = token_examples(20)
    settings = trainer.TrainSettings(
        epochs=10, lr=1e-3, batch_size=4, length_group_size=2, patience=2, seed=1, stop_step=5
    )
    out = trainer.fit(tiny_classifier(), train, [len(f["input_ids"]) for f in train], lambda: {"acc": 0.0}, "acc",
                      settings, pad_id=0)
    assert out["steps"] == 5 and out["loss_start"] != out["loss_end"]


def test_no_early_stop_before_min_steps_and_a_short_schedule_stretches_to_them(caplog):
    """``min_steps`` (study 8): a plateau in a run's first updates does not end it, and a task whose epochs give
    fewer updates trains more epochs, on a schedule that long (the rate decays over all of it)."""
    state, model = _state(), torch.nn.Linear(2, 2)
    for score in (0.5, 0.4, 0.4, 0.3):  # a plateau from the first evaluation: patience 2 would stop at step 30
        state.step += 10
        state.losses.append(1.0)
        state.add_evaluation({"f1": score}, "f1", model, patience=2, min_steps=40)
        assert state.stopped == (state.step >= 40)
    assert state.step == 40 and state.best_step == 10

    caplog.set_level("INFO", logger="domainbert.finetune.trainer")
    train = token_examples(20)  # 5 steps an epoch at batch 4
    lengths = [len(f["input_ids"]) for f in train]
    scores = iter([0.9] + [0.1] * 20)  # best at the first epoch, then worse at every one
    settings = trainer.TrainSettings(
        epochs=2, lr=1e-3, batch_size=4, length_group_size=2, patience=2, seed=1, min_steps=23
    )
    assert settings.total_steps(5) == 23 and dataclasses.replace(settings, min_steps=0).total_steps(5) == 10
    out = trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": next(scores)}, "acc", settings, pad_id=0)
    # evaluations at 5, 10, 15, 20 (epochs) and 23 (the schedule's end): the whole schedule ran, its best kept
    assert [h["step"] for h in out["history"]] == [5, 10, 15, 20, 23] and out["steps"] == 23
    assert out["best_step"] == 5 and not out["stopped_early"]
    assert "early stopping" not in caplog.text  # patience was spent at the last step: not an early stop
    # a task whose epochs already give more updates is not shortened, and stops at its first evaluation past
    # min_steps once patience is spent (at 15 without min_steps)
    longer = dataclasses.replace(settings, epochs=6, min_steps=17)
    again = iter([0.9] + [0.1] * 20)
    out = trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": next(again)}, "acc", longer, pad_id=0)
    assert [h["step"] for h in out["history"]] == [5, 10, 15, 20] and out["stopped_early"]
    assert "early stopping: no improvement in 3 evaluations" in caplog.text


def test_validation_starts_at_eval_delay_and_no_run_stops_or_keeps_an_epoch_before_it():
    """``eval_delay`` (a task's, transformers' name): the epochs before it are neither scored nor kept, early
    stopping cannot end the run before it, and the schedule's last step is scored even when the delay passes it."""
    train = token_examples(20)  # 5 steps an epoch at batch 4
    lengths = [len(f["input_ids"]) for f in train]
    settings = trainer.TrainSettings(epochs=6, lr=1e-3, batch_size=4, length_group_size=2, patience=2, seed=1)
    every = trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": 0.5}, "acc", settings, pad_id=0)
    assert [h["step"] for h in every["history"]][:2] == [5, 10]
    scores = iter([0.9, 0.1, 0.1, 0.1])  # the first evaluation is the best, then worse every time
    late = dataclasses.replace(settings, eval_delay=3)
    out = trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": next(scores)}, "acc", late, pad_id=0)
    assert [h["step"] for h in out["history"]] == [15, 20, 25] and out["best_step"] == 15
    assert out["stopped_early"] and out["steps"] == 25  # patience counts from the first validated epoch
    past_end = dataclasses.replace(settings, epochs=2, eval_delay=5)
    out = trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": 0.3}, "acc", past_end, pad_id=0)
    assert [h["step"] for h in out["history"]] == [10] and out["best_step"] == 10
    # a fraction of an epoch: validation from the first evaluation step at or after it
    half = dataclasses.replace(settings, epochs=3, eval_delay=1.5)
    out = trainer.fit(tiny_classifier(), train, lengths, lambda: {"acc": 0.3}, "acc", half, pad_id=0)
    assert [h["step"] for h in out["history"]] == [10, 15]
