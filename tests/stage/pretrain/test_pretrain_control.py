"""The equal-token control arm (general text, continued's start and budget) and the original checkpoint as a
second reference after a base warm-up."""

from __future__ import annotations

import json

from domainbert.corpus import store
from domainbert.finetune.expectations import expected_runs
from domainbert.finetune.jobs import ORIGINAL, models_to_compare
from domainbert.pretrain.base_warmup import warm_model_folder
from domainbert.pretrain.stage import pretrain_arm
from domainbert.pretrain.task_text import general_text_dir
from support.pretrain import SMALL_WARMUP, make_cfg


def _cfg(base, *extra: str):
    return make_cfg(
        base,
        *SMALL_WARMUP,
        "pretrain.base_warmup.steps=8",
        "pretrain.arms=[continued, control]",
        "pretrain.budget_tokens=640",
        "finetune.only_tasks=[science-terms-ner]",
        *extra,
    )


def test_the_control_trains_continued_s_start_and_budget_on_general_text(headless_base, layout):
    cfg = _cfg(headless_base)
    continued = pretrain_arm(cfg, "continued", layout)
    control = pretrain_arm(cfg, "control", layout)
    assert control["tokens_consumed"] == continued["tokens_consumed"] > 0
    assert control["steps"] == continued["steps"]
    assert control["start_head"] == continued["start_head"] == "warmed-up"
    assert control["domain_perplexity_before"] == continued["domain_perplexity_before"]  # the same start
    assert control["data"] == "general" and continued["data"] == "corpus"
    # the warm-up corpus less the forgetting set: glosses-01 measures forgetting and is never trained on
    manifest = json.loads((general_text_dir(layout) / "manifest.json").read_text())
    assert manifest["files"] and all("glosses-01" not in f for f in manifest["files"])
    corpus = set(store.iter_texts(layout.corpus, "train"))
    general = list(store.iter_texts(general_text_dir(layout), "train"))
    assert len(general) == manifest["documents"] > 100 and not corpus & set(general)


def test_after_a_warm_up_the_original_checkpoint_is_a_reference_that_is_expected(headless_base, layout):
    cfg = _cfg(headless_base)
    assert ORIGINAL not in models_to_compare(cfg, layout)  # no warm-up yet: base is the checkpoint itself
    # but `plan` counts it: `domainbert run` warms the base up before fine-tuning
    assert ORIGINAL in {r.model for r in expected_runs(cfg, layout, planned=True)}
    pretrain_arm(cfg, "continued", layout)
    models = models_to_compare(cfg, layout)
    assert models["base"] == str(warm_model_folder(cfg, layout))
    assert models[ORIGINAL] == str(headless_base)
    seeds = cfg.finetune.seeds
    assert [(r.seed, r.mode) for r in expected_runs(cfg, layout) if r.model == ORIGINAL] == [
        (s, "finetune") for s in seeds
    ]


def test_a_base_with_its_own_head_has_no_second_reference(base_model, layout):
    cfg = make_cfg(base_model, "pretrain.arms=[continued]", "pretrain.budget_tokens=256")
    pretrain_arm(cfg, "continued", layout)
    assert ORIGINAL not in models_to_compare(cfg, layout)
    assert {r.model for r in expected_runs(cfg, layout)} == {"base", "continued", "floor"}
