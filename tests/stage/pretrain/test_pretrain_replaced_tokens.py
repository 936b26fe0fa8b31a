"""Replaced-token detection (``pretrain.rtd``): the corruption against exact values, the shared embeddings, an
EconBERTa-style DeBERTa-v3 scratch arm through the stage (trained, saved without its generator, reloaded,
fine-tuned), and an exact resume that needs the generator and head from the checkpoint."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from huggingface_hub import ModelCard
from safetensors.torch import load_file

from domainbert.core.errors import ConfigError
from domainbert.core.models import load_mlm_model
from domainbert.pretrain.objective import detection_flops, flops_per_token
from domainbert.pretrain.replaced_tokens import ReplacedTokenObjective, build_generator, corrupt
from domainbert.pretrain.stage import arm_fingerprint, pretrain_arm
from support.pretrain import make_cfg, wordpiece_tokenizer

DEBERTA_V3 = {"model_type": "deberta-v2", "num_hidden_layers": 2, "hidden_size": 128, "num_attention_heads": 2,
              "intermediate_size": 256, "relative_attention": True, "position_buckets": 32,
              "pos_att_type": ["p2c", "c2p"], "max_relative_positions": -1, "position_biased_input": False}
RTD = ["pretrain.arms=[scratch]", "pretrain.rtd.arms=[scratch]", "pretrain.budget_tokens=512",
       "pretrain.checkpoint_every=2", f"pretrain.scratch_model={json.dumps(DEBERTA_V3)}"]


def test_corrupt_puts_samples_at_masked_positions_and_marks_only_real_replacements():
    input_ids = torch.tensor([[2, 4, 9, 4, 3]])  # [CLS] [MASK] w [MASK] [SEP]
    labels = torch.tensor([[-100, 7, -100, 8, -100]])
    corrupted, replaced = corrupt(input_ids, labels, torch.tensor([7, 5]))
    assert corrupted.tolist() == [[2, 7, 9, 5, 3]]
    assert replaced.tolist() == [[0.0, 0.0, 0.0, 1.0, 0.0]]  # sampling the original token is no replacement


def test_the_generator_shares_the_token_embeddings_and_both_losses_reach_them(base_model):
    model = load_mlm_model(str(base_model))
    generator = build_generator(model, 0.5)
    assert generator.config.num_hidden_layers == 1
    assert generator.get_input_embeddings().weight is model.get_input_embeddings().weight
    assert generator.get_output_embeddings().weight is model.get_input_embeddings().weight
    objective = ReplacedTokenObjective(model, generator, discriminator_weight=50.0)
    ids = torch.randint(5, model.config.vocab_size, (2, 12))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    loss = objective(ids.masked_fill(labels != -100, 4), labels)
    loss.backward()
    figures = objective.last_detection
    assert figures.masked == 2 and figures.positions == 24 and 0 <= int(figures.correct) <= 24
    assert 0 <= int(figures.replaced) <= 2  # only masked positions can be replaced
    assert model.get_input_embeddings().weight.grad.abs().sum() > 0
    assert objective.detection_head[0].weight.grad.abs().sum() > 0
    objective.eval()  # evaluation takes the generator's best guess: the same figures twice
    with torch.no_grad():
        first = float(objective(ids.masked_fill(labels != -100, 4), labels))
        assert float(objective(ids.masked_fill(labels != -100, 4), labels)) == first


def test_a_deberta_v3_scratch_arm_trains_with_rtd_and_saves_the_discriminator_only(base_model, layout, texts,
                                                                                    tmp_path):
    from domainbert.finetune.stage import finetune_one

    wordpiece_tokenizer(texts, vocab_size=400).save_pretrained(layout.tokenizer)
    ner = tmp_path / "ner"
    ner.mkdir()
    for split in ("train", "validation", "test"):
        (ner / f"{split}.conll").write_text("".join("unix\tB-TERM\nof\tO\nlisp\tB-TERM\n\n" for _ in range(6)))
    cfg = make_cfg(base_model, *RTD, "finetune.seeds=[1]", "finetune.epochs=1", "finetune.batch_size=4",
                   "finetune.max_length=16", "finetune.tasks=" + json.dumps([{
                       "name": "ner", "type": "ner", "format": "conll", "path": str(ner),
                       "labels": ["O", "B-TERM", "I-TERM"]}]))
    summary = pretrain_arm(cfg, "scratch", layout)
    assert summary["objective"] == "rtd" and summary["perplexity_of"] == "generator"
    assert summary["generator_layers"] == 1 and summary["steps"] == 4
    assert summary["domain_perplexity"] < summary["domain_perplexity_before"]
    assert 0 < summary["discriminator_accuracy"] <= 1 and 0 < summary["discriminator_accuracy_before"] <= 1
    # a random generator replaces nearly every masked token; calling all original then scores the unmasked share
    assert 0.7 < summary["discriminator_floor_accuracy_before"] < 1
    folder = layout.pretrained_model("scratch")
    assert not any(k.startswith(("generator", "detection_head")) for k in load_file(folder / "model.safetensors"))
    model = load_mlm_model(str(folder))
    assert model.config.model_type == "deberta-v2" and model.config.vocab_size == 400
    card = ModelCard.load(folder / "README.md")  # an encoder to fine-tune: no fill-mask promise
    assert card.data.pipeline_tag == "feature-extraction" and "pipeline(\"fill-mask\"" not in card.text
    assert "| discriminator accuracy (validation) |" in card.text and "perplexities are its generator's" in card.text
    metrics = [json.loads(line) for line in (layout.pretrain("scratch") / "metrics.jsonl").read_text().splitlines()]
    assert any("discriminator_accuracy" in m and "generator_loss" in m for m in metrics if m["kind"] == "train")
    result = finetune_one(cfg, layout, "scratch", str(folder), "ner", 1)
    assert len(result["pred"]) == 6


def test_rtd_resumes_exactly_from_a_checkpoint(base_model, layout, texts, tmp_path):
    wordpiece_tokenizer(texts, vocab_size=400).save_pretrained(layout.tokenizer)
    cfg = make_cfg(base_model, *RTD, "pretrain.log_every=1")
    whole = pretrain_arm(cfg, "scratch", layout)
    checkpoints = layout.pretrain("scratch") / "checkpoints"
    assert (checkpoints / "step-2" / "objective_extras.safetensors").is_file()
    # A run stopped after step 2: its checkpoint is all that is left.
    shutil.rmtree(layout.pretrained_model("scratch"))
    for name in ("summary.json", "metrics.jsonl"):
        (layout.pretrain("scratch") / name).unlink()
    resumed = pretrain_arm(cfg, "scratch", layout)
    assert resumed["resumed_from"] == [2]
    assert [s for s, _ in resumed["loss_curve"]] == [1, 2, 3, 4]
    # Steps 3 and 4 need the generator and detection head of step 2: rebuilt from the seed they would differ.
    assert [loss for _, loss in resumed["loss_curve"]] == pytest.approx([loss for _, loss in whole["loss_curve"]],
                                                                        abs=1e-4)
    assert resumed["discriminator_accuracy"] == pytest.approx(whole["discriminator_accuracy"], abs=1e-6)


def test_the_objective_is_part_of_its_arms_fingerprint_only(base_model, layout, texts):
    wordpiece_tokenizer(texts, vocab_size=400).save_pretrained(layout.tokenizer)
    plain = make_cfg(base_model)
    rtd = make_cfg(base_model, "pretrain.rtd.arms=[scratch]")
    assert arm_fingerprint(plain, "scratch", layout) != arm_fingerprint(rtd, "scratch", layout)
    assert arm_fingerprint(plain, "continued", layout) == arm_fingerprint(rtd, "continued", layout)
    both = make_cfg(base_model, "pretrain.rtd.arms=[scratch, continued]")
    assert arm_fingerprint(both, "scratch", layout) == arm_fingerprint(rtd, "scratch", layout)  # other arms' choice
    assert arm_fingerprint(both, "continued", layout) != arm_fingerprint(rtd, "continued", layout)
    with pytest.raises(ConfigError, match="next_sentence_prediction and rtd"):
        make_cfg(base_model, "pretrain.rtd.arms=[scratch]", "pretrain.next_sentence_prediction=true")
    with pytest.raises(ConfigError, match="dapt-tapt .masked-LM. would start from"):
        make_cfg(base_model, "pretrain.arms=[continued, dapt-tapt]", "pretrain.rtd.arms=[continued]")


def test_detection_flops_count_the_encoder_everywhere_and_a_half_depth_generator(base_model):
    model = load_mlm_model(str(base_model))  # 2 layers: the generator has 1
    encoder = flops_per_token(model, 32, mask_rate=0.0, sparse=True)
    head = flops_per_token(model, 32, 0.15, sparse=True) - encoder
    assert detection_flops(model, 32, 0.15, 0.5) == pytest.approx(1.5 * encoder + head)
    assert detection_flops(model, 32, 0.15, 0.01) == pytest.approx(1.5 * encoder + head)  # at least one layer
