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
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import cached_property, partial
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING

from tokenizers import Tokenizer

from domainbert import __version__
from domainbert.config.domain import DomainConfig
from domainbert.core.artifacts import atomic_output, content_hash, file_hash, fingerprint, is_complete, read_record
from domainbert.core.errors import DataError
from domainbert.core.paths import RunLayout
from domainbert.corpus import store
from domainbert.vocab import control as ctl
from domainbert.vocab.extend import DEFAULT_INIT, build_extended_model, extension_candidates
from domainbert.vocab.fertility import (
    count_words,
    heldout_stats,
    normalized_counts,
    pieces,
    token_counts,
    token_counts_from_words,
)
from domainbert.vocab.languages import by_language
from domainbert.vocab.overlap import Form, ReferenceForms, comparable, info_forms
from domainbert.vocab.recommend import recommend
from domainbert.vocab.reference_vocabs import TokenizerInfo, describe, load_base_tokenizer, load_reference
from domainbert.vocab.report import published_comparison, write_report
from domainbert.vocab.sizes import choose_extension, curve_points, fit_summary, lengths_vs_base
from domainbert.vocab.train import (
    TextStats,
    check_trained_size,
    finish,
    ordered_vocab,
    save_tokenizer,
    train_tokenizer,
    truncate_wordpiece,
)

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

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
    with atomic_output(layout.vocab, config=config, inputs=inputs, fp=fp, root=layout.root) as tmp:
        report = build_vocab(cfg, layout.corpus, tmp, inputs)
    return report


@dataclass
class Build:
    """What one build reads, and the domain vocabulary's size (the base model's unless configured)."""

    cfg: DomainConfig
    corpus: Path
    out: Path
    inputs: dict[str, str] | None
    refs: list[TokenizerInfo]
    base_hf: PreTrainedTokenizerBase
    base: TokenizerInfo
    size: int

    @property
    def wordpiece(self) -> bool:
        return self.cfg.tokenizer.kind == "wordpiece"

    @property
    def top(self) -> int:
        """The size trained first: WordPiece cuts every curve size from one training, other kinds train per size."""
        return max([self.size, *self.cfg.vocab.curve_sizes]) if self.wordpiece else self.size

    @property
    def targets(self) -> list[TokenizerInfo]:
        """What the domain vocabulary is compared with: the references, then the base model's."""
        return [*self.refs, self.base]

    @cached_property
    def forms(self) -> dict[str, ReferenceForms]:
        return {info.name: ReferenceForms(info) for info in self.targets}

    def train_texts(self) -> Iterator[str]:
        return store.iter_texts(self.corpus, "train")

    def train(self, texts: Callable[[], Iterable[str]], size: int, stats: TextStats | None = None) -> Tokenizer:
        t = self.cfg.tokenizer
        return train_tokenizer(texts, t.kind, size, t.lowercase, t.min_frequency, stats)

    def cut(self, tok: Tokenizer, size: int) -> Tokenizer:
        """``tok`` at ``size`` tokens: a WordPiece prefix; the other kinds were trained at that size."""
        return finish(truncate_wordpiece(tok, size), self.cfg.tokenizer.kind) if self.wordpiece else tok

    def describe(self, tok: Tokenizer, name: str, source: str = "") -> TokenizerInfo:
        return describe(tok, name, source=source, lowercase=self.cfg.tokenizer.lowercase)

    def vocab_at(self, side: Trained, size: int) -> list[str]:
        """``side``'s ``size`` tokens: a WordPiece prefix; SentencePiece kinds train afresh at other sizes."""
        if self.wordpiece:
            return ordered_vocab(side.big)[:size]
        return ordered_vocab(side.big if size == self.size else self.train(side.texts, size))


@dataclass
class Trained:
    """A vocabulary the stage trained and the text it was trained on."""

    info: TokenizerInfo  # at the stage's size
    big: Tokenizer  # as trained, at ``Build.top``: the curve's WordPiece sizes are its prefixes
    texts: Callable[[], Iterable[str]]
    stats: TextStats

    @cached_property
    def forms(self) -> dict[str, tuple[Form, ...]]:
        return info_forms(self.info)


@dataclass
class Vocabularies:
    """The domain and control vocabularies, and the domain's trained on as many words as the control."""

    domain: Trained
    control: Trained
    matched: TokenizerInfo  # ``domain.info`` itself unless the domain has more words than the control
    control_files: list[Path]
    control_documents: int  # available, before matching the domain's word count
    control_words: int
    matched_words: int


def build_vocab(cfg: DomainConfig, corpus: Path, out: Path, inputs: dict[str, str] | None = None) -> dict:
    """Compute every figure and write the stage's files into ``out`` (see ``run_vocab``)."""
    started = time.perf_counter()
    b = _open(cfg, corpus, out, inputs)
    v = _train_control(b, _train_domain(b))
    overlap, curve = _overlap(b, v)
    log.info("vocab: counting words and tokens of the train split")
    words = count_words(b.train_texts())
    fragmented, missing = _word_tables(b, v.domain, words)
    candidates = extension_candidates(words, b.base, cfg.vocab.extension.min_count)
    texts = _heldout_texts(b)
    heldout = {info.name: heldout_stats(info, texts) for info in [*b.targets, v.domain.info]}
    lengths_vs_base(heldout)
    rec = recommend(fit_summary(overlap["base"], heldout), candidates, v.domain.stats.words, cfg.vocab.recommend)
    extension = _extend(b, candidates, rec, heldout, texts)
    report = {
        **_header(b, v),
        "overlap": overlap,
        "curve": curve,
        "heldout": heldout,
        "fragmented_words": fragmented,
        "missing_tokens": missing,
        "extension": extension,
        "recommendation": rec,
        "languages": by_language(b.corpus, cfg.vocab.heldout_documents, [*b.targets, v.domain.info]),
        "seconds": time.perf_counter() - started,
    }
    report["published"] = [published_comparison(p, report) for p in cfg.vocab.published]
    write_report(report, out)
    log.info("vocab: %s (%.1fs)", rec["decision"], report["seconds"])
    return report


def _open(cfg: DomainConfig, corpus: Path, out: Path, inputs: dict[str, str] | None) -> Build:
    if store.count_documents(corpus, "train") == 0:
        raise DataError("the corpus train split is empty", file=corpus / "train")
    log.info("vocab: loading references and the base tokenizer")
    refs = [load_reference(r, field_name=f"vocab.references[{i}]") for i, r in enumerate(cfg.vocab.references)]
    base_hf, base = load_base_tokenizer(cfg.base_model.name_or_path, cfg.base_model.lowercase)
    base.name = "base"
    size = cfg.tokenizer.size_given(base.tokenizer.get_vocab_size())
    return Build(cfg, corpus, out, inputs, refs, base_hf, base, size)


def _train_domain(b: Build) -> Trained:
    """Train the domain vocabulary and save it in ``tokenizer/``; too little text for its size is an error."""
    log.info("vocab: training the %s domain tokenizer (%d tokens)", b.cfg.tokenizer.kind, b.size)
    stats, per_token = TextStats(), b.cfg.vocab.min_words_per_token
    big = b.train(b.train_texts, b.top, stats)
    if stats.words < per_token * b.size:
        raise DataError(
            f"the corpus is too small for a {b.size}-token vocabulary: {stats.words:,} train words "
            f"(at least {per_token:g} per token = {per_token * b.size:,.0f})",
            file=b.corpus,
            field="tokenizer.vocab_size",
        )
    check_trained_size(big, b.size, "domain tokenizer")
    tok, tok_dir = b.cut(big, b.size), b.out / "tokenizer"
    with atomic_output(tok_dir, config=config_of(b.cfg), inputs=b.inputs, root=b.out) as tmp:
        save_tokenizer(tok, b.cfg.tokenizer, tmp)
    return Trained(b.describe(tok, "domain", source=str(tok_dir)), big, b.train_texts, stats)


def _train_control(b: Build, domain: Trained) -> Vocabularies:
    """The control vocabulary, trained on as many words of general text as the domain's (or all there is)."""
    log.info("vocab: control vocabulary on an equal amount of general text")
    files = ctl.control_files(b.cfg.vocab.control_corpus)
    documents, words = ctl.count_words(ctl.iter_control_texts(files))
    matched_words = min(domain.stats.words, words)
    texts = partial(ctl.take_words, partial(ctl.iter_control_texts, files), words, matched_words)
    stats = TextStats()
    big = b.train(texts, b.top, stats)
    # the control is compared size for size: when the corpus stopped the domain vocabulary short, so is it
    achieved = domain.info.tokenizer.get_vocab_size()
    control = Trained(b.describe(b.cut(big, min(b.size, achieved)), "control"), big, texts, stats)
    matched = domain.info
    if domain.stats.words > words:  # more domain text than control text: compare size-matched vocabularies
        sample = partial(ctl.take_words, b.train_texts, domain.stats.words, words)
        matched = b.describe(b.cut(b.train(sample, b.size), b.size), "domain-matched")
    return Vocabularies(domain, control, matched, files, documents, words, matched_words)


def _overlap(b: Build, v: Vocabularies) -> tuple[dict, dict]:
    """Per target: the overlap of the domain, control and word-matched vocabularies, and the overlap curve."""
    curve, points = curve_points(
        list(b.cfg.vocab.curve_sizes), partial(b.vocab_at, v.domain), partial(b.vocab_at, v.control), b.wordpiece
    )
    style, special = v.domain.info.style, v.domain.info.special
    matched_forms = v.domain.forms if v.matched is v.domain.info else info_forms(v.matched)
    dom_curve_forms = [comparable(d, style, special) for d, _ in points]
    ctl_curve_forms = [comparable(c, style, special) for _, c in points]
    overlap: dict = {}
    for name, rf in b.forms.items():
        overlap[name] = {
            "domain": rf.compare(v.domain.forms),
            "control": rf.compare(v.control.forms),
            "domain_matched": rf.compare(matched_forms),
        }
        overlap[name]["overlap"] = overlap[name]["domain"]["domain_in_reference"]  # the headline (SciBERT's) figure
        curve["domain"][name] = [rf.compare(f, reverse=False)["domain_in_reference"] for f in dom_curve_forms]
        curve["control"][name] = [rf.compare(f, reverse=False)["domain_in_reference"] for f in ctl_curve_forms]
    return overlap, curve


def _word_tables(b: Build, domain: Trained, words: Counter) -> tuple[dict, dict]:
    """Per target: the frequent domain words it cuts into 3+ pieces, and the domain tokens it lacks."""
    tok, top = domain.info.tokenizer, b.cfg.vocab.top_words
    counts = token_counts_from_words(tok, words) if b.wordpiece else token_counts(tok, b.train_texts())
    fragmented, missing = {}, {}
    for info in b.targets:
        norm = normalized_counts(words, info.tokenizer)
        frequent = [w for w, _ in norm.most_common(5000)]
        rows = [
            {"word": w, "count": norm[w], "pieces": p}
            for w, p in zip(frequent, pieces(info, frequent), strict=True)
            if len(p) >= 3
        ]
        fragmented[info.name] = rows[:top]
        miss = sorted((-int(counts[tok.token_to_id(m)]), m) for m in b.forms[info.name].missing(domain.forms))
        missing[info.name] = [{"token": m, "count": -neg} for neg, m in miss[:top]]
    return fragmented, missing


def _heldout_texts(b: Build) -> list[str]:
    texts = list(islice(store.iter_texts(b.corpus, "validation"), b.cfg.vocab.heldout_documents))
    if not texts:
        raise DataError(
            "the corpus validation split is empty (needed for held-out figures)", file=b.corpus / "validation"
        )
    log.info("vocab: held-out figures on %d validation documents", len(texts))
    return texts


def _extend(b: Build, candidates: list[dict], rec: dict, heldout: dict, texts: list[str]) -> dict:
    """Build ``extended-model/`` when enabled (its held-out row joins ``heldout``); the report's ``extension``."""
    ext = b.cfg.vocab.extension
    chosen, extension = choose_extension(ext, candidates, rec)
    if not ext.enabled:
        return extension
    log.info("vocab: extending the base model by %d tokens (%s)", len(chosen), extension["source"])
    with atomic_output(b.out / "extended-model", config=config_of(b.cfg), inputs=b.inputs, root=b.out) as tmp:
        summary = build_extended_model(
            b.cfg.base_model.name_or_path,
            b.base_hf,
            b.base,
            chosen,
            tmp,
            decision={k: extension[k] for k in ("source", "recommended_tokens")},
            init=b.cfg.vocab.init,
        )
    from domainbert.core.models import load_tokenizer

    extended = describe(load_tokenizer(b.out / "extended-model").backend_tokenizer, "extended")
    heldout["extended"] = heldout_stats(extended, texts)
    lengths_vs_base(heldout)
    extension.update({k: summary[k] for k in ("method", "num_tokens", "vocab_size")})
    extension["top"] = summary["tokens"][: b.cfg.vocab.top_words]
    return extension


def _header(b: Build, v: Vocabularies) -> dict:
    """The report's description of what was trained, on what text, against which references."""
    stats, domain, cs = v.domain.stats, v.domain.info, v.control.stats
    return {
        "domain": b.cfg.name,
        "profile": b.cfg.profile,
        "tokenizer": {
            **b.cfg.tokenizer.model_dump(mode="json"),
            "vocab_size": b.size,
            "achieved_vocab_size": domain.tokenizer.get_vocab_size(),
            "style": domain.style,
        },
        "train": {
            "documents": stats.documents,
            "words": stats.words,
            "bytes": stats.bytes,
            "train_seconds": stats.seconds,
            "mb_per_s": stats.bytes / 1e6 / stats.seconds if stats.seconds else 0,
        },
        "control": {
            "files": [str(f) for f in v.control_files],
            "documents_available": v.control_documents,
            "words_available": v.control_words,
            "documents": cs.documents,
            "words": cs.words,
            "vocab_size": v.control.info.tokenizer.get_vocab_size(),
            "domain_matched_vocab_size": v.matched.tokenizer.get_vocab_size(),
            "domain_matched_words": v.matched_words if v.matched is not domain else stats.words,
        },
        "references": [
            {
                "name": i.name,
                "source": i.source,
                "style": i.style,
                "lowercase": i.lowercase,
                "vocab_size": i.tokenizer.get_vocab_size(),
            }
            for i in b.targets
        ],
        "base_model": b.cfg.base_model.name_or_path,
    }


def config_of(cfg: DomainConfig) -> dict:
    """What the vocabulary depends on (the base model's card-only ``hub_id`` left out; ``vocab.init`` left out
    at its default, so fingerprints from before the setting stay current)."""
    vocab = cfg.vocab.model_dump(mode="json")
    if vocab["init"] == DEFAULT_INIT:
        vocab.pop("init")
    return {
        "tokenizer": cfg.tokenizer.model_dump(mode="json"),
        "vocab": vocab,
        "base_model": cfg.base_model.recipe(),
    }
