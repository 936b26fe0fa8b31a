"""``pretrain.scratch_model``: the from-scratch arm in another family than the base (RoBERTa, XLM-R, DeBERTa-v2/v3,
ModernBERT), on the domain tokenizer: trained, saved, reloaded with the Auto classes, fine-tuned on NER and
classification."""

from __future__ import annotations

import gzip
import json
import random

import pytest

from domainbert.core.errors import ConfigError
from domainbert.core.models import load_mlm_model
from domainbert.pretrain.stage import arm_fingerprint, pretrain_arm
from support.pretrain import make_cfg, unigram_tokenizer, wordpiece_tokenizer

TINY = {"num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2, "intermediate_size": 256}
FAMILIES = {
    "roberta": {"model_type": "roberta", **TINY},
    "xlm-roberta": {"model_type": "xlm-roberta", **TINY},  # XLM-T's family: RoBERTa's positions, its own classes
    "deberta-v2": {"model_type": "deberta-v2", **TINY, "relative_attention": True, "position_buckets": 32,
                   "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1, "position_biased_input": False},
    "modernbert": {"model_type": "modernbert", **TINY, "global_attn_every_n_layers": 2, "local_attention": 16},
}


def _tasks(root, rng: random.Random) -> list[dict]:
    """A tiny NER task (the words "unix" and "lisp" are TERMs) and a two-label classification task."""
    words = ["the", "unix", "lisp", "of", "memory", "data", "kernel", "user"]
    (root / "ner").mkdir()
    (root / "cls").mkdir()
    for split, n in (("train", 24), ("validation", 8), ("test", 8)):
        rows = [[rng.choice(words) for _ in range(rng.randint(3, 7))] for _ in range(n)]
        (root / "ner" / f"{split}.conll").write_text("\n".join(
            "\n".join(f"{w}\t{'B-TERM' if w in ('unix', 'lisp') else 'O'}" for w in row) + "\n" for row in rows))
        with gzip.open(root / "cls" / f"{split}.jsonl.gz", "wt") as f:
            for i, row in enumerate(rows):
                f.write(json.dumps({"id": f"{split}-{i}", "text": " ".join(row), "label": ["a", "b"][i % 2]}) + "\n")
    return [{"name": "ner", "type": "ner", "format": "conll", "path": str(root / "ner"),
             "labels": ["O", "B-TERM", "I-TERM"]},
            {"name": "cls", "type": "classification", "format": "jsonl", "path": str(root / "cls"),
             "labels": ["a", "b"]}]


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_scratch_arm_in_another_family_trains_saves_reloads_and_fine_tunes(base_model, layout, texts, tmp_path,
                                                                          family):
    from domainbert.finetune.stage import finetune_one

    wordpiece_tokenizer(texts, vocab_size=400).save_pretrained(layout.tokenizer)
    tasks = _tasks(tmp_path, random.Random(0))
    cfg = make_cfg(base_model, "pretrain.arms=[scratch]", "pretrain.budget_tokens=256",
                   f"pretrain.scratch_model={json.dumps(FAMILIES[family])}", "finetune.tasks=" + json.dumps(tasks),
                   "finetune.seeds=[1]", "finetune.epochs=1", "finetune.batch_size=8", "finetune.max_length=24")
    summary = pretrain_arm(cfg, "scratch", layout)
    assert summary["steps"] == 2 and summary["vocab_size"] == 400
    assert summary["domain_perplexity"] < summary["domain_perplexity_before"]
    model = load_mlm_model(layout.pretrained_model("scratch"))  # AutoModelForMaskedLM from the saved folder
    assert model.config.model_type == family and model.config.vocab_size == 400
    assert model.config.pad_token_id == 0  # the domain tokenizer's [PAD], not the family's own
    assert model.config.num_hidden_layers == 2 and model.config.hidden_size == 128

    for task in ("ner", "cls"):
        result = finetune_one(cfg, layout, "scratch", str(layout.pretrained_model("scratch")), task, 1)
        assert result["steps"] == 3 and len(result["pred"]) == 8
        # the kept model of the only seed, unless it collapsed (two pretraining steps usually do): never kept then
        assert layout.finetuned_model("scratch", task).is_dir() == (not result["collapsed"])


def test_the_architecture_is_part_of_the_scratch_arms_fingerprint_only(base_model, layout, texts):
    wordpiece_tokenizer(texts, vocab_size=400).save_pretrained(layout.tokenizer)
    plain = make_cfg(base_model)
    roberta = make_cfg(base_model, f"pretrain.scratch_model={json.dumps(FAMILIES['roberta'])}")
    assert arm_fingerprint(plain, "scratch", layout) != arm_fingerprint(roberta, "scratch", layout)
    assert arm_fingerprint(plain, "continued", layout) == arm_fingerprint(roberta, "continued", layout)
    with pytest.raises(ConfigError, match="model_type"):
        make_cfg(base_model, 'pretrain.scratch_model={"hidden_size": 128}')


@pytest.mark.slow
@pytest.mark.parametrize("family", ["roberta", "deberta-v2", "modernbert"])
def test_continued_and_extended_arms_from_a_base_of_another_family(layout, texts, tmp_path, family):
    """A base of another family (its own MLM head: RoBERTa's lm_head, DeBERTa's cls, ModernBERT's head) through
    the vocab stage (extension: WordPiece, or SentencePiece-unigram as DeBERTa-v3's), both checkpoint-based arms
    and fine-tuning of the extended one."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM

    from domainbert.finetune.stage import finetune_one
    from domainbert.vocab.stage import run_vocab

    unigram = family == "deberta-v2"
    tok = unigram_tokenizer(texts) if unigram else wordpiece_tokenizer(texts)
    config = AutoConfig.for_model(**FAMILIES[family])
    config.vocab_size, config.pad_token_id = len(tok), tok.pad_token_id
    for name in ("bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id"):
        if hasattr(config, name):
            setattr(config, name, getattr(tok, name, None) or tok.cls_token_id)
    config.max_position_embeddings = 64
    torch.manual_seed(0)
    base = tmp_path / "base"
    AutoModelForMaskedLM.from_config(config).save_pretrained(base)
    tok.save_pretrained(base)
    tasks = _tasks(tmp_path, random.Random(0))[:1]
    cfg = make_cfg(base, "pretrain.arms=[continued, extended]", "pretrain.budget_tokens=256",
                   f"base_model.lowercase={str(not unigram).lower()}", "tokenizer.vocab_size=300",
                   "vocab.curve_sizes=[150, 300]", "vocab.heldout_documents=10", "vocab.extension.num_tokens=5",
                   "vocab.extension.min_count=2", "finetune.tasks=" + json.dumps(tasks), "finetune.seeds=[1]",
                   "finetune.epochs=1", "finetune.batch_size=8", "finetune.max_length=24")
    report = run_vocab(cfg, layout)
    assert report["extension"]["num_tokens"] == 5
    for arm in ("continued", "extended"):
        summary = pretrain_arm(cfg, arm, layout)
        assert summary["steps"] == 2 and summary["domain_perplexity"] < summary["domain_perplexity_before"]
        model = load_mlm_model(layout.pretrained_model(arm))
        assert model.config.model_type == family
        assert model.config.vocab_size == len(tok) + (5 if arm == "extended" else 0)
    result = finetune_one(cfg, layout, "extended", str(layout.pretrained_model("extended")), "ner", 1)
    assert len(result["pred"]) == 8
