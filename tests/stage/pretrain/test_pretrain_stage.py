"""pretrain_arm end to end on tiny models: outputs, budgets, skip-if-complete, the three arms."""

from __future__ import annotations

import datetime
import json
import re

import pytest

from domainbert.core.artifacts import is_complete
from domainbert.core.errors import ModelError
from domainbert.core.models import load_mlm_model, load_tokenizer
from domainbert.pretrain.stage import arm_fingerprint, pretrain_arm
from support.pretrain import make_cfg, tiny_bert, unigram_tokenizer, wordpiece_tokenizer

SUMMARY_FIELDS = {"arm", "steps", "tokens_consumed", "real_tokens_per_s", "real_token_fraction", "final_loss",
                  "domain_perplexity", "general_perplexity", "flops_per_token", "mfu", "wall_seconds", "loss_curve"}


def test_continued_arm_writes_model_summary_metrics_and_skips_rerun(base_model, layout, caplog, monkeypatch):
    monkeypatch.setenv("DOMAINBERT_PROGRESS_SECONDS", "3600")
    monkeypatch.setenv("DOMAINBERT_PROGRESS_STEPS", "4")
    caplog.set_level("INFO", logger="domainbert.pretrain.trainer")
    cfg = make_cfg(base_model)
    summary = pretrain_arm(cfg, "continued", layout)
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("pretrain continued: step")]
    assert [line.split(",")[0] for line in progress] == [  # the first step, every 4th, the last
        "pretrain continued: step 1/8 (12%)", "pretrain continued: step 4/8 (50%)",
        "pretrain continued: step 8/8 (100%)"]
    assert re.fullmatch(r"pretrain continued: step 4/8 \(50%\), 512/1,024 tokens, loss \d+\.\d{4}, [\d,]+ "
                        r"tokens/s, ETA \d+s", progress[1]), progress[1]
    assert SUMMARY_FIELDS <= set(summary)
    # 1024 tokens at 4 x 32 per step: 8 steps, every position a real token (packing).
    assert summary["steps"] == 8 and summary["tokens_consumed"] == 1024
    assert summary["real_token_fraction"] == 1.0
    assert [s for s, _ in summary["loss_curve"]] == list(range(1, 9))
    assert summary["domain_perplexity"] < summary["domain_perplexity_before"]
    assert summary["general_perplexity"] is not None and summary["general_perplexity_before"] is not None
    folder = layout.pretrained_model("continued")
    assert is_complete(folder, arm_fingerprint(cfg, "continued", layout))
    for name in ("config.json", "model.safetensors", "tokenizer.json", "README.md"):
        assert (folder / name).is_file(), name
    assert "160" not in (folder / "README.md").read_text().split("## Budget")[0]  # card has this run's budget
    assert "1,024" in (folder / "README.md").read_text()
    model = load_mlm_model(folder)
    assert model.get_input_embeddings().weight.shape[0] == len(load_tokenizer(folder))
    records = [json.loads(line) for line in (layout.pretrain("continued") / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in records if r["kind"] == "eval"]
    assert [r["step"] for r in evals] == [0, 8]
    for record in records:  # a wall-clock time on every record, not a TensorBoard scalar
        assert datetime.datetime.fromisoformat(record["time"]).tzinfo == datetime.UTC
    assert any((layout.pretrain("continued") / "tensorboard").iterdir())
    on_disk = json.loads((layout.pretrain("continued") / "summary.json").read_text())
    assert on_disk["final_loss"] == summary["final_loss"]
    caplog.set_level("INFO")
    again = pretrain_arm(cfg, "continued", layout)
    assert "skipped: up to date" in caplog.text
    assert again["wall_seconds"] == summary["wall_seconds"]


def test_all_three_arms_get_the_same_budget(base_model, layout, texts):
    tokenizer = wordpiece_tokenizer(texts, vocab_size=400)
    tokenizer.save_pretrained(layout.tokenizer)
    ext_tok = load_tokenizer(base_model)
    ext_tok.add_tokens(["kernelspace", "bytecode"])
    ext_model = load_mlm_model(base_model)
    ext_model.resize_token_embeddings(len(ext_tok))
    ext_model.save_pretrained(layout.extended_model)
    ext_tok.save_pretrained(layout.extended_model)
    cfg = make_cfg(base_model, "pretrain.budget_tokens=512")
    summaries = {arm: pretrain_arm(cfg, arm, layout) for arm in ("continued", "extended", "scratch")}
    assert {s["tokens_consumed"] for s in summaries.values()} == {512}
    assert summaries["scratch"]["vocab_size"] == 400
    assert summaries["extended"]["vocab_size"] == len(ext_tok)
    scratch = load_mlm_model(layout.pretrained_model("scratch"))
    assert scratch.config.vocab_size == 400 and scratch.config.num_hidden_layers == 2


def test_scratch_named_size_and_sentencepiece_tokenizer(base_model, layout, texts):
    unigram_tokenizer(texts).save_pretrained(layout.tokenizer)
    cfg = make_cfg(base_model, "pretrain.scratch_size=tiny", "pretrain.whole_word_mask=true",
                   "pretrain.budget_tokens=256", "tokenizer.lowercase=false")
    summary = pretrain_arm(cfg, "scratch", layout)
    model = load_mlm_model(layout.pretrained_model("scratch"))
    assert (model.config.num_hidden_layers, model.config.hidden_size) == (2, 128)
    assert summary["whole_word_mask"] is True and summary["steps"] == 2


def test_missing_vocab_outputs_are_clear_errors(base_model, layout):
    cfg = make_cfg(base_model)
    with pytest.raises(ModelError, match="extended model not found"):
        pretrain_arm(cfg, "extended", layout)
    with pytest.raises(ModelError, match="domain tokenizer not found"):
        pretrain_arm(cfg, "scratch", layout)


def test_tokenizer_larger_than_embeddings_fails_before_training(tmp_path, layout, texts):
    small = tiny_bert(wordpiece_tokenizer(texts, vocab_size=300), tmp_path / "small")
    big_tok = wordpiece_tokenizer(texts, vocab_size=500)
    big_tok.save_pretrained(small)  # model has 300 rows, tokenizer 500 tokens
    with pytest.raises(ModelError, match="embedding rows"):
        pretrain_arm(make_cfg(small), "continued", layout)
    assert not layout.pretrained_model("continued").exists()


def test_length_schedule_in_training_and_unpacked_real_fraction(base_model, layout):
    cfg = make_cfg(base_model, "pretrain.log_every=1", "pretrain.precision=bf16",
                   "pretrain.seq_len_schedule=[{fraction: 0.5, seq_len: 16}, {fraction: 0.5, seq_len: 32}]")
    summary = pretrain_arm(cfg, "continued", layout)
    assert summary["seq_len_phases"] == [[0, 4, 16, 8], [4, 8, 32, 4]]  # 128 tokens per step throughout
    assert summary["attention"] == "domainbert_cpu_eager"  # bf16 on a CPU with attention dropout: lane dropout
    assert summary["tokens_consumed"] == 1024 and summary["real_token_fraction"] == 1.0
    records = [json.loads(line) for line in (layout.pretrain("continued") / "metrics.jsonl").read_text().splitlines()]
    assert [r["seq_len"] for r in records if r["kind"] == "train"] == [16] * 4 + [32] * 4

    unpacked = make_cfg(base_model, "pretrain.packing=false")
    summary = pretrain_arm(unpacked, "continued", layout)
    assert 0.3 < summary["real_token_fraction"] < 1.0  # padding waste of one document per sequence
    assert summary["tokens_consumed"] < 1024  # only real tokens count


def test_checkpoints_of_another_config_are_not_resumed(base_model, layout):
    from domainbert.pretrain.checkpoint import list_checkpoints

    pretrain_arm(make_cfg(base_model), "continued", layout)
    assert [s for s, _ in list_checkpoints(layout.pretrain("continued") / "checkpoints")] == [4]
    summary = pretrain_arm(make_cfg(base_model, "pretrain.lr=1.0e-4"), "continued", layout)
    assert summary["resumed_from"] == [] and summary["steps"] == 8


def test_a_resumed_run_logs_each_step_once(base_model, layout):
    """A crash after step 8 with the newest usable checkpoint at step 4: the rerun replays steps 5-8, and neither
    metrics.jsonl nor TensorBoard shows them twice."""
    import shutil

    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from domainbert.pretrain.checkpoint import list_checkpoints

    cfg = make_cfg(base_model, "pretrain.log_every=1", "pretrain.checkpoint_every=2", "pretrain.keep_checkpoints=3")
    first = pretrain_arm(cfg, "continued", layout)
    arm = layout.pretrain("continued")
    checkpoints = dict(list_checkpoints(arm / "checkpoints"))
    assert sorted(checkpoints) == [2, 4, 6]
    shutil.rmtree(checkpoints[6])
    shutil.rmtree(layout.pretrained_model("continued"))
    (arm / "summary.json").unlink()
    second = pretrain_arm(cfg, "continued", layout)
    assert second["resumed_from"] == [4] and second["steps"] == 8

    records = [json.loads(line) for line in (arm / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if r["kind"] == "train"] == list(range(1, 9))
    assert [r["step"] for r in records if r["kind"] == "eval"] == [0, 8]
    events = EventAccumulator(str(arm / "tensorboard"))
    events.Reload()
    assert [e.step for e in events.Scalars("train/loss")] == list(range(1, 9))
    assert [e.step for e in events.Scalars("eval/domain_perplexity")] == [0, 8]
    for (step, loss), event in zip(first["loss_curve"], events.Scalars("train/loss"), strict=True):
        assert event.step == step and event.value == pytest.approx(loss, abs=1e-4)


def test_torch_threads_apply_to_training_only_and_do_not_change_the_fingerprint(base_model, layout):
    import torch

    before = torch.get_num_threads()
    want = 1 if before > 1 else 2
    cfg = make_cfg(base_model, f"pretrain.torch_threads={want}", "pretrain.budget_tokens=256")
    summary = pretrain_arm(cfg, "continued", layout)
    assert summary["torch_threads"] == want
    assert torch.get_num_threads() == before
    assert arm_fingerprint(cfg, "continued", layout) == arm_fingerprint(
        make_cfg(base_model, "pretrain.budget_tokens=256"), "continued", layout)


def test_which_other_arms_the_run_trains_does_not_change_an_arms_fingerprint(base_model, layout, caplog):
    """Adding an arm to a finished run, or running fewer (``make demo`` leaves TAPT out), retrains no arm that
    is already done: the list of arms is not in an arm's fingerprint."""
    cfg = make_cfg(base_model, "pretrain.budget_tokens=256")
    pretrain_arm(cfg, "continued", layout)
    fewer = make_cfg(base_model, "pretrain.budget_tokens=256", "pretrain.arms=[continued]")
    fp, fp_fewer = arm_fingerprint(cfg, "continued", layout), arm_fingerprint(fewer, "continued", layout)
    assert fp == fp_fewer
    caplog.set_level("INFO")
    assert pretrain_arm(fewer, "continued", layout)["tokens_consumed"] == 256
    assert "skipped: up to date" in caplog.text
    folder = layout.pretrained_model("continued")
    assert is_complete(folder, fp_fewer)
    other_recipe = make_cfg(base_model, "pretrain.budget_tokens=512", "pretrain.arms=[continued]")
    assert not is_complete(folder, arm_fingerprint(other_recipe, "continued", layout))
