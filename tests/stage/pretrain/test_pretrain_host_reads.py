"""No pretraining step reads the device except at the logging interval (issue 43): a real arm trained a few
steps on a 2-layer hidden-128 model, with every host read and data-dependent shape counted (``support.host_reads``).
The logging interval is set beyond the run, so only the last step (which always writes a record) may read."""

from __future__ import annotations

import pytest

from domainbert.pretrain import trainer
from domainbert.pretrain.data import TokenStream
from domainbert.pretrain.pairs import PairStream
from support.host_reads import HostReads
from support.pretrain import make_cfg, wordpiece_tokenizer

NO_LOGGING = [
    "pretrain.log_every=1000",
    "pretrain.checkpoint_every=1000",
    "pretrain.watch_points=0",
    "pretrain.torch_threads=1",
    "pretrain.precision=fp32",
]
DEBERTA = (
    'pretrain.scratch_model={"model_type": "deberta-v2", "num_hidden_layers": 2, "hidden_size": 128, '
    '"num_attention_heads": 2, "intermediate_size": 256, "relative_attention": true, "position_buckets": 32, '
    '"pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1, "position_biased_input": false}'
)


def _counted_run(monkeypatch, cfg, arm, layout) -> tuple[HostReads, int]:
    reads = HostReads()
    for owner, name in (
        (trainer, "apply_mask"),
        (trainer, "host_positions"),
        (TokenStream, "next_sequences"),
        (PairStream, "next_sequences"),
    ):  # batches are built on the host, from numpy
        monkeypatch.setattr(owner, name, reads.host_side(getattr(owner, name)))
    train_step, run_steps = trainer.train_step, trainer.run_steps

    def step(setup, state, phase, window):
        reads.step = state.step + 1  # this step, and what the loop does after it until the next
        return train_step(setup, state, phase, window)

    def steps(*args, **kwargs):
        try:
            return run_steps(*args, **kwargs)
        finally:
            reads.step = "after"  # the final evaluation (exempt)

    monkeypatch.setattr(trainer, "train_step", step)
    monkeypatch.setattr(trainer, "run_steps", steps)
    with reads:
        summary = trainer.train_arm(cfg, arm, layout, fingerprint="host-reads")
    return reads, summary["steps"]


# Reads inside transformers a step cannot avoid (host_reads.KNOWN), at most per step: padded batches carry an
# attention mask and its SDPA path asks the device whether it masks anything, once per forward pass; DeBERTa-v2
# without a mask asks whether the first or last token is padding (generator and discriminator: two passes).
# Packed BERT batches (the default) meet neither.
KNOWN_PER_STEP = {"mlm": 0, "unpacked-accumulated": 2, "nsp": 1, "rtd": 2}


@pytest.mark.parametrize("case", ["mlm", "unpacked-accumulated", "nsp", "rtd"])
def test_no_step_reads_the_device_but_the_logging_step(case, base_model, layout, texts, monkeypatch):
    arm, extra = "continued", []
    if case == "unpacked-accumulated":  # padding: an attention mask, and two micro-batches a step
        extra = ["pretrain.packing=false", "pretrain.grad_accum=2", "pretrain.whole_word_mask=true"]
    elif case == "nsp":
        extra = ["pretrain.next_sentence_prediction=true", "pretrain.packing=false"]
    elif case == "rtd":
        arm, extra = "scratch", ["pretrain.arms=[scratch]", "pretrain.rtd.arms=[scratch]", DEBERTA]
        wordpiece_tokenizer(texts, vocab_size=400).save_pretrained(layout.tokenizer)
    reads, steps = _counted_run(monkeypatch, make_cfg(base_model, *NO_LOGGING, *extra), arm, layout)

    assert steps >= 4
    for step in range(1, steps + 1):
        found = reads.at(step)
        assert found.pop("known", 0) <= KNOWN_PER_STEP[case], reads.report(step)
        if step < steps:
            assert found == {}, f"step {step} of {steps} read the device: {reads.report(step)}"
    # the last step writes the record: its losses are read then, all at once
    assert found == {"Tensor.tolist": 1}, reads.report(steps)
