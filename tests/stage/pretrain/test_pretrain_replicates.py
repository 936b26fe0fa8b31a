"""Pretraining replicates (``pretrain.replicates``): each arm trained again from the same start on the same text
under its own seed, fine-tuned under every seed, and read back by the report as one arm's replicates."""

from __future__ import annotations

from safetensors.torch import load_file

from domainbert.config.pretrain import replicate_name, split_replicate
from domainbert.core.artifacts import read_record
from domainbert.finetune.expectations import expected_runs
from domainbert.finetune.jobs import models_to_compare
from domainbert.pretrain.base_warmup import warm_model_folder
from domainbert.pretrain.stage import arm_fingerprint, pretrain_arm
from domainbert.report.results import group_results
from support.pretrain import SMALL_WARMUP, make_cfg


def _cfg(base, *extra: str):
    return make_cfg(base, *SMALL_WARMUP, "pretrain.base_warmup.steps=8", "pretrain.arms=[continued]",
                    "pretrain.budget_tokens=640", "finetune.only_tasks=[science-terms-ner]", *extra)


def test_names_round_trip():
    assert replicate_name("continued", 1) == "continued" and replicate_name("continued", 3) == "continued@r3"
    assert split_replicate("continued@r3") == ("continued", 3) and split_replicate("dapt-tapt") == ("dapt-tapt", 1)


def test_a_replicate_trains_the_same_start_and_text_under_its_own_seed(headless_base, layout):
    one = _cfg(headless_base)
    three = _cfg(headless_base, "pretrain.replicates=3")
    assert three.pretrain.replicate_names() == ["continued", "continued@r2", "continued@r3"]
    # replicate 1 is the arm as trained without replicates: asking for more does not retrain it
    first = pretrain_arm(one, "continued", layout)
    assert arm_fingerprint(three, "continued", layout) == arm_fingerprint(one, "continued", layout)
    warm = read_record(warm_model_folder(one, layout))["content_hash"]
    second = pretrain_arm(three, "continued@r2", layout)
    assert read_record(warm_model_folder(one, layout))["content_hash"] == warm  # the warm-up is shared, untouched
    r2 = layout.root / "pretrain" / "continued@r2"
    assert (r2 / "model" / "model.safetensors").is_file() and not (layout.root / "pretrain" / "continued@r3").exists()
    assert second["tokens_consumed"] == first["tokens_consumed"]
    assert second["domain_perplexity_before"] == first["domain_perplexity_before"]  # the same start
    weights = [load_file(str(p / "model" / "model.safetensors")) for p in (layout.pretrain("continued"), r2)]
    assert any(not (weights[0][k] == weights[1][k]).all() for k in weights[0])  # another data order and masking
    assert arm_fingerprint(three, "continued@r2", layout) != arm_fingerprint(three, "continued", layout)
    # fine-tuned as the arm's replicate; the third, not trained yet, is still expected
    assert "continued@r2" in models_to_compare(three, layout) and "continued@r3" not in models_to_compare(three, layout)
    expected = {r.model for r in expected_runs(three, layout)}
    assert {"continued", "continued@r2", "continued@r3"} <= expected


def test_the_report_reads_a_replicate_s_runs_as_its_arm_s():
    runs = [{"model": m, "task": "t", "seed": s} for m in ("continued", "continued@r2", "base") for s in (2, 1)]
    grouped = group_results(runs)["t"]
    assert sorted(grouped) == ["base", "continued"]
    assert [(r.get("replicate", 1), r["seed"]) for r in grouped["continued"]] == [(1, 1), (1, 2), (2, 1), (2, 2)]


def test_the_pretrain_command_trains_every_replicate(headless_base, layout):
    """``domainbert pretrain`` (the stage command a machine without Prefect runs) trains the replicates too, as
    ``domainbert run`` does: it once trained the arms alone, and the report then found the replicates missing."""
    from typer.testing import CliRunner

    from domainbert.cli import app

    overrides = ["pretrain.arms=[continued]", f"base_model.name_or_path={headless_base}", "pretrain.seq_len=32",
                 "pretrain.batch_size=4", "pretrain.budget_tokens=640", "pretrain.eval_documents=10",
                 "pretrain.checkpoint_every=4", *SMALL_WARMUP, "pretrain.base_warmup.steps=8",
                 "pretrain.replicates=2"]
    result = CliRunner().invoke(app, ["pretrain", "science", *overrides, "--out", str(layout.root)])
    assert result.exit_code == 0, result.output
    for arm in ("continued", "continued@r2"):
        assert (layout.root / "pretrain" / arm / "model" / "model.safetensors").is_file()
        assert f"pretrain {arm}:" in result.output
