"""The base warm-up before the checkpoint-based arms (full model or head alone, this machine's cache), per-arm
optimisation settings, and the pooler the arms keep."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from domainbert.pretrain.base_warmup import ensure_base_warmup, warmup_corpus
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import SMALL_WARMUP as SMALL
from support.pretrain import make_cfg


def _cfg(base: Path, *extra: str):
    return make_cfg(base, *SMALL, "pretrain.base_warmup.steps=12", *extra)


def test_warmup_corpus_leaves_out_the_forgetting_set(headless_base):
    files = warmup_corpus(_cfg(headless_base))
    assert files and all("glosses-01" not in f for f in files)  # glosses-01 measures forgetting


def test_headless_base_gets_a_trained_head_and_a_frozen_encoder(headless_base, layout):
    cfg = _cfg(headless_base, "pretrain.base_warmup.train=head")
    folder = ensure_base_warmup(cfg, layout)
    assert folder is not None and (folder / "model.safetensors").is_file()
    summary = json.loads((folder.parent / "summary.json").read_text())
    assert summary["steps"] == 12
    # The random head is worse than the warmed one on both held-out sets.
    assert summary["domain_perplexity"] < summary["domain_perplexity_random_head"]
    assert summary["general_perplexity"] < summary["general_perplexity_random_head"]
    base, warm = load_file(str(headless_base / "model.safetensors")), load_file(str(folder / "model.safetensors"))
    for key in ("encoder.layer.0.attention.self.query.weight", "embeddings.word_embeddings.weight"):
        assert torch.equal(base[key], warm["bert." + key]), key  # the encoder did not move
    assert summary["trainable_parameters"] == 128 * 128 + 2 * 128 + 128 + warm["cls.predictions.bias"].numel()
    assert ensure_base_warmup(cfg, layout) == folder  # up to date: not trained again


def test_the_warmup_stops_once_general_perplexity_stops_falling(headless_base, layout):
    cfg = make_cfg(headless_base, *SMALL, "pretrain.base_warmup.steps=300", "pretrain.base_warmup.eval_every=4",
                   "pretrain.base_warmup.min_improvement=0.05")
    folder = ensure_base_warmup(cfg, layout)
    summary = json.loads((folder.parent / "summary.json").read_text())
    curve = summary["general_curve"]
    assert summary["converged"] and summary["steps"] < 300 and summary["steps"] == curve[-1][0]
    assert [step for step, _ in curve] == list(range(4, summary["steps"] + 1, 4))
    # the last two evaluations each missed the best before them by 5%; no two in a row did so earlier
    best = [min(p for _, p in curve[: i + 1]) for i in range(len(curve))]
    missed = [step > 30 and ppl > best[i - 1] * 0.95 for i, (step, ppl) in enumerate(curve) if i > 0]
    assert missed[-2:] == [True, True]
    assert not any(a and b for a, b in zip(missed[:-2], missed[1:-1], strict=True))
    assert summary["tokens"] == summary["steps"] * 4 * 32  # the warm-up's own batch and length


def test_a_warmup_that_reaches_its_cap_says_it_did_not_converge(headless_base, layout, caplog, monkeypatch):
    monkeypatch.setenv("DOMAINBERT_PROGRESS_SECONDS", "0")  # a progress line at every step
    caplog.set_level(logging.INFO, logger="domainbert.pretrain.warmup_training")
    summary_path = ensure_base_warmup(_cfg(headless_base), layout).parent / "summary.json"
    summary = json.loads(summary_path.read_text())
    assert summary["steps"] == summary["max_steps"] == 12 and summary["converged"] is False
    # Progress like the arms': a line per step here, each carrying the (step, total, name) the flows post.
    posted = [r.progress for r in caplog.records if hasattr(r, "progress")]
    assert posted == [(step, 12, "pretrain base-warmup") for step in range(1, 13)]


def test_a_stop_ends_the_warmup_at_the_next_step(headless_base, layout, monkeypatch):
    """SIGTERM or Ctrl-C during the warm-up stops it within a step (it ran on to its cap once: 20 min on a CPU)."""
    import os
    import signal

    from domainbert.core import signals

    steps = []
    real = signals.check

    def stop_at_the_third(where: str = "") -> None:
        steps.append(where)
        if len(steps) == 3:
            os.kill(os.getpid(), signal.SIGTERM)  # recorded by the handler, raised at the step boundary
        real(where)

    monkeypatch.setattr(signals, "check", stop_at_the_third)
    try:
        with signals.graceful_stop(), pytest.raises(
            signals.StopRequested, match="by SIGTERM in the base warm-up at step 2 of at most 11"
        ):
            # 11 steps: a warm-up no other test made, which this machine's cache would serve without training
            ensure_base_warmup(_cfg(headless_base, "pretrain.base_warmup.steps=11"), layout)
    finally:
        signals.reset()
    assert len(steps) == 3 and not (layout.pretrain("base-warmup") / "model").exists()


def test_base_with_its_head_is_not_warmed_up(base_model, layout):
    assert ensure_base_warmup(make_cfg(base_model), layout) is None


def test_continued_starts_from_the_warmed_head_with_its_own_lr_and_keeps_the_base_pooler(headless_base, layout):
    from transformers import AutoModelForSequenceClassification

    cfg = _cfg(headless_base, "pretrain.budget_tokens=512")
    summary = pretrain_arm(cfg, "continued", layout)
    warm = json.loads((layout.pretrain("base-warmup") / "summary.json").read_text())
    assert summary["start_head"] == "warmed-up"
    # the arm's card says it began from the warm-up, not from the checkpoint its `base_model` names
    assert summary["base_warmup"] == {"steps": warm["steps"], "tokens": warm["tokens"], "train": warm["train"]}
    card = (layout.pretrained_model("continued") / "README.md").read_text()
    assert f"starting from the warmed-up base (the general masked-LM warm-up (the whole model) of `{headless_base.name}`: " \
           f"{warm['steps']} steps, {warm['tokens']:,} tokens of general text)" in " ".join(card.split())
    # "before" is the warmed-up model, measured on the same held-out sequences and masks.
    assert summary["domain_perplexity_before"] == pytest.approx(warm["domain_perplexity"], rel=1e-3)
    assert summary["lr"] == 1e-4 and summary["warmup_ratio"] == 0.06  # the literature default for continued
    assert summary["pooler"] == "base checkpoint's"
    model = AutoModelForSequenceClassification.from_pretrained(layout.pretrained_model("continued"), num_labels=2)
    base = load_file(str(headless_base / "model.safetensors"))
    assert torch.equal(model.bert.pooler.dense.weight, base["pooler.dense.weight"])


def test_arm_optim_overrides_the_default(base_model, layout):
    cfg = make_cfg(base_model, "pretrain.budget_tokens=256", "pretrain.arm_optim.continued.lr=3e-4")
    summary = pretrain_arm(cfg, "continued", layout)
    assert summary["lr"] == 3e-4 and summary["start_head"] == "checkpoint"
    assert cfg.pretrain.for_arm("scratch").lr == 5e-4
    assert make_cfg(base_model, "pretrain.lr=2e-4").pretrain.for_arm("scratch").lr == 2e-4


def test_base_with_its_head_needs_no_warmup_corpus(base_model, layout, tmp_path):
    # The control corpus is the forgetting set itself: fine, since nothing is warmed up.
    only = tmp_path / "general.jsonl"
    only.write_text('{"text": "a general sentence"}\n')
    cfg = make_cfg(base_model, f"vocab.control_corpus=[{only}]", f"pretrain.general_eval_corpus=[{only}]")
    assert ensure_base_warmup(cfg, layout) is None


def test_the_warmed_head_does_not_depend_on_what_ran_before_in_the_process(
    headless_base, tmp_path, texts, monkeypatch
):
    from domainbert.core.paths import RunLayout
    from support.pretrain import write_corpus

    heads = []
    for i, noise in enumerate((0, 10_000)):
        layout = RunLayout(tmp_path / f"run-{i}")
        write_corpus(layout.corpus, texts)
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"cache-{i}"))  # trained both times, not served
        torch.rand(noise)  # an earlier stage drew from torch's generator (or did not)
        folder = ensure_base_warmup(_cfg(headless_base), layout)
        heads.append(load_file(str(folder / "model.safetensors"))["cls.predictions.transform.dense.weight"])
    assert torch.equal(heads[0], heads[1])


def test_full_warmup_trains_the_encoder_and_every_run_on_the_machine_reuses_it(
    headless_base, tmp_path, texts, monkeypatch, caplog
):
    from domainbert.core.paths import RunLayout
    from support.pretrain import write_corpus

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    caplog.set_level(logging.INFO, logger="domainbert.pretrain.base_warmup")
    cfg = _cfg(headless_base)
    assert cfg.pretrain.base_warmup.train == "full" and cfg.pretrain.base_warmup.peak_lr == 5e-4
    first, second = RunLayout(tmp_path / "a"), RunLayout(tmp_path / "elsewhere" / "b")
    for lay in (first, second):
        write_corpus(lay.corpus, texts)
    folder = ensure_base_warmup(cfg, first)
    summary = json.loads((folder.parent / "summary.json").read_text())
    assert summary["train"] == "full" and summary["from_machine_cache"] is False
    base, warm = load_file(str(headless_base / "model.safetensors")), load_file(str(folder / "model.safetensors"))
    key = "encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(base[key], warm["bert." + key])  # the encoder learned too
    assert summary["trainable_parameters"] == sum(t.numel() for k, t in warm.items() if "decoder" not in k)
    assert summary["general_perplexity"] < summary["general_perplexity_random_head"]
    cached = list((tmp_path / "cache" / "domainbert" / "base-warmup").iterdir())
    assert len(cached) == 1
    # the screen says, before the first step, what the warm-up is and that this machine pays it once
    first_line = next(r.getMessage() for r in caplog.records if "paid once on this machine" in r.getMessage())
    assert "the whole encoder" in first_line and str(cached[0]) in first_line
    caplog.clear()
    # another run folder on this machine: the same weights, copied from the cache, not trained again
    monkeypatch.setattr("domainbert.pretrain.base_warmup.train_warmup", _must_not_train)
    again = ensure_base_warmup(cfg, second)
    served = json.loads((again.parent / "summary.json").read_text())
    assert served["from_machine_cache"] is True and served["steps"] == summary["steps"]
    assert not any("paid once on this machine, then reused" in r.getMessage() for r in caplog.records)
    # ... and says what it reused, and from where
    reused = next(r.getMessage() for r in caplog.records if "reused now from its cache" in r.getMessage())
    assert "the whole encoder" in reused and "masked LM on general text" in reused and str(cached[0]) in reused
    assert served["general_perplexity"] == pytest.approx(summary["general_perplexity"], rel=1e-6)
    assert load_file(str(again / "model.safetensors")).keys() == warm.keys()
    assert all(torch.equal(t, load_file(str(again / "model.safetensors"))[k]) for k, t in warm.items())


def _must_not_train(*_args, **_kwargs):
    raise AssertionError("the warm-up trained although this machine had it cached")


def test_the_warmup_fingerprint_follows_content_and_settings_not_paths(headless_base, tmp_path):
    import shutil

    from domainbert.pretrain.base_warmup import warmup_fingerprint

    cfg = _cfg(headless_base)
    files = warmup_corpus(cfg)
    moved = [shutil.copy(f, tmp_path / Path(f).name) for f in files]
    assert warmup_fingerprint(cfg, moved) == warmup_fingerprint(cfg, files)  # same text elsewhere
    # another domain, with other arm settings, shares this machine's warm-up
    law = make_cfg(headless_base, *SMALL, "pretrain.base_warmup.steps=12", "pretrain.batch_size=8",
                   "pretrain.seq_len=64", "pretrain.precision=fp32", "pretrain.whole_word_mask=true",
                   "pretrain.mask_rate=0.2", domain="law")
    assert warmup_fingerprint(law, warmup_corpus(law)) == warmup_fingerprint(cfg, files)
    assert warmup_fingerprint(_cfg(headless_base, "pretrain.base_warmup.steps=13"), files) != warmup_fingerprint(
        cfg, files
    )
    assert warmup_fingerprint(_cfg(headless_base, "pretrain.base_warmup.train=head"), files) != warmup_fingerprint(
        cfg, files
    )
    with open(moved[0], "ab") as f:  # one more byte of warm-up text
        f.write(b"\n")
    assert warmup_fingerprint(cfg, moved) != warmup_fingerprint(cfg, files)


def test_extended_starts_from_the_warmed_base_with_its_new_rows_set_as_the_vocab_stage_set_them(headless_base, layout):
    from domainbert.pretrain.start import extend_warm_model
    from domainbert.vocab.extend import build_extended_model
    from domainbert.vocab.reference_vocabs import load_base_tokenizer

    cfg = _cfg(headless_base)
    warm = ensure_base_warmup(cfg, layout)
    base_hf, base = load_base_tokenizer(str(headless_base), True)
    chosen = [{"word": "foldocword", "count": 9, "pieces": base_hf.tokenize("foldocword")}]
    folder = layout.extended_model
    build_extended_model(str(headless_base), base_hf, base, chosen, folder)
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = extend_warm_model(warm, folder, tokenizer)
    rows = model.get_input_embeddings().weight
    warm_rows = load_file(str(warm / "model.safetensors"))["bert.embeddings.word_embeddings.weight"]
    new_id = tokenizer.convert_tokens_to_ids("foldocword")
    pieces = base_hf.convert_tokens_to_ids(chosen[0]["pieces"])
    assert new_id == warm_rows.shape[0] and rows.shape[0] == warm_rows.shape[0] + 1
    assert torch.equal(rows[: warm_rows.shape[0]], warm_rows)  # the warmed rows, not the base's
    assert torch.allclose(rows[new_id], warm_rows[pieces].mean(dim=0))
    # vocab.init = random: the warmed base gets the very rows the vocab stage drew (extension.json names it)
    drawn_folder = folder.parent / "extended-random"
    build_extended_model(str(headless_base), base_hf, base, chosen, drawn_folder, init="random")
    drawn = extend_warm_model(warm, drawn_folder, tokenizer).get_input_embeddings().weight
    stage_rows = load_file(str(drawn_folder / "model.safetensors"))["bert.embeddings.word_embeddings.weight"]
    assert torch.equal(drawn[new_id], stage_rows[new_id]) and torch.equal(drawn[:new_id], warm_rows)
    assert not torch.allclose(drawn[new_id], warm_rows[pieces].mean(dim=0))


def test_one_noisy_evaluation_does_not_stop_the_warmup_two_in_a_row_do():
    from domainbert.pretrain.warmup_training import Convergence

    watch = Convergence(min_improvement=0.02, warmup_steps=20)
    for step, ppl in [(20, 2400.0), (40, 1450.0), (60, 1130.0), (80, 1080.0), (100, 890.0), (120, 900.0)]:
        watch.add(step, ppl)
        assert not watch.converged, step  # 120 missed the best (890) by 2%: one miss only
    watch.add(140, 880.0)  # 1.1% under the best (890): the second miss in a row
    assert watch.converged and watch.best == 880.0 and watch.last == 880.0


def _encoder_shift(base: Path, folder: Path) -> float:
    """Root-mean-square change of the encoder's weights (the layers, not the embeddings) over the warm-up."""
    before, after = load_file(str(base / "model.safetensors")), load_file(str(folder / "model.safetensors"))
    keys = [k for k in before if k.startswith("encoder.") and k.endswith("weight")]
    sq = sum(float(((after["bert." + k] - before[k]) ** 2).sum()) for k in keys)
    return (sq / sum(before[k].numel() for k in keys)) ** 0.5


PLAIN = "pretrain.base_warmup.encoder_lr_scale=1"  # the whole model at one rate


@pytest.mark.parametrize(
    "gentle", [("pretrain.base_warmup.encoder_lr_scale=0.1",), (PLAIN, "pretrain.base_warmup.l2sp=10"), ()]
)
def test_a_gentle_warmup_moves_the_encoder_less_and_still_trains_the_head(
    headless_base, tmp_path, texts, gentle, monkeypatch
):
    from domainbert.core.paths import RunLayout
    from support.pretrain import write_corpus

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # each recipe trained, not served from a cache
    shifts, summaries = {}, {}
    for name, extra in (("plain", (PLAIN,)), ("gentle", gentle)):  # () : the default, gentle itself
        layout = RunLayout(tmp_path / name)
        write_corpus(layout.corpus, texts)
        folder = ensure_base_warmup(_cfg(headless_base, "pretrain.base_warmup.eval_every=1000", *extra), layout)
        shifts[name] = _encoder_shift(headless_base, folder)
        summaries[name] = json.loads((folder.parent / "summary.json").read_text())
    assert 0 < shifts["gentle"] < 0.5 * shifts["plain"]
    gentle_ppl = summaries["gentle"]["general_perplexity"]
    assert gentle_ppl < summaries["gentle"]["general_perplexity_random_head"]  # the head still learned


def test_a_set_too_small_to_measure_says_so_instead_of_nan():
    from domainbert.pretrain.evaluation import perplexity_change

    assert perplexity_change(None, None) == "too few tokens to measure"
    assert perplexity_change(float("nan"), 3.0) == "too few tokens to measure"
    assert perplexity_change(12.34, 9.81) == "12.3 -> 9.8"


@pytest.mark.parametrize("precision", ["bf16", "fp32"])
def test_the_warmup_trains_with_the_arms_attention_and_dropout(headless_base, layout, precision):
    """The warm-up trained with PyTorch's SDPA and dropout where the arms (and `plan`'s probe of a warm-up step)
    use eager attention with cheaper dropout masks under bf16: its steps were a quarter slower than planned."""
    from domainbert.pretrain import cpu_dropout

    cfg = _cfg(headless_base, f"pretrain.base_warmup.precision={precision}", "pretrain.base_warmup.steps=2")
    folder = ensure_base_warmup(cfg, layout)
    summary = json.loads((folder.parent / "summary.json").read_text())
    assert summary["precision"] == precision
    assert summary["attention"] == (cpu_dropout.ATTENTION if precision == "bf16" else "sdpa")
    config = json.loads((folder / "config.json").read_text())
    assert cpu_dropout.ATTENTION not in json.dumps(config)  # a training detail, not part of the saved model


def test_the_arms_masking_does_not_change_the_warmup(headless_base, tmp_path, texts, monkeypatch):
    """Tweets' arms mask whole words; the warm-up masked as the domain's arms did, so that domain trained a
    warm-up of its own. It masks as BERT did for every domain: the same weights either way."""
    from domainbert.core.paths import RunLayout
    from support.pretrain import write_corpus

    weights = []
    for k, arms in enumerate([(), ("pretrain.whole_word_mask=true", "pretrain.mask_rate=0.3")]):
        monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / f"cache-{k}"))  # trained, not served from a cache
        layout = RunLayout(tmp_path / f"run-{k}")
        write_corpus(layout.corpus, texts)
        folder = ensure_base_warmup(_cfg(headless_base, "pretrain.base_warmup.steps=3", *arms), layout)
        weights.append(load_file(str(folder / "model.safetensors")))
    assert all(torch.equal(t, weights[1][k]) for k, t in weights[0].items())
