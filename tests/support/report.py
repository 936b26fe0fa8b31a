"""Builders of tiny run folders for the report tests: the stages' artifact files written by hand with the contract's
fields (the stage modules' docstrings; docs/pipeline.md), so the report is tested without training
anything.

NER predictions are built so the scores are known: every test sentence has one TERM entity; a model that
"misses" k sentences predicts only O there (no false positives), so recall = (n - k) / n, precision = 1.
Stored test F1 values are computed with seqeval, as the fine-tuning stage does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from seqeval.metrics import f1_score
from sklearn.metrics import f1_score as f1_score_labels

from domainbert.report.rows import Comparison, Design, FamilyWise, ScoreRow, unadjusted_verdict

# A valid 1x1 PNG standing in for a plot the vocab stage drew (the report copies it, never reads it).
PNG_1X1 = bytes.fromhex("89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
                        "0000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
N_SENTENCES = 40
GOLD_NER = [["the", "compiler", "runs", "fast"] for _ in range(N_SENTENCES)]
GOLD_TAGS = [["O", "B-TERM", "O", "O"] for _ in range(N_SENTENCES)]


def ner_pred(misses: int) -> list[list[str]]:
    return [["O"] * 4 if i < misses else list(tags) for i, tags in enumerate(GOLD_TAGS)]


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=1))


# What every result.json holds besides the scores (artifact_types.FinetuneResult).
_RUN_FIELDS = {"model_ref": "fixture", "num_examples": {"train": 100, "validation": 20, "test": 60},
               "collapse": {"collapsed": False, "reasons": []}, "collapsed": False, "wall_seconds": 2.0}


def write_ner_result(root: Path, model: str, task: str, seed: int, misses: int,
                     f1: float | None = None) -> float:
    """Write one NER result.json; returns the stored test F1 (seqeval's unless ``f1`` is given)."""
    pred = ner_pred(misses)
    score = f1 if f1 is not None else float(f1_score(GOLD_TAGS, pred, mode="strict", scheme=None))
    write_json(root / "finetune" / model / task / f"seed-{seed}" / "result.json", {
        "model": model, "mode": "finetune", "task": task, "task_type": "ner", "seed": seed,
        "primary_metric": "f1", "test": {"f1": score, "precision": 1.0, "recall": score, "macro_f1": score},
        "validation": {"f1": score}, "gold": GOLD_TAGS, "pred": pred, "train_seconds": 1.5,
        "examples_per_s": 100.0, **_RUN_FIELDS})
    return score


def write_cls_result(root: Path, model: str, task: str, seed: int, wrong: int, n: int = 60) -> float:
    """Write one classification result.json (the first ``wrong`` examples mislabelled); returns its macro-F1."""
    labels = ["a", "b", "c"]
    gold = [labels[i % 3] for i in range(n)]
    pred = [labels[(i + 1) % 3] if i < wrong else g for i, g in enumerate(gold)]
    acc = (n - wrong) / n
    macro = float(f1_score_labels(gold, pred, average="macro"))
    write_json(root / "finetune" / model / task / f"seed-{seed}" / "result.json", {
        "model": model, "mode": "finetune", "task": task, "task_type": "classification", "seed": seed,
        "primary_metric": "macro_f1", "test": {"macro_f1": macro, "accuracy": acc}, "validation": {"macro_f1": macro},
        "gold": gold, "pred": pred, "train_seconds": 1.0, "examples_per_s": 50.0, **_RUN_FIELDS})
    return macro


def write_corpus(root: Path) -> None:
    """A manifest.json with the fields ``domainbert.corpus.build`` writes (the ones the report reads)."""
    write_json(root / "corpus" / "manifest.json", {
        "domain": "law", "profile": "offline", "documents_in": 950, "documents_out": 1272,
        "documents": {"train": 1234, "validation": 38, "total": 1272},
        "words": {"train": 56789, "validation": 1700, "total": 58489},
        "bytes": {"train": 345678, "validation": 10400, "total": 356078},
        "estimated_tokens": {"train": 71234, "validation": 2100}, "shards": {"train": 1, "validation": 1},
        "malformed_lines": {"total": 0, "by_source": {}},
        "splits": {"train": {"documents": 1234, "words": 56789, "bytes": 345678, "estimated_tokens": 71234},
                   "validation": {"documents": 38, "words": 1700, "bytes": 10400, "estimated_tokens": 2100}},
        "sources": {"scancode-licenses": {"documents_in": 950, "documents": 900, "words": 40000, "bytes": 250000,
                                          "estimated_tokens": 50000}},
        "filters": {"min_length_v1": {"dropped": 17, "reasons": {"too_short": 17}},
                    "language_id_v1": {"dropped": 3, "reasons": {"lang=fr": 2, "low_confidence": 1}}},
        "dedup": {"exact_removed": 11, "near_removed": 7, "near_clusters": 5, "threshold": 0.8},
        "decontamination": {"enabled": True, "ngram": 13, "rule": "drop a document when >= 50% of its 13-grams hit",
                            "index": {"law-license-category/test": {"texts": 120, "short_texts": 3},
                                      "law-license-category/validation": {"texts": 80, "short_texts": 1}},
                            "documents_removed": 29, "sentences_removed": 41,
                            "by_task_split": {"law-license-category/test": {"documents": 20, "sentences": 30},
                                              "law-license-category/validation": {"documents": 9,
                                                                                  "sentences": 11}}},
        "content_hash": "abc"})
    (root / "corpus" / "length_histogram.png").write_bytes(PNG_1X1)


def _overlap(domain_in: float, control_in: float) -> dict[str, Any]:
    return {"domain": {"domain_in_reference": domain_in, "reference_in_domain": 0.5, "shared": 15000,
                       "domain_tokens": 30000},
            "control": {"domain_in_reference": control_in}, "domain_matched": {"domain_in_reference": domain_in}}


def write_vocab(root: Path) -> None:
    """A vocab report.json with the fields ``domainbert.vocab.stage`` writes (the ones the report reads)."""
    write_json(root / "vocab" / "report.json", {
        "domain": "science", "profile": "offline", "tokenizer": {"kind": "wordpiece", "vocab_size": 30522},
        "recommendation": {"decision": "extend", "extend_tokens": 412, "summary": "add the 412 most costly words",
                           "reasons": ["overlap shift (control - domain) = +7.5%", "base fertility 1.520"]},
        "overlap": {"bert-base-uncased": _overlap(0.613, 0.688), "base": _overlap(0.611, 0.690)},
        "published": [{"name": "SciBERT SciVocab", "reference": "bert-base-uncased", "published_overlap": 0.42,
                       "published_vocab_size": 31090, "published_corpus_words": 3.17e9,
                       "source": "Beltagy et al. 2019", "ours": 0.613, "control": 0.688, "vocab_size": 30522,
                       "corpus_words": 56789, "sentence": "SciBERT SciVocab reported that 42.0% of its vocabulary"}],
        "heldout": {"base": {"fertility": 1.52, "split_3plus": 0.08, "unk_rate": 0.0004,
                             "mean_tokens_per_document": 210.0, "length_vs_base": 1.0},
                    "domain": {"fertility": 1.21, "split_3plus": 0.02, "unk_rate": 0.0,
                               "mean_tokens_per_document": 170.0, "length_vs_base": 0.81}},
        "fragmented_words": {"base": [{"word": "microcode", "count": 57, "pieces": ["micro", "##co", "##de"]}]},
        "extension": {"enabled": True, "candidates": 900, "method": "mean-of-pieces", "num_tokens": 412,
                      "vocab_size": 30934, "top": [{"token": "microcode"}]}})
    (root / "vocab" / "overlap_curve.png").write_bytes(PNG_1X1)


def write_pretrain(root: Path, arm: str, before: float, after: float) -> None:
    folder = root / "pretrain" / arm
    write_json(folder / "summary.json", {
        "arm": arm, "source": "fixture", "planned_steps": 20, "budget_tokens": 40960, "lr": 1e-4, "warmup_ratio": 0.06,
        "vocab_size": 30522, "steps": 20, "tokens_consumed": 40960, "real_tokens_per_s": 812.5, "real_token_fraction": 0.97,
        "final_loss": 4.321, "domain_perplexity": after, "domain_perplexity_before": before,
        "general_perplexity": 55.5, "general_perplexity_before": 40.25, "flops_per_token": 1.2e7, "mfu": None,
        "wall_seconds": 50.4, "loss_curve": [[i, 8.0 - 0.2 * i] for i in range(1, 21)], "engine": "torch",
        "world_size": 1, "precision": "fp32",
        "parameters": {"embedding": 234_567, "non_embedding": 1_000_000, "total": 1_234_567}})
    lines = [{"kind": "eval", "step": 0, "domain_perplexity": before, "general_perplexity": 40.25},
             {"kind": "train", "step": 10, "loss": 6.0}, {"kind": "train", "step": 20, "loss": 4.321},
             {"kind": "eval", "step": 20, "domain_perplexity": after, "general_perplexity": 55.5}]
    (folder / "metrics.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n")


NER_TASK = "science-terms-ner"
# misses per seed: base and scratch miss about half the entities, continued only a few.
BASE_MISSES = {1: 20, 2: 21, 3: 22}
CONTINUED_MISSES = {1: 2, 2: 3, 3: 4}


def comparison(p: float | None, low: float, high: float, diff: float | None = None, *, n_seeds: int = 3,
               se: float | None = None, df: float | None = None, draws: Any = None, model: str = "continued",
               reference: str = "base", task: str = NER_TASK, collapsed: dict[str, int] | None = None,
               family: FamilyWise | None = None) -> Comparison:
    """A comparison row as ``results.build_tables`` makes one (before Holm's correction unless ``family``)."""
    return Comparison(task, "f1", model, reference, 0.95, collapsed or {}, {model: n_seeds, reference: n_seeds},
                      (low + high) / 2 if diff is None else diff, low, high, n_seeds, p, unadjusted_verdict(low, high),
                      design=Design(se=se, df=df), draws=draws, family=family)


INTERVAL = {"better": (0.01, 0.03), "worse": (-0.03, -0.01), "no significant difference": (-0.01, 0.01)}


def judged(task: str, model: str, reference: str, verdict: str) -> Comparison:
    """A comparison whose interval reads as ``verdict``."""
    return comparison(None, *INTERVAL[verdict], model=model, reference=reference, task=task)


def score(task: str, model: str, mean: float, metric: str = "f1", std: float = 0.01, n_seeds: int = 3) -> ScoreRow:
    """A score row of ``n_seeds`` runs with this mean and sd."""
    return ScoreRow(task, None, metric, model, tuple(range(1, n_seeds + 1)), n_seeds, 1, (mean,) * n_seeds, mean, std,
                    0, 0, None)
