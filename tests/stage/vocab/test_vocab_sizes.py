"""Figures labelled with what was measured: a corpus too small for the requested curve sizes, and an extension
whose size follows the recommendation unless the config overrides it."""

from __future__ import annotations

import json

import pytest

from domainbert.config.vocab import ExtensionConfig
from domainbert.core.models import load_mlm_model
from domainbert.core.paths import RunLayout
from domainbert.vocab.sizes import choose_extension, curve_points
from domainbert.vocab.stage import run_vocab
from support.vocab import stage_cfg


class _Summary(dict):
    """A pretraining summary with only the fields a test sets (the rest print as n/a)."""

    def __missing__(self, key):
        return None


def _card(cfg, source) -> str:
    from domainbert.pretrain.outputs import model_card

    return model_card(cfg, "extended", _Summary(source=str(source), seq_len_phases=[[0, 1, 128]],
                                                parameters={"total": 1}))


def _vocab(reach: int):
    return lambda size: [f"t{i}" for i in range(min(size, reach))]


def test_curve_stops_at_what_both_vocabularies_reach():
    curve, points = curve_points([5000, 10000, 20000, 30522], _vocab(10780), _vocab(11020), prefix=True)
    assert curve["sizes"] == [5000, 10000, 10780] and curve["control_sizes"] == [5000, 10000, 10780]
    assert curve["unreached"] == [20000, 30522] and curve["reach"] == {"domain": 10780, "control": 11020}
    assert [(len(d), len(c)) for d, c in points] == [(5000, 5000), (10000, 10000), (10780, 10780)]


def test_curve_without_prefixes_keeps_each_reach_and_measures_it_once():
    curve, points = curve_points([100, 200, 400], _vocab(150), _vocab(180), prefix=False)
    assert curve["sizes"] == [100, 150] and curve["control_sizes"] == [100, 180]
    assert curve["unreached"] == [200, 400]
    curve, _ = curve_points([100, 200], _vocab(100), _vocab(100), prefix=True)
    assert curve["sizes"] == [100] and curve["unreached"] == [200]  # 100 is already a point
    curve, _ = curve_points([300, 100], _vocab(1000), _vocab(1000), prefix=True)
    assert curve["sizes"] == [100, 300] and curve["unreached"] == [] and curve["reach"]["domain"] is None


def test_extension_follows_the_recommendation_unless_overridden():
    cands = [{"word": w, "count": 10, "pieces": ["x", "##y", "##z"], "score": 20} for w in "abcdef"]
    rec = {"decision": "extend", "extend_words": ["b", "d"]}
    chosen, info = choose_extension(ExtensionConfig(), cands, rec)
    assert [c["word"] for c in chosen] == ["b", "d"] and info["num_tokens"] == 2
    assert info["source"] == "recommendation" and info["recommended_tokens"] == 2
    chosen, info = choose_extension(ExtensionConfig(num_tokens=5), cands, rec)
    assert [c["word"] for c in chosen] == list("abcde") and info["source"] == "override"
    assert info["num_tokens"] == 5 and info["recommended_tokens"] == 2 and info["requested_tokens"] == 5
    chosen, info = choose_extension(ExtensionConfig(enabled=False), cands, rec)
    assert chosen == [] and info["num_tokens"] == 0


@pytest.mark.slow
def test_stage_labels_achieved_sizes_and_extends_by_the_recommendation(tmp_path, corpus, control_file, tiny_base):
    layout = RunLayout(tmp_path / "run")
    (tmp_path / "run").mkdir()
    corpus.rename(layout.corpus)
    cfg = stage_cfg(tiny_base, control_file, "tokenizer.vocab_size=200", "vocab.curve_sizes=[100, 200, 20000, 30000]",
               "vocab.extension.num_tokens=null")
    report = run_vocab(cfg, layout)
    curve = report["curve"]
    reach = min(curve["reach"]["domain"], curve["reach"]["control"])
    assert 200 < reach < 20000 and curve["sizes"] == [100, 200, reach] and curve["unreached"] == [20000, 30000]
    assert report["control"]["vocab_size"] == report["tokenizer"]["achieved_vocab_size"] == 200
    md = (layout.vocab / "report.md").read_text()
    header = next(line for line in md.splitlines() if line.startswith("| vocabulary |"))
    assert header == f"| vocabulary | 100 | 200 | {reach:,} |"
    assert "Requested curve sizes 20,000 and 30,000 were not reached" in md and f"stops at {reach:,}" in md
    assert f"at {reach:,}" in report["published"][0]["sentence"]
    assert "30,000" not in report["published"][0]["sentence"]

    rec, ext = report["recommendation"], report["extension"]
    assert rec["extend_words"] and ext["source"] == "recommendation"
    assert ext["num_tokens"] == len(rec["extend_words"]) == rec["figures"]["extend_candidates"]
    added = json.loads((layout.extended_model / "extension.json").read_text())
    assert sorted(t["word"] for t in added["tokens"]) == sorted(rec["extend_words"])
    base_size = load_mlm_model(str(tiny_base)).config.vocab_size
    assert load_mlm_model(layout.extended_model).config.vocab_size == base_size + len(rec["extend_words"])
    assert f"{len(rec['extend_words'])} tokens added" in md
    card = _card(cfg, layout.extended_model)  # the model card says what the report says
    assert f"{len(rec['extend_words'])} domain tokens added" in card and "recommendation gives" in card


def test_model_card_states_an_override(tmp_path, tiny_base, control_file):
    (tmp_path / "extension.json").write_text(json.dumps({"num_tokens": 1000, "source": "override",
                                                         "recommended_tokens": 116}))
    card = _card(stage_cfg(tiny_base, control_file), tmp_path)
    assert "1,000 domain tokens added" in card and "overriding the recommendation of 116" in card


def test_report_states_an_override_and_the_size_a_small_corpus_reached():
    from domainbert.vocab.report import _control_size, _reached, extension_sentence

    ext = {"source": "override", "num_tokens": 1000, "requested_tokens": 1000, "recommended_tokens": 116}
    assert "overrides the recommendation (116 tokens)" in extension_sentence(ext, {"decision": "extend"})
    ext = {"source": "recommendation", "num_tokens": 116, "recommended_tokens": 116}
    assert extension_sentence(ext, {"decision": "extend"}) == "116 tokens added, as recommended."
    assert _reached(10780, 30522, "the corpus") == "10,780 tokens (the corpus supports only 10,780 of the 30,522 requested)"
    assert _reached(30522, 30522, "the corpus") == "30,522 tokens"
    assert _control_size({"vocab_size": 27879}, {"achieved_vocab_size": 27879}) == (
        "27,879 tokens, the domain vocabulary's size")
    assert "the control text supports only 228" in _control_size({"vocab_size": 228}, {"achieved_vocab_size": 299})
