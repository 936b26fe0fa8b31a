"""``language_id_v1``: keep documents in the domain's language(s), using langid.py's shipped model (offline).

langid.py's ``classify`` builds a dense 7,480-feature vector and multiplies it by the whole model matrix for
every document (about 2 ms each on this machine). This component runs the same model (langid's byte DFA,
its naive Bayes tables, its normalised probabilities) but only over the features that occur, which gives
the same prediction several times faster, and it looks only at the first ``max_chars`` characters.
"""

from __future__ import annotations

from collections import defaultdict
from typing import ClassVar

import numpy as np
from pydantic import Field

from domainbert.corpus import filters
from domainbert.schema import StrictModel


class LanguageOptions(StrictModel):
    languages: list[str] = Field(min_length=1, description="ISO 639-1 codes to keep, e.g. [en].")
    min_confidence: float = Field(0.5, ge=0, le=1, description="Normalised probability of the top language.")
    max_chars: int = Field(2000, ge=50, description="Classify only this many leading characters.")


class _Model:
    """langid.py's model tables, loaded once per process."""

    _instance: ClassVar[_Model | None] = None

    def __init__(self) -> None:
        from langid.langid import LanguageIdentifier, model

        ident = LanguageIdentifier.from_modelstring(model, norm_probs=True)
        self.nextmove = list(np.asarray(ident.tk_nextmove).tolist())
        self.output = {state: list(idx) for state, idx in ident.tk_output.items()}
        self.ptc = np.asarray(ident.nb_ptc, dtype=np.float64)
        self.pc = np.asarray(ident.nb_pc, dtype=np.float64)
        self.classes = [str(c) for c in ident.nb_classes]

    @classmethod
    def get(cls) -> _Model:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def classify(self, text: str) -> tuple[str, float]:
        """(language, normalised probability), as ``LanguageIdentifier(norm_probs=True).classify``."""
        nextmove = self.nextmove
        state = 0
        counts: dict[int, int] = defaultdict(int)
        for byte in text.encode("utf-8"):
            state = nextmove[(state << 8) + byte]
            counts[state] += 1
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
