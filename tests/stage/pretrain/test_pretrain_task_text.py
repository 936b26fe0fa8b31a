"""The task-adaptive arms (TAPT, DAPT+TAPT, curated TAPT, self-pretraining): their text holds no evaluation
text, their budget is epochs over the task text, and they start where Don't Stop Pretraining says."""

from __future__ import annotations

import json
import math

import pytest

from domainbert.core.errors import ConfigError, DataError
from domainbert.corpus import store
from domainbert.pretrain.stage import pretrain_arm
from domainbert.pretrain.task_text import arm_config, ensure_task_text, estimated_task_tokens
from domainbert.task_data.split_overlap import normalised
from domainbert.task_data.splits import example_texts, load_task
from support.pretrain import make_cfg, write_corpus

TAPT = ("pretrain.tapt.epochs=0.02",)


def _eval_texts(cfg) -> set[str]:
    return {
        normalised(" ".join(example_texts(e)))
        for task in cfg.finetune.tasks
        for split in ("validation", "test")
        for e in load_task(task.model_copy(update={"max_eval_examples": None})).splits[split]
    }


def test_task_text_is_the_training_text_and_never_evaluation_text(base_model, layout):
    cfg = make_cfg(base_model, *TAPT, "finetune.forgetting_task.enabled=true")
    before = estimated_task_tokens(cfg)  # what `plan` says before the task text exists
    folder = ensure_task_text(cfg, layout, curated=False)
    texts = list(store.iter_texts(folder, "train"))
    manifest = json.loads((folder / "manifest.json").read_text())
    # the domain's tasks only: the general-English task (forgetting) is never pretrained on
    domain = [t for t in cfg.finetune.tasks if t.role == "domain"]
    assert len(domain) < len(cfg.finetune.tasks)
    train = [" ".join(example_texts(e)) for t in domain for e in load_task(t).splits["train"]]
    held_out = _eval_texts(cfg)
    assert texts and set(texts) <= set(train)
    assert not {normalised(t) for t in texts} & held_out
    # the shipped science NER task has training sentences that are also evaluation sentences: left out, counted
    counts = manifest["tasks"]
    dropped = sum(c["also_in_evaluation"] for c in counts.values())
    assert dropped == sum(normalised(t) in held_out for t in train) > 0
    assert sum(c["kept"] for c in counts.values()) - manifest["holding_evaluation_text"] == len(texts)
    assert len(texts) == manifest["task_documents"]
    # a science-subject training document holds a short NER test sentence verbatim: left out too
    assert manifest["holding_evaluation_text"] >= 1
    # every task's evaluation splits audited, the general task's included
    assert all(r["verbatim"] == 0 for r in manifest["audit"].values()) and len(manifest["audit"]) == 6
    assert manifest["task_tokens"] == before  # `plan`'s size, read from the task files, is the built one


def test_tapt_budget_is_epochs_over_the_task_text_in_tokens(base_model, layout):
    cfg = make_cfg(base_model, *TAPT, "pretrain.arms=[tapt]")
    summary = pretrain_arm(cfg, "tapt", layout)
    manifest = json.loads((layout.root / "pretrain" / "task-text" / "manifest.json").read_text())
    from transformers import AutoTokenizer

    texts = list(store.iter_texts(layout.root / "pretrain" / "task-text", "train"))
    tokenizer = AutoTokenizer.from_pretrained(base_model)
    tokens = sum(len(ids) + 1 for ids in tokenizer(texts, add_special_tokens=False)["input_ids"])
    assert manifest["task_tokens"] == tokens  # every text and its [SEP], under the base tokenizer
    budget = math.ceil(0.02 * tokens)
    assert summary["budget_tokens"] == budget == arm_config(cfg, "tapt", layout).budget_tokens
    assert summary["steps"] == math.ceil(budget / (4 * 32))
    assert summary["start_head"] == "checkpoint"
    assert pretrain_arm(cfg, "tapt", layout)["steps"] == summary["steps"]  # up to date: read back


def test_curated_tapt_adds_the_nearest_corpus_documents_at_the_same_budget(base_model, layout):
    cfg = make_cfg(base_model, *TAPT, "pretrain.tapt.curated_neighbours=2")
    plain = ensure_task_text(cfg, layout, curated=False)
    curated = ensure_task_text(cfg, layout, curated=True)
    manifest = json.loads((curated / "manifest.json").read_text())
    added = manifest["curated"]["documents"]
    corpus_ids = {d["id"] for d in store.iter_documents(layout.corpus, "train")}
    docs = list(store.iter_documents(curated, "train"))
    assert 0 < added <= len(corpus_ids) and len(docs) == manifest["task_documents"] + added
    assert {d["id"] for d in docs if d["source"] == "corpus"} <= corpus_ids
    scores = [n["score"] for n in manifest["curated"]["nearest"]]
    assert scores == sorted(scores, reverse=True) and scores[0] <= manifest["curated"]["similarity"]["max"]
    assert [d["text"] for d in docs[: manifest["task_documents"]]] == list(store.iter_texts(plain, "train"))
    assert arm_config(cfg, "curated-tapt", layout).budget_tokens == arm_config(cfg, "tapt", layout).budget_tokens


def test_a_corpus_neighbour_holding_evaluation_text_is_left_out(base_model, tmp_path, texts):
    from domainbert.core.paths import RunLayout

    cfg = make_cfg(base_model, *TAPT)
    test_sentence = " ".join(example_texts(load_task(cfg.finetune.tasks[1]).splits["test"][0]))
    layout = RunLayout(tmp_path / "run")
    write_corpus(layout.corpus, [*texts[:50], f"{test_sentence} {texts[0]}"])  # a corpus not decontaminated
    folder = ensure_task_text(cfg, layout, curated=True)
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["neighbours_holding_evaluation_text"] >= 1  # the planted one (FOLDOC holds others)
    assert not [t for t in store.iter_texts(folder, "train") if test_sentence in t]


def test_the_audit_refuses_evaluation_text_that_got_through(base_model, monkeypatch, layout):
    from domainbert.pretrain import task_text

    cfg = make_cfg(base_model, *TAPT)
    monkeypatch.setattr(task_text, "without_evaluation_text", lambda _cfg, docs, _evals: (docs, 0))
    with pytest.raises(DataError, match="found verbatim in the task text"):
        ensure_task_text(cfg, layout, curated=False)
    assert not (layout.root / "pretrain" / "task-text").exists()


def test_dapt_tapt_starts_from_the_continued_arm_and_needs_it_first(base_model, layout):
    from domainbert.core.errors import ModelError
    from domainbert.pretrain.start import arm_start

    with pytest.raises(ConfigError, match="list continued before it"):
        make_cfg(base_model, *TAPT, "pretrain.arms=[dapt-tapt, continued]")
    cfg = make_cfg(base_model, *TAPT, "pretrain.arms=[continued, dapt-tapt]")
    with pytest.raises(ModelError, match="train continued first"):
        arm_start(cfg, "dapt-tapt", layout)
    pretrain_arm(cfg, "continued", layout)
    summary = pretrain_arm(cfg, "dapt-tapt", layout)
    assert arm_start(cfg, "dapt-tapt", layout).source == str(layout.pretrained_model("continued"))
    assert summary["start_head"] == "the continued arm's"
    # before = the continued arm's after, on the same held-out sequences
    continued = json.loads((layout.pretrain("continued") / "summary.json").read_text())
    assert summary["domain_perplexity_before"] == pytest.approx(continued["domain_perplexity"], rel=1e-3)


def test_self_pretraining_is_a_new_encoder_over_the_domain_tokenizer_on_the_task_text(base_model, layout):
    from domainbert.pretrain.start import arm_start

    cfg = make_cfg(base_model, *TAPT, "pretrain.arms=[self-pretrain]")
    layout.tokenizer.mkdir(parents=True)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(base_model).save_pretrained(layout.tokenizer)
    summary = pretrain_arm(cfg, "self-pretrain", layout)
    assert arm_start(cfg, "self-pretrain", layout).head_origin == "random"
    assert summary["lr"] == 5e-4 and summary["budget_tokens"] == arm_config(cfg, "tapt", layout).budget_tokens
