"""What the cards say a model started from and was trained at: the warmed-up base with its warm-up, the
checkpoint itself for ``original``, and the fine-tuned model's ``max_length``."""

from __future__ import annotations

import json
from pathlib import Path

from domainbert.cards.finetuned_and_corpus import finetuned_card, start_of
from domainbert.config.domain import load_domain
from domainbert.pretrain.start import ArmStart, warmup_record

WARMUP = {"steps": 140, "tokens": 286720, "train": "full", "wall_seconds": 12.0, "converged": False,
          "from_machine_cache": False, "trainable_parameters": 22_713_216, "domain_perplexity_random_head": None,
          "domain_perplexity": None, "general_perplexity_random_head": None, "general_perplexity": None}


def _warm_folder(root: Path) -> Path:
    """``pretrain/base-warmup/{model,summary.json}`` as the warm-up writes them."""
    model = root / "pretrain" / "base-warmup" / "model"
    model.mkdir(parents=True)
    (model.parent / "summary.json").write_text(json.dumps(WARMUP))
    return model


def _result(model: str, ref: str) -> dict:
    return {"model": model, "model_ref": ref, "mode": "full", "task": "science-subject",
            "task_type": "classification", "seed": 1, "lr": 3e-4, "steps": 40, "best_step": 30, "collapsed": False,
            "validation": {"macro_f1": 0.5}, "test": {"macro_f1": 0.4}}


def test_fine_tuned_cards_name_the_warmed_base_the_checkpoint_itself_and_max_length(tmp_path):
    cfg = load_domain("science")
    labels = next(t for t in cfg.finetune.tasks if t.name == "science-subject").labels
    warm = _warm_folder(tmp_path)
    base = finetuned_card(cfg, _result("base", str(warm)), labels)
    assert "fine-tuned from the warmed-up base (the general masked-LM warm-up (the whole model) of " \
           "`sentence-transformers/all-MiniLM-L6-v2`: 140 steps, 286,720 tokens of general text)" in base
    original = finetuned_card(cfg, _result("original", cfg.base_model.name_or_path), labels)
    assert "fine-tuned from the checkpoint `sentence-transformers/all-MiniLM-L6-v2` itself" in original
    assert "warmed-up base (" not in original
    plain = finetuned_card(cfg, _result("base", cfg.base_model.name_or_path), labels)  # no warm-up in the run
    assert "fine-tuned from the base checkpoint `sentence-transformers/all-MiniLM-L6-v2`." in plain
    length = cfg.finetune.max_length
    for card in (base, original, plain):
        assert f"max_length: {length} sub-tokens" in card and f"max_length={length}" in card
        assert str(tmp_path) not in card


def test_an_arm_that_began_from_the_warmed_base_records_and_names_its_warm_up(tmp_path):
    cfg = load_domain("science")
    warm = _warm_folder(tmp_path)
    record = warmup_record(ArmStart("continued", str(warm), warm, "auto"))
    assert record == {"steps": 140, "tokens": 286720, "train": "full"}
    assert warmup_record(ArmStart("continued", cfg.base_model.name_or_path, None, "auto")) is None
    assert warmup_record(ArmStart("scratch", "tok", None, "auto")) is None
    assert start_of(cfg, "continued", record).startswith("the warmed-up base (the general masked-LM warm-up")
    assert "140 steps, 286,720 tokens" in start_of(cfg, "extended", record)
    assert start_of(cfg, "extended", record).endswith("with its vocabulary extended by domain tokens")
    assert start_of(cfg, "continued") == "the base checkpoint `sentence-transformers/all-MiniLM-L6-v2`"


def test_a_fine_tuned_card_names_what_it_was_fine_tuned_from_by_the_hubs_conventions(tmp_path):
    """``base_model`` with ``base_model_relation: finetune`` (huggingface_hub's ModelCardData reads both back):
    the checkpoint for ``original`` and an unwarmed ``base``; none for the warmed-up base or an arm until
    ``push --base-repo`` names where it was pushed, which keeps the card's scores."""
    from huggingface_hub import ModelCard

    from domainbert.cards.finetuned_and_corpus import with_base_model

    cfg = load_domain("science")
    labels = next(t for t in cfg.finetune.tasks if t.name == "science-subject").labels
    checkpoint = "sentence-transformers/all-MiniLM-L6-v2"
    for model, ref, expected in [
        ("original", cfg.base_model.name_or_path, checkpoint),
        ("base", cfg.base_model.name_or_path, checkpoint),
        ("base", str(_warm_folder(tmp_path)), None),
        ("continued", str(tmp_path / "pretrain" / "continued" / "model"), None),
    ]:
        data = ModelCard(finetuned_card(cfg, _result(model, ref), labels)).data
        assert data.base_model == expected, model
        assert data.to_dict().get("base_model_relation") == ("finetune" if expected else None), model
    arm = finetuned_card(cfg, _result("continued", str(tmp_path)), labels)
    pushed = ModelCard(with_base_model(arm, "my-org/science-continued"))
    assert pushed.data.base_model == "my-org/science-continued"
    assert pushed.data.to_dict()["base_model_relation"] == "finetune"
    assert pushed.data.eval_results == ModelCard(arm).data.eval_results and pushed.data.eval_results
    assert pushed.text == ModelCard(arm).text
