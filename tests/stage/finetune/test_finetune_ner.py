"""NER: first-sub-token label alignment, decoding back to words, and exact agreement with seqeval."""

from __future__ import annotations

import random

import numpy as np
import pytest

from domainbert.finetune.ner import IGNORE, decode_ner, encode_ner, ner_metrics, repair_lines
from domainbert.task_data.splits import NerExample

LABELS = ["O", "B-TERM", "I-TERM", "B-LANG", "I-LANG"]
L2I = {t: i for i, t in enumerate(LABELS)}


@pytest.fixture(scope="module")
def tok(tiny_bert):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_bert)


def test_labels_go_to_the_first_sub_token_only(tok):
    ex = NerExample(tokens=["Lisp", "compilers", "xyzzy"], tags=["B-LANG", "B-TERM", "I-TERM"])
    [feat] = encode_ner([ex], tok, L2I, max_length=32)
    pieces = tok.convert_ids_to_tokens(feat["input_ids"])
    # lisp -> 1 piece, compilers -> compiler ##s, xyzzy -> several pieces (characters)
    assert pieces[:4] == ["[CLS]", "lisp", "compiler", "##s"] and pieces[-1] == "[SEP]"
    assert feat["first_positions"] == [1, 2, 4]
    expected = [IGNORE] * len(pieces)
    expected[1], expected[2], expected[4] = L2I["B-LANG"], L2I["B-TERM"], L2I["I-TERM"]
    assert feat["labels"] == expected


def test_truncated_words_are_predicted_o_and_keep_gold_length(tok):
    ex = NerExample(tokens=["lisp"] * 20, tags=["B-LANG"] * 20)
    [feat] = encode_ner([ex], tok, L2I, max_length=8)  # [CLS] + 6 words + [SEP]
    assert feat["word_index"] == list(range(6))
    logits = np.zeros((8, len(LABELS)))
    logits[:, L2I["B-LANG"]] = 1.0
    [pred] = decode_ner([logits], [feat], [ex], LABELS)
    assert pred == ["B-LANG"] * 6 + ["O"] * 14
    assert feat["cut"] and not encode_ner([ex], tok, L2I, max_length=22)[0]["cut"]  # 20 words fit in 22


def random_tags(rng: random.Random, n: int) -> list[str]:
    return [rng.choice(LABELS) for _ in range(n)]  # ill-formed sequences (I- after O) included on purpose


def test_metrics_agree_exactly_with_seqeval():
    from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
    from seqeval.scheme import IOB2

    rng = random.Random(7)
    gold = [random_tags(rng, rng.randint(1, 12)) for _ in range(200)]
    pred = [[t if rng.random() < 0.7 else rng.choice(LABELS) for t in g] for g in gold]
    m = ner_metrics(gold, pred)
    kw = {"mode": "strict", "scheme": IOB2}
    assert m["f1"] == f1_score(gold, pred, **kw)
    assert m["precision"] == precision_score(gold, pred, **kw)
    assert m["recall"] == recall_score(gold, pred, **kw)
    assert m["macro_f1"] == f1_score(gold, pred, average="macro", **kw)
    report = classification_report(gold, pred, output_dict=True, **kw)
    assert set(m["per_type"]) == {"TERM", "LANG"}
    assert m["per_type"]["TERM"]["f1"] == report["TERM"]["f1-score"]
    assert m["per_type"]["LANG"]["support"] == report["LANG"]["support"]
    # strict mode differs from the default (conlleval) mode on ill-formed spans: we use strict
    assert m["f1"] != f1_score(gold, pred)


def test_perfect_and_empty_predictions():
    gold = [["B-TERM", "I-TERM", "O", "B-LANG"]]
    assert ner_metrics(gold, gold)["f1"] == 1.0
    assert ner_metrics(gold, [["O"] * 4])["f1"] == 0.0


def test_repaired_predictions_are_counted_per_run_and_summed_per_task(caplog):
    labels = ["O", "B-X", "I-X"]
    logits = [np.eye(3)[[0, 2, 2, 0, 2]], np.eye(3)[[2, 0]]]  # O I I O I | I O: three I-X start an entity
    features = [{"word_index": [0, 1, 2, 3, 4], "first_positions": [0, 1, 2, 3, 4]},
                {"word_index": [0, 1], "first_positions": [0, 1]}]
    examples = [NerExample(tokens=list("abcde"), tags=["O"] * 5), NerExample(tokens=list("ab"), tags=["O"] * 2)]
    repairs = [4]  # a counter already holding another split's repairs: this call adds its own
    caplog.set_level("DEBUG", logger="domainbert.finetune.ner")
    pred = decode_ner(logits, features, examples, labels, repairs)
    assert pred == [["O", "B-X", "I-X", "O", "B-X"], ["B-X", "O"]] and repairs == [7]
    assert [r.getMessage() for r in caplog.records] == [
        "3 predicted 'I-X' tags not continuing an X entity repaired to 'B-X'"
    ] and caplog.records[0].levelname == "DEBUG"
    runs = [{"task": "t", "model": "base", "seed": 1, "predicted_repairs": 3},
            {"task": "t", "model": "arm", "seed": 2, "predicted_repairs": 1200},
            {"task": "c", "model": "base", "seed": 1}]  # a classification run counts nothing
    assert repair_lines(runs) == [
        "t: 1,203 predicted 'I-X' tags not continuing an X entity repaired to 'B-X' over 2 run(s)' test answers "
        "(most: 1,200, arm/seed-2)"
    ]
