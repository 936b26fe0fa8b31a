"""Next-sentence prediction: sentence-pair construction, the MLM + NSP loss in training, preflight errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from domainbert.core.errors import ConfigError
from domainbert.core.models import load_mlm_model, load_tokenizer
from domainbert.pretrain.data import encode_documents
from domainbert.pretrain.model import load_pretraining_model
from domainbert.pretrain.objective import MLMObjective
from domainbert.pretrain.pairs import IS_NEXT, NOT_NEXT, PairStream
from domainbert.pretrain.preflight import check_nsp
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import make_cfg, wordpiece_tokenizer, write_corpus


def _segments(row_ids: np.ndarray, row_types: np.ndarray, sep: int) -> tuple[list[int], list[int]]:
    seps = np.flatnonzero(row_ids == sep)
    a_end, b_end = seps[0], seps[1]
    return row_ids[1:a_end].tolist(), row_ids[a_end + 1:b_end].tolist()


def _contains(haystack: list[int], needle: list[int]) -> bool:
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def test_pairs_are_balanced_segmented_and_is_next_pairs_are_adjacent(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)
    docs = [ids.tolist() for ids, _ in encode_documents(tok, texts[20:])]
    stream = PairStream(tok, tmp_path / "c", "train", seed=3)
    batches = [stream.next_sequences(8, 48) for _ in range(40)]
    labels = torch.cat([b.next_sentence_label for b in batches]).numpy()
    assert set(labels.tolist()) == {IS_NEXT, NOT_NEXT}
    assert 0.4 < labels.mean() < 0.6  # 320 pairs, half of them NotNext in expectation
    adjacent = 0
    for batch in batches:
        ids, types = batch.input_ids.numpy(), batch.token_type_ids.numpy()
        real = batch.attention_mask.numpy().astype(bool) if batch.attention_mask is not None else np.ones_like(ids, bool)
        for row, label in enumerate(batch.next_sentence_label.tolist()):
            assert ids[row, 0] == tok.cls_token_id
            a, b = _segments(ids[row], types[row], tok.sep_token_id)
            assert a and b
            n_a, n_b = len(a) + 2, len(b) + 1  # [CLS] A [SEP] | B [SEP]
            assert (types[row, :n_a] == 0).all() and (types[row, n_a:n_a + n_b] == 1).all()
            assert real[row].sum() == n_a + n_b and (types[row, ~real[row]] == 0).all()
            assert (ids[row, ~real[row]] == tok.pad_token_id).all()
            special = batch.special[row].numpy()
            assert special[0] and special[n_a - 1] and special[n_a + n_b - 1] and special[~real[row]].all()
            assert not special[1:n_a - 1].any() and not special[n_a:n_a + n_b - 1].any()
            source = [d for d in docs if _contains(d, a)]
            assert source, "segment A is not a run of one document"
            if label == IS_NEXT:
                assert any(_contains(d, a + b) for d in source)  # B is what follows A in its document
                adjacent += 1
            else:
                assert not any(_contains(d, a + b[:3]) for d in source)  # B does not continue A
    assert adjacent > 100


def test_pair_stream_is_deterministic_and_resumes_exactly(tmp_path, texts):
    tok = wordpiece_tokenizer(texts)
    write_corpus(tmp_path / "c", texts, n_val=20)
    first = PairStream(tok, tmp_path / "c", "train", shuffle_seed=5, seed=5)
    for _ in range(30):
        first.next_sequences(4, 32)
    state = json.loads(json.dumps(first.state_dict()))  # as checkpoints store it
    expected = [first.next_sequences(4, 32) for _ in range(5)]
    second = PairStream(tok, tmp_path / "c", "train", shuffle_seed=5, seed=5)
    second.load_state_dict(state)
    for want in expected:
        got = second.next_sequences(4, 32)
        assert torch.equal(got.input_ids, want.input_ids)
        assert torch.equal(got.next_sentence_label, want.next_sentence_label)
        assert torch.equal(got.token_type_ids, want.token_type_ids)
    other_seed = PairStream(tok, tmp_path / "c", "train", shuffle_seed=5, seed=6)
    other_seed.load_state_dict(state)
    assert not torch.equal(other_seed.next_sequences(4, 32).input_ids, expected[0].input_ids)


def test_objective_adds_the_nsp_loss(base_model, tmp_path, texts):
    tok = load_tokenizer(base_model)
    write_corpus(tmp_path / "c", texts, n_val=20)
    batch = PairStream(tok, tmp_path / "c", "train", seed=1).next_sequences(4, 32)
    labels = torch.full_like(batch.input_ids, -100)
    labels[:, 2] = batch.input_ids[:, 2]
    model = load_pretraining_model(str(base_model))
    objective = MLMObjective(model, sparse=True, nsp=True)
    args = (batch.input_ids, labels, batch.attention_mask)
    with_nsp = objective(*args, token_type_ids=batch.token_type_ids, next_sentence_label=batch.next_sentence_label)
    nsp_loss, correct, pairs = objective.last_nsp
    mlm_only = objective(*args, token_type_ids=batch.token_type_ids)
    assert objective.last_nsp is None
    assert with_nsp.item() == pytest.approx(mlm_only.item() + nsp_loss.item(), rel=1e-5)
    assert float(nsp_loss) > 0 and pairs == 4 and 0 <= int(correct) <= 4
    # Gradients reach the NSP classifier and the pooler.
    with_nsp.backward()
    assert model.cls.seq_relationship.weight.grad.abs().sum() > 0
    assert model.bert.pooler.dense.weight.grad.abs().sum() > 0


def test_training_with_nsp_logs_nsp_and_saves_a_masked_lm_folder(base_model, layout):
    cfg = make_cfg(base_model, "pretrain.next_sentence_prediction=true", "pretrain.lr=1e-3")
    summary = pretrain_arm(cfg, "continued", layout)
    assert summary["next_sentence_prediction"] is True and summary["steps"] == 8
    assert summary["real_token_fraction"] <= 1.0
    records = [json.loads(line) for line in (layout.pretrain("continued") / "metrics.jsonl").read_text().splitlines()]
    train = [r for r in records if r["kind"] == "train"]
    assert all(r["nsp_loss"] > 0 and 0 <= r["nsp_accuracy"] <= 1 for r in train)
    assert summary["nsp_accuracy"] == train[-1]["nsp_accuracy"]
    folder = layout.pretrained_model("continued")
    trained = load_pretraining_model(str(folder))
    untrained = load_pretraining_model(str(base_model))
    assert not torch.equal(trained.cls.seq_relationship.weight, untrained.cls.seq_relationship.weight)
    assert load_mlm_model(folder).config.vocab_size == untrained.config.vocab_size  # still loads for fill-mask
    assert "next-sentence prediction" in (folder / "README.md").read_text()


def test_nsp_off_leaves_the_pure_mlm_run(base_model, layout):
    summary = pretrain_arm(make_cfg(base_model), "continued", layout)
    assert summary["next_sentence_prediction"] is False and summary["nsp_accuracy"] is None
    records = [json.loads(line) for line in (layout.pretrain("continued") / "metrics.jsonl").read_text().splitlines()]
    assert not any("nsp_loss" in r for r in records)


def test_preflight_rejects_nsp_without_segment_embeddings_or_head(base_model):
    from transformers import RobertaConfig, RobertaForMaskedLM

    roberta = RobertaForMaskedLM(RobertaConfig(vocab_size=100, hidden_size=128, num_hidden_layers=2,
                                               num_attention_heads=2, intermediate_size=256, type_vocab_size=1))
    with pytest.raises(ConfigError, match="segment") as err:
        check_nsp(roberta, True, "roberta-tiny")
    assert err.value.field == "pretrain.next_sentence_prediction"
    check_nsp(roberta, False, "roberta-tiny")  # NSP off: nothing to check
    with pytest.raises(ConfigError, match="NSP head"):
        check_nsp(load_mlm_model(base_model), True, "bert-mlm")  # BertForMaskedLM: no pooler, no classifier
    check_nsp(load_pretraining_model(str(base_model)), True, "bert-pretraining")
