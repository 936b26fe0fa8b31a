"""The vocabulary stage: train the domain tokenizer, measure how BERT's vocabulary fits, build the extension.

``run_vocab`` reads the built corpus (train split for training and counts, validation split for held-out
figures), writes ``layout.vocab`` atomically (tokenizer/, extended-model/, report.json/.md/.html, plots) and
skips when the folder is complete with the same fingerprint (configs, corpus and reference hashes, version).
The curve over ``vocab.curve_sizes`` reuses one WordPiece training (a smaller vocabulary is a prefix of a
larger one); SentencePiece kinds train once per size. Figures are computed in ``overlap``, ``fertility``,
``extend`` and ``recommend``; this module only wires them and does not render (see ``report``).
"""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from typing import Any

from domainbert import __version__
from domainbert.artifacts import atomic_output, content_hash, file_hash, fingerprint, is_complete, read_record
from domainbert.config import DomainConfig
from domainbert.corpus import store
from domainbert.errors import DataError
from domainbert.paths import RunLayout
from domainbert.vocab import control as ctl
from domainbert.vocab.config import ExtensionConfig
from domainbert.vocab.extend import build_extended_model, extension_candidates
from domainbert.vocab.fertility import (
    count_words,
    heldout_stats,
    normalized_counts,
    pieces,
    token_counts,
    token_counts_from_words,
)
from domainbert.vocab.overlap import ReferenceForms, comparable, info_forms
from domainbert.vocab.recommend import recommend
from domainbert.vocab.references import describe, load_base_tokenizer, load_reference
from domainbert.vocab.report import published_comparison, write_report
from domainbert.vocab.train import (
    TextStats,
    check_trained_size,
    finish,
    ordered_vocab,
    save_tokenizer,
    train_tokenizer,
    truncate_wordpiece,
)

log = logging.getLogger(__name__)


def _inputs(cfg: DomainConfig, corpus: Path) -> dict[str, str]:
    record = read_record(corpus)
    inputs = {"corpus": record["content_hash"] if record else content_hash(corpus)}
    for ref in cfg.vocab.references:
        if ref.path and Path(ref.path).is_file():
            inputs[f"reference:{ref.name}"] = file_hash(Path(ref.path))
    for path in ctl.control_files(cfg.vocab.control_corpus):
        inputs[f"control:{path.name}"] = file_hash(path)
    return inputs


def vocab_record(cfg: DomainConfig, layout: RunLayout) -> tuple[dict, dict[str, str], str]:
    """(config, inputs, fingerprint) the vocabulary folder is recorded with: what makes it current."""
    config = config_of(cfg)
    inputs = _inputs(cfg, layout.corpus)
    return config, inputs, fingerprint(config, inputs, __version__)


def run_vocab(cfg: DomainConfig, layout: RunLayout) -> dict:
    """Run the vocabulary stage for ``cfg`` and return the report dict (also saved as report.json).

    Args:
        cfg: the domain config (``tokenizer``, ``vocab`` and ``base_model`` sections are used).
        layout: the run folders; reads ``layout.corpus``, writes ``layout.vocab``.

    Raises:
        DataError: empty or too-small corpus, malformed reference, casing mismatch, missing control text.
    """
    store.shard_paths(layout.corpus, "train")  # a clear error before anything else when the corpus is missing
    config, inputs, fp = vocab_record(cfg, layout)
    if is_complete(layout.vocab, fp):
        log.info("vocab: skipped: up to date (%s)", layout.vocab)
        return json.loads((layout.vocab / "report.json").read_text())
    with atomic_output(layout.vocab, config=config, inputs=inputs, fp=fp) as tmp:
        report = build_vocab(cfg, layout.corpus, tmp, inputs)
    return report


def _train(texts_fn, cfg: DomainConfig, size: int, stats: TextStats | None = None):
    t = cfg.tokenizer
    return train_tokenizer(texts_fn, t.kind, size, t.lowercase, t.min_frequency, stats)


def _vocab_at(tok, size: int, cfg: DomainConfig, main_size: int, retrain) -> list[str]:
    """The vocabulary of ``size`` tokens: a WordPiece prefix, or a fresh training for SentencePiece kinds
    (``tok`` itself at the main size)."""
    if cfg.tokenizer.kind == "wordpiece":
        return ordered_vocab(tok)[:size]
    return ordered_vocab(tok if size == main_size else retrain(size))


def curve_points(requested: list[int], domain_at, control_at, prefix: bool) -> tuple[dict, list[tuple[list, list]]]:
    """The overlap curve's points: the requested sizes both vocabularies reach, then one point at what they
    reached when a larger size was requested (a small corpus stops WordPiece and SentencePiece short).

    Args:
        requested: ``vocab.curve_sizes``.
        domain_at, control_at: size -> the domain / control vocabulary of that size (tokens in id order),
            shorter than asked when the text supports fewer tokens.
        prefix: a smaller vocabulary is a prefix of a larger one (WordPiece), so the last point can put both
            vocabularies at the size both reached; otherwise each keeps the size it reached.

    Returns:
        ``({"requested_sizes", "sizes" (the domain vocabulary's achieved size per point), "control_sizes",
        "unreached" (requested sizes not reached), "reach" ({"domain", "control"}: tokens each reached when a
        size was not, else None), "domain": {}, "control": {}}, [(domain tokens, control tokens) per point])``.
    """
    curve: dict = {"requested_sizes": list(requested), "sizes": [], "control_sizes": [], "unreached": [],
                   "reach": {"domain": None, "control": None}, "domain": {}, "control": {}}
    points: list[tuple[list, list]] = []
    for s in sorted(set(requested)):
        if curve["unreached"]:  # larger sizes cannot be reached either
            curve["unreached"].append(s)
            continue
        dom, ctl = domain_at(s), control_at(s)
        if len(dom) < s or len(ctl) < s:
            curve["unreached"].append(s)
            curve["reach"] = {"domain": len(dom), "control": len(ctl)}
            if prefix:
                common = min(len(dom), len(ctl))
                dom, ctl = dom[:common], ctl[:common]
            if len(dom) in curve["sizes"] and len(ctl) in curve["control_sizes"]:
                continue  # already measured at exactly this size
        curve["sizes"].append(len(dom))
        curve["control_sizes"].append(len(ctl))
        points.append((dom, ctl))
    return curve, points


def build_vocab(cfg: DomainConfig, corpus: Path, out: Path, inputs: dict[str, str] | None = None) -> dict:
    """Compute every figure and write the stage's files into ``out`` (see ``run_vocab``)."""
    t, v = cfg.tokenizer, cfg.vocab
    started = time.perf_counter()
    if store.count_documents(corpus, "train") == 0:
        raise DataError("the corpus train split is empty", file=corpus / "train")
    train_texts = lambda: store.iter_texts(corpus, "train")  # noqa: E731
    log.info("vocab: loading references and the base tokenizer")
    refs = [load_reference(r, field_name=f"vocab.references[{i}]") for i, r in enumerate(v.references)]
    base_hf, base = load_base_tokenizer(cfg.base_model.name_or_path, cfg.base_model.lowercase)
    base.name = "base"
    size = t.vocab_size or base.tokenizer.get_vocab_size()  # the base model's size unless configured
    wordpiece = t.kind == "wordpiece"
    top = max([size] + list(v.curve_sizes)) if wordpiece else size

    log.info("vocab: training the %s domain tokenizer (%d tokens)", t.kind, size)
    stats = TextStats()
    big = _train(train_texts, cfg, top, stats)
    if stats.words < v.min_words_per_token * size:
        raise DataError(f"the corpus is too small for a {size}-token vocabulary: {stats.words:,} train words "
                        f"(at least {v.min_words_per_token:g} per token = {v.min_words_per_token * size:,.0f})",
                        file=corpus, field="tokenizer.vocab_size")
    check_trained_size(big, size, "domain tokenizer")
    domain_tok = finish(truncate_wordpiece(big, size), t.kind) if wordpiece else big
    tok_dir = out / "tokenizer"
    with atomic_output(tok_dir, config=config_of(cfg), inputs=inputs) as tmp_tok:
        save_tokenizer(domain_tok, t, tmp_tok)
    domain = describe(domain_tok, "domain", source=str(tok_dir), lowercase=t.lowercase)

    log.info("vocab: control vocabulary on an equal amount of general text")
    files = ctl.control_files(v.control_corpus)
    ctl_docs, ctl_words = ctl.count_words(ctl.iter_control_texts(files))
    matched_words = min(stats.words, ctl_words)
    ctl_texts = lambda: ctl.take_words(lambda: ctl.iter_control_texts(files), ctl_words, matched_words)  # noqa: E731
    ctl_stats = TextStats()
    control_big = _train(ctl_texts, cfg, top, ctl_stats)
    # the control is compared size for size: when the corpus stopped the domain vocabulary short, so is it
    achieved = domain_tok.get_vocab_size()
    control_tok = finish(truncate_wordpiece(control_big, min(size, achieved)), t.kind) if wordpiece else control_big
    control = describe(control_tok, "control", lowercase=t.lowercase)
    matched = domain
    if stats.words > ctl_words:  # more domain text than control text: compare size-matched vocabularies
        sample = lambda: ctl.take_words(train_texts, stats.words, ctl_words)  # noqa: E731
        m = _train(sample, cfg, size)
        matched = describe(finish(truncate_wordpiece(m, size), t.kind) if wordpiece else m,
                           "domain-matched", lowercase=t.lowercase)

    targets = [(r.name, r) for r in refs] + [("base", base)]
    forms = {name: ReferenceForms(info) for name, info in targets}

    retrain_dom = lambda s: _train(train_texts, cfg, s)  # noqa: E731
    retrain_ctl = lambda s: _train(ctl_texts, cfg, s)  # noqa: E731
    curve, points = curve_points(list(v.curve_sizes), lambda s: _vocab_at(big, s, cfg, size, retrain_dom),
                                 lambda s: _vocab_at(control_big, s, cfg, size, retrain_ctl), wordpiece)
    style, special = domain.style, domain.special
    dom_forms, ctl_forms = info_forms(domain), info_forms(control)
    matched_forms = dom_forms if matched is domain else info_forms(matched)
    dom_curve_forms = [comparable(d, style, special) for d, _ in points]
    ctl_curve_forms = [comparable(c, style, special) for _, c in points]
    overlap: dict = {}
    for name, rf in forms.items():
        overlap[name] = {"domain": rf.compare(dom_forms), "control": rf.compare(ctl_forms),
                         "domain_matched": rf.compare(matched_forms)}
        overlap[name]["overlap"] = overlap[name]["domain"]["domain_in_reference"]  # the headline (SciBERT's) figure
        curve["domain"][name] = [rf.compare(f, reverse=False)["domain_in_reference"] for f in dom_curve_forms]
        curve["control"][name] = [rf.compare(f, reverse=False)["domain_in_reference"] for f in ctl_curve_forms]

    log.info("vocab: counting words and tokens of the train split")
    words = count_words(train_texts())
    tok_counts = (token_counts_from_words(domain.tokenizer, words) if wordpiece
                  else token_counts(domain.tokenizer, train_texts()))
    fragmented, missing = {}, {}
    for name, info in targets:
        norm = normalized_counts(words, info.tokenizer)
        frequent = [w for w, _ in norm.most_common(5000)]
        rows = [{"word": w, "count": norm[w], "pieces": p} for w, p in zip(frequent, pieces(info, frequent),
                                                                         strict=True) if len(p) >= 3]
        fragmented[name] = rows[: v.top_words]
        miss = forms[name].missing(dom_forms)
        miss_rows: list[dict[str, Any]] = sorted(({"token": m, "count": int(tok_counts[domain.tokenizer.token_to_id(m)])} for m in miss),
                           key=lambda r: (-r["count"], r["token"]))
        missing[name] = miss_rows[: v.top_words]

    candidates = extension_candidates(words, base, v.extension.min_count)
    heldout_texts = [x for _, x in zip(range(v.heldout_documents), store.iter_texts(corpus, "validation"),
                                       strict=False)]
    if not heldout_texts:
        raise DataError("the corpus validation split is empty (needed for held-out figures)",
                        file=corpus / "validation")
    measured = [(r.name, r) for r in refs] + [("base", base), ("domain", domain)]
    log.info("vocab: held-out figures on %d validation documents", len(heldout_texts))
    heldout = {name: heldout_stats(info, heldout_texts) for name, info in measured}
    base_len = heldout["base"]["mean_tokens_per_document"]
    for row in heldout.values():
        row["length_vs_base"] = row["mean_tokens_per_document"] / base_len if base_len else 0.0
    base_ov = overlap["base"]
    figures = {"shift": base_ov["control"]["domain_in_reference"] - base_ov["domain_matched"]["domain_in_reference"],
               "saving": 1 - heldout["domain"]["length_vs_base"],
               "fertility": heldout["base"]["fertility"], "unk_rate": heldout["base"]["unk_rate"]}
    rec = recommend(figures, candidates, stats.words, v.recommend)

    chosen, extension = choose_extension(v.extension, candidates, rec)
    if v.extension.enabled:
        log.info("vocab: extending the base model by %d tokens (%s)", len(chosen), extension["source"])
        with atomic_output(out / "extended-model", config=config_of(cfg), inputs=inputs) as tmp_ext:
            summary = build_extended_model(cfg.base_model.name_or_path, base_hf, base, chosen, tmp_ext,
                                           decision={k: extension[k] for k in ("source", "recommended_tokens")})
        from domainbert.models import load_tokenizer

        extended = describe(load_tokenizer(out / "extended-model").backend_tokenizer, "extended")
        heldout["extended"] = row = heldout_stats(extended, heldout_texts)
        row["length_vs_base"] = row["mean_tokens_per_document"] / base_len if base_len else 0.0
        extension.update({k: summary[k] for k in ("method", "num_tokens", "vocab_size")})
        extension["top"] = summary["tokens"][: v.top_words]

    report = {
        "domain": cfg.name, "profile": cfg.profile,
        "tokenizer": {**t.model_dump(mode="json"), "vocab_size": size,
                      "achieved_vocab_size": domain.tokenizer.get_vocab_size(), "style": domain.style},
        "train": {"documents": stats.documents, "words": stats.words, "bytes": stats.bytes, "train_seconds":
                  stats.seconds, "mb_per_s": stats.bytes / 1e6 / stats.seconds if stats.seconds else 0},
        "control": {"files": [str(f) for f in files], "documents_available": ctl_docs, "words_available": ctl_words,
                    "documents": ctl_stats.documents, "words": ctl_stats.words,
                    "vocab_size": control.tokenizer.get_vocab_size(),
                    "domain_matched_vocab_size": matched.tokenizer.get_vocab_size(),
                    "domain_matched_words": matched_words if matched is not domain else stats.words},
        "references": [{"name": i.name, "source": i.source, "style": i.style, "lowercase": i.lowercase,
                        "vocab_size": i.tokenizer.get_vocab_size()} for _, i in targets],
        "base_model": cfg.base_model.name_or_path,
        "overlap": overlap, "curve": curve, "heldout": heldout,
        "fragmented_words": fragmented, "missing_tokens": missing,
        "extension": extension, "recommendation": rec,
        "seconds": time.perf_counter() - started,
    }
    report["published"] = [published_comparison(p, report) for p in v.published]
    write_report(report, out)
    log.info("vocab: %s (%.1fs)", rec["decision"], report["seconds"])
    return report


def choose_extension(ext: ExtensionConfig, candidates: list[dict], rec: dict) -> tuple[list[dict], dict]:
    """The words the extended model adds: the recommendation's (the candidates that qualify under its rule 3,
    best first) unless ``vocab.extension.num_tokens`` overrides it with the top ``num_tokens`` candidates.

    Returns the chosen candidates and the ``extension`` entry of the report (``num_tokens`` set to what is
    actually added; the builder adds ``method`` and ``vocab_size``).
    """
    recommended = rec["extend_words"]
    if ext.num_tokens is None:
        chosen, source = [c for c in candidates if c["word"] in set(recommended)], "recommendation"
    else:
        chosen, source = candidates[: ext.num_tokens], "override"
    info = {"enabled": ext.enabled, "candidates": len(candidates), "source": source,
            "recommended_tokens": len(recommended), "requested_tokens": ext.num_tokens,
            "num_tokens": len(chosen) if ext.enabled else 0}
    return (chosen if ext.enabled else []), info


def config_of(cfg: DomainConfig) -> dict:
    """What the vocabulary depends on (the base model's card-only ``hub_id`` left out)."""
    return {"tokenizer": cfg.tokenizer.model_dump(mode="json"), "vocab": cfg.vocab.model_dump(mode="json"),
            "base_model": cfg.base_model.recipe()}
