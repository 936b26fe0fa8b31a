"""The model card of a pretrained arm, read back with huggingface_hub's own card classes; push without a token."""

from __future__ import annotations

import json

import pytest
from huggingface_hub import ModelCard

from domainbert.cards.arm import model_card
from domainbert.core.errors import DomainbertError
from domainbert.hub import push_folder
from domainbert.pretrain.stage import pretrain_arm, read_summary
from support.pretrain import make_cfg

SCORES = [{"model": "continued", "task": "science-subject", "task_type": "classification", "metric": "macro_f1",
           "mean": 0.7861, "n_seeds": 3, "collapsed": 0},
          {"model": "continued", "task": "science-terms-ner", "task_type": "ner", "metric": "f1", "mean": 0.296,
           "n_seeds": 3, "collapsed": 1},
          {"model": "base", "task": "science-subject", "task_type": "classification", "metric": "macro_f1",
           "mean": 0.784, "n_seeds": 3, "collapsed": 0}]


@pytest.mark.slow
def test_card_has_hub_metadata_the_scores_and_no_local_path(base_model, layout, tmp_path):
    cfg = make_cfg(base_model, "base_model.hub_id=org/tiny-bert", "hub.license=apache-2.0",
                   "hub.datasets=[org/foldoc]")
    pretrain_arm(cfg, "continued", layout)
    written = ModelCard.load(layout.pretrained_model("continued") / "README.md")  # as pretraining wrote it
    assert written.data.base_model == "org/tiny-bert" and written.data.eval_results is None

    card = ModelCard(model_card(cfg, "continued", read_summary(layout, "continued"), SCORES))
    data = card.data
    assert (data.base_model, data.license, data.language, data.datasets) == ("org/tiny-bert", "apache-2.0", ["en"],
                                                                            ["org/foldoc"])
    assert data.pipeline_tag == "fill-mask" and {"domainbert", "science", "continued"} <= set(data.tags)
    got = {(r.dataset_name, r.task_type, r.metric_type, r.metric_value) for r in data.eval_results}
    assert got == {("science-subject", "text-classification", "macro_f1", 78.61),
                   ("science-terms-ner", "token-classification", "f1", 29.6)}  # continued's rows only
    assert "1 collapsed" in str(card) and str(tmp_path) not in str(card) and str(base_model) not in str(card)
    # How to load it, what it is for, and (1,024 tokens) that it is a test of the pipeline, not a model to use.
    assert 'pipeline("fill-mask", model="PATH_OR_HUB_ID")' in str(card)
    assert "## Intended use and limitations" in str(card)
    assert "**Budget warning:** 1,024 pretraining tokens" in str(card) and "not a model to use" in str(card)
    big = {**read_summary(layout, "continued"), "tokens_consumed": 30_000_000_000}
    assert "Budget warning" not in model_card(cfg, "continued", big, SCORES)
    # the arm's schedules as it trained them: a masking schedule in phases, not the one rate of mask_rate
    assert "- schedules: lr linear" in str(card) and "masking 0.15" in str(card)
    phased = make_cfg(base_model, "pretrain.mask_schedule=[{rate: 0.3, until: 0.5}, {rate: 0.15, until: 1.0}]",
                      "pretrain.lr_schedule={kind: wsd, decay_fraction: 0.2, decay_shape: 1-sqrt}")
    text = model_card(phased, "continued", big, SCORES)
    assert "masking 0.3 to 50% -> 0.15 to 100%" in text and "masking 0.15\n" not in text
    assert "lr warmup-stable-decay (warm-up " in text and "1-sqrt decay over the last 20%" in text


def test_scratch_has_no_base_model_and_a_packaged_base_is_named_by_its_hub_id(base_model):
    from domainbert.cards.finetuned_and_corpus import base_model_id
    from domainbert.config.domain import load_domain

    assert base_model_id(load_domain("science")) == "sentence-transformers/all-MiniLM-L6-v2"
    assert base_model_id(make_cfg(base_model)) is None  # a local folder is not a Hub id
    assert base_model_id(load_domain("science", ["base_model.name_or_path=bert-base-uncased"],
                                     profile="full")) == "bert-base-uncased"


def test_push_dry_run_lists_the_upload_and_a_real_push_needs_a_token(tmp_path, monkeypatch):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    for name in ("config.json", "model.safetensors", "_domainbert.json", "README.md", "sub/x.txt"):
        (folder / name).write_text("{}")
    assert push_folder(folder, "org/m", "card", dry_run=True) == ["README.md", "config.json", "model.safetensors",
                                                                  "sub/x.txt"]
    monkeypatch.delenv("HF_TOKEN", raising=False)
    with pytest.raises(DomainbertError, match="HF_TOKEN"):
        push_folder(folder, "org/m", "card")
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DomainbertError, match="HF_HUB_OFFLINE"):
        push_folder(folder, "org/m", "card")


@pytest.mark.slow
def test_push_command_dry_run_and_its_user_errors(base_model, layout, capsys, monkeypatch):
    from domainbert.cli import run_cli

    pretrain_arm(make_cfg(base_model), "continued", layout)
    args = ["push", "science", "--arm", "continued", "--repo", "org/science-tiny", "--out", str(layout.root)]
    assert run_cli([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "would upload" in out and "(repo type model)" in out and "_domainbert" not in out
    assert "  README.md\n" in out and "  model.safetensors\n" in out and "  loss_curve.png\n" in out  # every file
    disk = layout.pretrained_model("continued") / "README.md"
    assert disk.read_text().rstrip() in out  # the card shown is the card on disk

    # Once a report is rendered push uploads the card with its scores; the card on disk stays the pretraining
    # stage's (the report rewrites no card) and the model folder still verifies.
    from domainbert.core.artifacts import verify_folder

    on_disk = disk.read_text()
    layout.report.mkdir(parents=True)
    (layout.report / "results.json").write_text(json.dumps({"scores": SCORES, "comparisons": []}))
    assert run_cli([*args, "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "model-index" in out and disk.read_text() == on_disk and not ModelCard.load(disk).data.eval_results
    assert verify_folder(layout.pretrained_model("continued")) is None
    monkeypatch.delenv("HF_TOKEN", raising=False)
    assert run_cli(args) == 2
    err = capsys.readouterr().err.strip()
    assert "HF_TOKEN" in err and "\n" not in err and "Traceback" not in err
    assert run_cli([*args[:3], "scratch", *args[4:], "--dry-run"]) == 2  # scratch is not an arm of the offline demo
    assert "unknown arm 'scratch'" in capsys.readouterr().err
    assert run_cli([*args[:3], "tapt", *args[4:], "--dry-run"]) == 2  # an arm of the demo, not pretrained here
    assert "no finished model" in capsys.readouterr().err
