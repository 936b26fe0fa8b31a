"""Vocabulary extension: new words become single tokens, their embeddings start as the mean of their pieces."""

from __future__ import annotations

from collections import Counter

import torch

from domainbert.core.models import load_mlm_model, load_tokenizer
from domainbert.vocab.extend import build_extended_model, extension_candidates
from domainbert.vocab.fertility import count_words
from domainbert.vocab.reference_vocabs import load_base_tokenizer
from support.vocab import make_texts


def test_candidates_are_ranked_by_frequency_times_fragmentation(tiny_base):
    _, base = load_base_tokenizer(str(tiny_base), lowercase=True)
    words = Counter({"Microprocessor": 3, "microprocessor": 2, "kernel": 9, "the": 50, "x1": 1})
    cands = extension_candidates(words, base, min_count=2)
    by_word = {c["word"]: c for c in cands}
    assert "the" not in by_word  # already a token
    assert by_word["microprocessor"]["count"] == 5  # merged under the uncased normaliser
    assert all(len(c["pieces"]) >= 2 and c["score"] == c["count"] * (len(c["pieces"]) - 1) for c in cands)
    assert [c["score"] for c in cands] == sorted((c["score"] for c in cands), reverse=True)


def test_extended_model_tokens_and_mean_initialisation(tiny_base, tmp_path):
    base_hf, base = load_base_tokenizer(str(tiny_base), lowercase=True)
    cands = extension_candidates(count_words(make_texts(300, 1)), base, min_count=2)
    chosen = cands[:3]
    summary = build_extended_model(str(tiny_base), base_hf, base, chosen, tmp_path / "ext")
    assert summary["method"] == "wordpiece_vocab" and summary["num_tokens"] == 3

    tok = load_tokenizer(tmp_path / "ext")
    old = load_mlm_model(str(tiny_base))
    new = load_mlm_model(tmp_path / "ext")
    n0 = old.get_input_embeddings().num_embeddings
    assert new.config.vocab_size == n0 + 3 and len(tok) == n0 + 3
    w_old, w_new = old.get_input_embeddings().weight, new.get_input_embeddings().weight
    assert torch.equal(w_new[:n0], w_old[:n0])
    for i, c in enumerate(chosen):
        new_id = n0 + i
        # one piece, in running text too, whatever the case (the base normaliser lower-cases first)
        assert tok(c["word"], add_special_tokens=False)["input_ids"] == [new_id]
        assert tok(f"the {c['word'].upper()} kernel", add_special_tokens=False).tokens()[1] == c["word"]
        pieces = [base.tokenizer.token_to_id(p) for p in c["pieces"]]
        assert torch.allclose(w_new[new_id], w_old[pieces].mean(dim=0))
    assert new.get_output_embeddings().weight.data_ptr() == new.get_input_embeddings().weight.data_ptr()
    # continued pretraining can run on it: an MLM step through the new rows
    ids = torch.tensor([[2, n0, n0 + 1, n0 + 2, 3]])
    loss = new(input_ids=ids, labels=ids).loss
    loss.backward()
    assert torch.isfinite(loss) and new.get_input_embeddings().weight.grad[n0:].abs().sum() > 0


def test_the_extended_model_of_a_headless_base_is_the_same_file_every_time(tiny_base, tmp_path):
    """A base without its MLM head (a sentence-embedding checkpoint) gets a new head at loading: drawn from a
    seeded generator, so rebuilding the vocabulary stage gives the same extended model and arm fingerprints."""
    import shutil

    from transformers import BertForMaskedLM

    headless = tmp_path / "headless"
    shutil.copytree(tiny_base, headless)
    BertForMaskedLM.from_pretrained(str(tiny_base)).bert.save_pretrained(str(headless))  # encoder only
    base_hf, base = load_base_tokenizer(str(headless), lowercase=True)
    chosen = extension_candidates(count_words(make_texts(300, 1)), base, min_count=2)[:3]
    torch.manual_seed(123)  # whatever ran before in the process must not matter
    build_extended_model(str(headless), base_hf, base, chosen, tmp_path / "a")
    torch.rand(7)
    build_extended_model(str(headless), base_hf, base, chosen, tmp_path / "b")
    assert (tmp_path / "a" / "model.safetensors").read_bytes() == (tmp_path / "b" / "model.safetensors").read_bytes()


def test_random_init_draws_new_rows_as_the_initializer_and_keeps_the_old_ones(tiny_base, tmp_path):
    """vocab.init = random: new rows normal(0, initializer_range) from a seeded generator (the warmed
    re-extension draws the same rows), old rows and biases untouched, the new tokens' decoder bias zero."""
    from domainbert.vocab.extend import extend_model

    base_hf, base = load_base_tokenizer(str(tiny_base), lowercase=True)
    chosen = extension_candidates(count_words(make_texts(300, 1)), base, min_count=2)[:3]
    summary = build_extended_model(str(tiny_base), base_hf, base, chosen, tmp_path / "ext", init="random")
    assert summary["init"] == "random"
    old, new = load_mlm_model(str(tiny_base)), load_mlm_model(tmp_path / "ext")
    n0 = old.get_input_embeddings().num_embeddings
    w_old, w_new = old.get_input_embeddings().weight, new.get_input_embeddings().weight
    assert w_new.shape == (n0 + 3, w_old.shape[1])
    assert torch.equal(w_new[:n0], w_old[:n0])
    rows = w_new[n0:]
    std = new.config.initializer_range
    assert abs(rows.mean().item()) < 4 * std / rows.numel() ** 0.5
    assert 0.8 * std < rows.std().item() < 1.2 * std
    pieces = [base.tokenizer.token_to_id(p) for p in chosen[0]["pieces"]]
    assert not torch.allclose(w_new[n0], w_old[pieces].mean(dim=0))
    bias_old, bias_new = old.get_output_embeddings().bias, new.get_output_embeddings().bias
    assert torch.equal(bias_new[:n0], bias_old[:n0]) and torch.equal(bias_new[n0:], torch.zeros(3))
    # the same draw again (the warmed base re-extended in pretrain.start), whatever the global RNG did
    torch.manual_seed(99)
    again = extend_model(load_mlm_model(str(tiny_base)), list(range(n0, n0 + 3)), [[0]] * 3, "random")
    assert torch.equal(again.get_input_embeddings().weight[n0:], rows)


def test_the_default_init_leaves_the_vocab_fingerprint_and_extension_record_as_before(
    tiny_base, control_file, tmp_path
):
    from domainbert.vocab.stage import config_of
    from support.vocab import stage_cfg

    assert "init" not in config_of(stage_cfg(tiny_base, control_file))["vocab"]  # earlier fingerprints hold
    other = stage_cfg(tiny_base, control_file, "vocab.init=random")
    assert config_of(other)["vocab"]["init"] == "random"  # a non-default init rebuilds the extended model
    base_hf, base = load_base_tokenizer(str(tiny_base), lowercase=True)
    chosen = extension_candidates(count_words(make_texts(300, 1)), base, min_count=2)[:2]
    assert "init" not in build_extended_model(str(tiny_base), base_hf, base, chosen, tmp_path / "ext")
