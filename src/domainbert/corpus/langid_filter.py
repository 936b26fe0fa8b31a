"""``language_id_v1``: keep documents in the domain's language(s), using langid.py's shipped model (offline).

langid.py's ``classify`` builds a dense 7,480-feature vector and multiplies it by the whole model matrix for
every document (about 2 ms each on this machine). This component runs the same model (langid's byte DFA,
its naive Bayes tables, its normalised probabilities) but only over the features that occur, which gives
the same prediction several times faster, and it looks only at the first ``max_chars`` characters.
"""

from __future__ import annotations

import os
from collections import Counter, defaultdict
from pathlib import Path
from typing import ClassVar

import numpy as np
from pydantic import Field

from domainbert.corpus import filters
from domainbert.schema import StrictModel


class LanguageOptions(StrictModel):
    languages: list[str] = Field(min_length=1, description="ISO 639-1 codes to keep, e.g. [en].")
    min_confidence: float = Field(0.5, ge=0, le=1, description="Normalised probability of the top language.")
    max_chars: int = Field(600, ge=50, description="Classify only this many leading characters.")


def _cache_path() -> Path:
    import langid

    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "domainbert"
    return root / f"langid-{getattr(langid, '__version__', 'model')}-tables.npz"


def _load_tables() -> dict[str, np.ndarray]:
    """langid's model tables; decoding its bz2+pickle model string is slow, so the arrays are cached as .npz."""
    path = _cache_path()
    if path.is_file():
        try:
            with np.load(path) as data:
                return {k: data[k] for k in data.files}
        except (OSError, ValueError):
            pass
    from langid.langid import LanguageIdentifier, model

    ident = LanguageIdentifier.from_modelstring(model, norm_probs=True)
    states = sorted(ident.tk_output)
    lists = [list(ident.tk_output[st]) for st in states]
    tables = {"nextmove": np.asarray(ident.tk_nextmove, dtype=np.int64), "out_states": np.array(states, dtype=np.int64),
              "out_offsets": np.cumsum([0] + [len(x) for x in lists]).astype(np.int64),
              "out_indices": np.array([i for x in lists for i in x], dtype=np.int64),
              "ptc": np.asarray(ident.nb_ptc, dtype=np.float64), "pc": np.asarray(ident.nb_pc, dtype=np.float64),
              "classes": np.array([str(c) for c in ident.nb_classes])}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as f:
            np.savez(f, **tables)
        os.replace(tmp, path)
    except OSError:  # a read-only home only costs the slow load next time
        pass
    return tables


class _Model:
    """langid.py's model tables, loaded once per process."""

    _instance: ClassVar[_Model | None] = None

    def __init__(self) -> None:
        tables = _load_tables()
        self.nextmove = tables["nextmove"].tolist()
        states, offsets, indices = tables["out_states"], tables["out_offsets"], tables["out_indices"]
        self.output = {int(st): indices[offsets[i]: offsets[i + 1]].tolist() for i, st in enumerate(states)}
        self.ptc = tables["ptc"]
        self.pc = tables["pc"]
        self.classes = [str(c) for c in tables["classes"]]

    @classmethod
    def get(cls) -> _Model:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def classify(self, text: str) -> tuple[str, float]:
        """(language, normalised probability), as ``LanguageIdentifier(norm_probs=True).classify``."""
        nextmove = self.nextmove
        state = 0
        visited: list[int] = []
        append = visited.append
        for byte in text.encode("utf-8"):
            state = nextmove[(state << 8) + byte]
            append(state)
        counts = Counter(visited)  # counting in C is cheaper than a dict update per byte
        feats: dict[int, int] = defaultdict(int)
        for st, n in counts.items():
            for index in self.output.get(st, ()):
                feats[index] += n
        if feats:
            idx = np.fromiter(feats.keys(), dtype=np.int64, count=len(feats))
            val = np.fromiter(feats.values(), dtype=np.float64, count=len(feats))
            logp = val @ self.ptc[idx] + self.pc
        else:
            logp = self.pc.copy()
        probs = np.exp(logp - logp.max())
        probs /= probs.sum()
        best = int(np.argmax(probs))
        return self.classes[best], float(probs[best])


class LanguageId(filters.Component):
    """Drop documents whose top language is not in ``languages`` or is below ``min_confidence``."""

    name: ClassVar[str] = "language_id_v1"
    kind = "filter"
    Options = LanguageOptions

    def __init__(self, options: LanguageOptions) -> None:
        super().__init__(options)
        self._model = _Model.get()
        self._keep = set(options.languages)

    def filter(self, text: str) -> tuple[bool, str]:
        lang, conf = self._model.classify(text[: self.options.max_chars])
        if lang not in self._keep:
            return False, f"language_{lang}"
        if conf < self.options.min_confidence:
            return False, "low_confidence"
        return True, ""


filters.register(LanguageId)
