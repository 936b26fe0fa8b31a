"""``language_id_v1`` and ``language_id_v2``: keep documents in the domain's language(s), using langid.py's
shipped model (offline).

langid.py's ``classify`` walks its byte DFA in Python and multiplies a dense 7,480-feature vector by the whole
model matrix for every document. This component runs the same model (langid's byte DFA, its naive Bayes
tables, its normalised probabilities) on a whole batch at once: the DFA advances every document by one byte
per numpy step, the visited states become a sparse document x state count matrix, and two sparse products give
the class scores. Same predictions as langid's ``classify``, far less Python. It looks only at the first
``max_chars`` characters of a document.

The model is langid.py's and not py3langid's: py3langid 0.4.0 ships a retrained model (other languages, a
``zxx`` class, log-scaled counts, temperature-scaled probabilities), so it would change which documents both
components keep, and v2's margins are calibrated on langid's scores (bench/results/langid_short_cpu_2026-11.md);
it also classifies one text at a time only. langid hands its tables out only as the identifier's constructor
arguments, so they are read back from one (``_tables_from_langid``) and checked against its ``classify``
before they are used or cached.

``language_id_v1`` keeps a document when its top language is kept and its normalised probability reaches
``min_confidence``. On a few words that rule throws away real text: a naive Bayes score over a handful of
byte n-grams often puts a short English phrase under Dutch or Italian by a small margin, and the normalised
probability of a short text is rarely confident. ``language_id_v2`` adds a length-aware decision on top of
the same scores: another language may lead the best kept language by up to ``short_margin`` (log score) on a
text with no evidence, an allowance that shrinks linearly to 0 at ``full_evidence_features`` model features;
from there on it is v1's rule. A short text is dropped only when another language leads clearly (a German
sentence of five words still does). A text with no model feature at all is kept: langid's features miss
many short English phrases entirely, and such a text (an emoji, a number) is for the length and symbol
filters to judge. v2 also blanks emoji and pictographic symbols before scoring: they carry no language,
and their 4-byte UTF-8 sequences look like Chinese or Japanese to a byte n-gram model. Neither component
looks at URLs or markup separately.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field
from scipy.sparse import coo_matrix, csr_matrix

from domainbert.config.schema import StrictModel
from domainbert.core.paths import machine_cache
from domainbert.corpus.components import Component, register


class LanguageOptions(StrictModel):
    languages: list[str] = Field(min_length=1, description="ISO 639-1 codes to keep, e.g. [en].")
    min_confidence: float = Field(0.5, ge=0, le=1, description="Normalised probability of the top language.")
    max_chars: int = Field(600, ge=50, description="Classify only this many leading characters.")


# Texts the tables must classify as langid's own ``classify`` does (several scripts, multi-byte UTF-8, no text).
_PROBES = (
    "The court held that the licence was void.",
    "Der Vertrag ist nichtig und ungültig.",
    "Ça coûte 5 € – très cher!",
    "東京は日本の首都です。",
    "Москва — столица России.",
    "",
)


def _cache_path(model: bytes) -> Path:
    """The tables' cache file, named after the model itself: another langid model never reads stale tables."""
    digest = hashlib.blake2b(model, digest_size=8).hexdigest()
    return machine_cache() / f"langid-{digest}-tables.npz"


def _load_tables() -> dict[str, np.ndarray]:
    """langid's model tables; decoding its bz2+pickle model string is slow, so the arrays are cached as .npz."""
    from langid.langid import model

    path = _cache_path(model)
    if path.is_file():
        try:
            with np.load(path) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError):
            pass
    tables = _tables_from_langid(model)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **tables)  # type: ignore[arg-type]  # numpy's stub matches **kwargs against allow_pickle
        os.replace(tmp, path)
    except OSError:  # a read-only home only costs the slow load next time
        pass
    return tables


def _tables_from_langid(model: bytes) -> dict[str, np.ndarray]:
    """The DFA and naive Bayes tables of langid's model, as arrays, checked against langid's ``classify``.

    ``LanguageIdentifier`` keeps its constructor's arguments (``nb_ptc``, ``nb_pc``, ``nb_classes``,
    ``tk_nextmove``, ``tk_output``) under their parameter names and has no other way to hand them out; if a
    langid release stores them differently, the check fails here, naming the text, instead of the filter
    quietly deciding otherwise.
    """
    from langid.langid import LanguageIdentifier

    ident = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    states = sorted(ident.tk_output)
    lists = [list(ident.tk_output[st]) for st in states]
    tables = {
        "nextmove": np.asarray(ident.tk_nextmove, dtype=np.int64),
        "out_states": np.array(states, dtype=np.int64),
        "out_offsets": np.cumsum([0] + [len(x) for x in lists]).astype(np.int64),
        "out_indices": np.array([i for x in lists for i in x], dtype=np.int64),
        "ptc": np.asarray(ident.nb_ptc, dtype=np.float64),
        "pc": np.asarray(ident.nb_pc, dtype=np.float64),
        "classes": np.array([str(c) for c in ident.nb_classes]),
    }
    for text, (lang, prob) in zip(_PROBES, _Model(tables).classify_batch(list(_PROBES)), strict=True):
        ref_lang, ref_prob = ident.classify(text)
        if lang != ref_lang or abs(prob - ref_prob) > 1e-9:
            raise RuntimeError(
                f"langid's model tables do not reproduce langid's classify on {text!r} ({lang}, "
                f"{prob:.6f} against {ref_lang}, {ref_prob:.6f}): this langid release stores its "
                "model differently; language ID cannot run on it"
            )
    return tables


class _Model:
    """langid.py's model tables, loaded once per process, as arrays for batch classification."""

    _instance: ClassVar[_Model | None] = None
    CHUNK = 2048  # documents per DFA pass: bounds the [documents x bytes] state matrix

    def __init__(self, tables: dict[str, np.ndarray]) -> None:
        self.nextmove = tables["nextmove"].astype(np.int32)
        n_states = len(self.nextmove) // 256
        states, offsets, indices = tables["out_states"], tables["out_offsets"], tables["out_indices"]
        # state -> features it emits, as a sparse matrix (a repeated feature counts twice, as in langid)
        rows = np.repeat(states, np.diff(offsets))
        self.emits = coo_matrix((np.ones(len(indices)), (rows, indices)), shape=(n_states, len(tables["ptc"]))).tocsr()
        self.emitting = np.diff(self.emits.indptr) > 0
        self.ptc = tables["ptc"]
        self.pc = tables["pc"]
        self.classes = [str(c) for c in tables["classes"]]

    @classmethod
    def get(cls) -> _Model:
        if cls._instance is None:
            cls._instance = cls(_load_tables())
        return cls._instance

    def classify_batch(self, texts: list[str]) -> list[tuple[str, float]]:
        """(language, normalised probability) of each text, as ``LanguageIdentifier(norm_probs=True).classify``."""
        logp, _ = self.scores_batch(texts)
        probs = np.exp(logp - logp.max(axis=1, keepdims=True))
        probs /= probs.sum(axis=1, keepdims=True)
        best = probs.argmax(axis=1)
        return [(self.classes[b], float(probs[i, b])) for i, b in enumerate(best)]

    def scores_batch(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Per text, langid's log joint score of every class ([texts x classes], order of ``classes``) and
        the number of model features the text hit (its evidence)."""
        logps, feats = [np.zeros((0, len(self.classes)))], [np.zeros(0, dtype=np.int64)]
        for start in range(0, len(texts), self.CHUNK):
            logp, n_feat = self._scores_chunk([t.encode("utf-8") for t in texts[start : start + self.CHUNK]])
            logps.append(logp)
            feats.append(n_feat)
        return np.concatenate(logps), np.concatenate(feats)

    def _scores_chunk(self, encoded: list[bytes]) -> tuple[np.ndarray, np.ndarray]:
        n = len(encoded)
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=n)
        total = int(lengths.sum())
        rows = np.repeat(np.arange(n), lengths)
        cols = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        padded = np.zeros((n, int(lengths.max(initial=0))), dtype=np.uint8)
        padded[rows, cols] = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        # time-major [bytes x documents]: each DFA step reads and writes one contiguous row
        data = np.ascontiguousarray(padded.T)
        visited = np.empty(data.shape, dtype=np.int32)
        state = np.zeros(n, dtype=np.int32)
        for t in range(data.shape[0]):  # one DFA step for every document (padding bytes are never counted)
            state = self.nextmove[(state << 8) + data[t]]
            visited[t] = state
        # back to document-major, keeping each document's real bytes: document by document, in byte order
        states = np.ascontiguousarray(visited.T)[np.arange(data.shape[0]) < lengths[:, None]]
        useful = self.emitting[states]  # most visited states emit no feature: drop them before the sparse sums
        # rows are already grouped by document: build the CSR matrix directly (repeated states are summed by
        # the product), no COO sort
        indptr = np.concatenate([[0], np.cumsum(np.bincount(rows[useful], minlength=n))])
        counts = csr_matrix((np.ones(int(indptr[-1])), states[useful], indptr), shape=(n, self.emits.shape[0]))
        features = counts @ self.emits
        logp = np.asarray(features @ self.ptc) + self.pc
        return logp, np.asarray(features.sum(axis=1)).ravel().astype(np.int64)


class LanguageId(Component[LanguageOptions]):
    """Drop documents whose top language is not in ``languages`` or is below ``min_confidence``."""

    name: ClassVar[str] = "language_id_v1"
    kind = "filter"
    Options = LanguageOptions

    def __init__(self, options: LanguageOptions) -> None:
        super().__init__(options)
        self._model = _Model.get()
        self._keep = set(options.languages)

    def filter(self, text: str) -> tuple[bool, str]:
        return self.filter_batch([text])[0]

    def filter_batch(self, texts: list[str]) -> list[tuple[bool, str]]:
        return [
            self._verdict(lang, conf)
            for lang, conf in self._model.classify_batch([t[: self.options.max_chars] for t in texts])
        ]

    def _verdict(self, lang: str, conf: float) -> tuple[bool, str]:
        if lang not in self._keep:
            return False, f"language_{lang}"
        if conf < self.options.min_confidence:
            return False, "low_confidence"
        return True, ""


# Emoji, pictographs, dingbats, arrows and the joiners/selectors/keycaps that build emoji sequences.
_SYMBOLS = re.compile(
    "[\U0001f000-\U0001ffff\u2190-\u21ff\u2300-\u23ff\u2600-\u27bf\u2b00-\u2bff\ufe00-\ufe0f\u200d\u20e3]+"
)


class LanguageOptionsV2(LanguageOptions):
    short_margin: float = Field(
        8.0,
        ge=0,
        description="Log-score lead another language may have over the best "
        "kept language on a text with no evidence, and the text is still kept.",
    )
    full_evidence_features: int = Field(
        40, ge=1, description="Model features (byte n-grams) at which that allowance reaches 0 and v1's rule applies."
    )


class LanguageIdV2(LanguageId):
    """``language_id_v1`` with a length-aware decision for short texts (see the module docstring)."""

    name: ClassVar[str] = "language_id_v2"
    Options = LanguageOptionsV2
    options: LanguageOptionsV2

    def __init__(self, options: LanguageOptionsV2) -> None:
        super().__init__(options)
        self._keep_idx = np.array([i for i, c in enumerate(self._model.classes) if c in self._keep], dtype=np.int64)

    def filter_batch(self, texts: list[str]) -> list[tuple[bool, str]]:
        o = self.options
        if not texts:
            return []
        heads = [t[: o.max_chars] for t in texts]
        logp, features = self._model.scores_batch([h if h.isascii() else _SYMBOLS.sub(" ", h) for h in heads])
        best = logp.max(axis=1)
        top = logp.argmax(axis=1)
        lead = best - (logp[:, self._keep_idx].max(axis=1) if len(self._keep_idx) else -np.inf)
        allowance = o.short_margin * np.maximum(0.0, 1.0 - features / o.full_evidence_features)
        conf = 1.0 / np.exp(logp - best[:, None]).sum(axis=1)  # normalised probability of the top language
        classes, out = self._model.classes, []
        # plain lists: indexing numpy arrays element by element costs more than the decisions themselves
        for t, ld, allow, c in zip(top.tolist(), lead.tolist(), allowance.tolist(), conf.tolist(), strict=True):
            if allow > 0:  # short: kept unless another language leads by more than the allowance
                out.append((True, "") if ld <= allow else (False, f"language_{classes[t]}"))
            else:
                out.append(self._verdict(classes[t], c))
        return out


register(LanguageId)
register(LanguageIdV2)
