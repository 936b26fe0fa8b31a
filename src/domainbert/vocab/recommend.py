"""The recommendation: continue pretraining BERT as is, extend its vocabulary by N tokens, or train from scratch.

Figures used (all measured against the *base model's* tokenizer, the one continued pretraining would keep):

- ``shift`` = control overlap - domain overlap: how much less of a domain vocabulary BERT already holds than of
  a same-size vocabulary trained on an equal amount of general text. Raw overlap mixes domain shift with corpus
  and vocabulary size; the control cancels both, so only the difference is used.
- ``saving`` = 1 - (domain tokens per held-out document / base tokens per document): compute a domain vocabulary
  saves on every sequence.
- ``fertility`` and ``unk_rate`` of the base tokenizer on held-out domain text.
- ``train_words``: a from-scratch vocabulary and model need a large corpus to beat a general checkpoint.

Rules (thresholds in ``vocab.recommend``; defaults in brackets):

1. continue when shift < continue_max_shift [0.05] and saving < continue_max_saving [0.05] and
   fertility <= continue_max_fertility [1.3] and unk_rate <= max_unk_rate [0.005]: BERT's vocabulary fits.
2. scratch when train_words >= scratch_min_words [1e8] and (shift >= scratch_min_shift [0.10] or
   saving >= scratch_min_saving [0.10]): the vocabulary does not fit and there is text enough for a new one.
3. otherwise extend by N, N = words seen at least extend_min_per_million [20] times per million train words
   that the base cuts into extend_min_pieces [3]+ pieces (continue when N = 0).
"""

from __future__ import annotations

from domainbert.config.vocab import RecommendConfig


def _decide(
    shift: float, saving: float, fertility: float, unk: float, train_words: int, n_extend: int, t: RecommendConfig
) -> tuple[str, str]:
    """The rules in order: continue when the base fits, scratch when it fits poorly on a large corpus, extend
    when some frequent words are badly cut, else continue."""
    fits = (
        shift < t.continue_max_shift
        and saving < t.continue_max_saving
        and fertility <= t.continue_max_fertility
        and unk <= t.max_unk_rate
    )
    if fits:
        return "continue", "the base vocabulary fits the domain about as well as general text"
    if train_words >= t.scratch_min_words and (shift >= t.scratch_min_shift or saving >= t.scratch_min_saving):
        return "scratch", "the base vocabulary fits poorly and the corpus is large enough for a new one"
    if n_extend > 0:
        return "extend", f"add the {n_extend} most costly fragmented domain words to the base vocabulary"
    return "continue", "the misfit is spread thin: no frequent word is badly fragmented"


def recommend(figures: dict, candidates: list[dict], train_words: int, t: RecommendConfig) -> dict:
    """Apply the rules above.

    Args:
        figures: ``shift``, ``saving``, ``fertility``, ``unk_rate`` (floats).
        candidates: extension candidates (``count``, ``pieces``), as ``extension_candidates`` returns them.
        train_words: words in the train split.
        t: the thresholds.

    Returns:
        ``{"decision": "continue" | "extend" | "scratch", "extend_tokens": N (0 unless extend), "extend_words":
        the words rule 3 counts (whatever the decision; the extended arm adds these unless
        ``vocab.extension.num_tokens`` overrides), "reasons": [...], "figures": ..., "thresholds": ...}``.
    """
    shift, saving = figures["shift"], figures["saving"]
    fertility, unk = figures["fertility"], figures["unk_rate"]
    min_count = t.extend_min_per_million * train_words / 1e6
    extend_words = [
        c["word"] for c in candidates if c["count"] >= min_count and len(c["pieces"]) >= t.extend_min_pieces
    ]
    n_extend = len(extend_words)
    reasons = [
        f"overlap shift (control - domain) = {shift:+.1%} (continue below {t.continue_max_shift:.0%}, "
        f"scratch from {t.scratch_min_shift:.0%})",
        f"a domain vocabulary shortens held-out sequences by {saving:.1%} (continue below "
        f"{t.continue_max_saving:.0%}, scratch from {t.scratch_min_saving:.0%})",
        f"base fertility {fertility:.3f} sub-tokens/word (continue at most {t.continue_max_fertility}), "
        f"UNK rate {unk:.2%} (at most {t.max_unk_rate:.1%})",
        f"train split: {train_words:,} words (scratch needs {t.scratch_min_words:,.0f})",
        f"{n_extend} words occur {t.extend_min_per_million:g}+ times per million words and are cut into "
        f"{t.extend_min_pieces}+ pieces by the base tokenizer",
    ]
    decision, why = _decide(shift, saving, fertility, unk, train_words, n_extend, t)
    return {
        "decision": decision,
        "choice": decision,
        "extend_tokens": n_extend if decision == "extend" else 0,
        "extend_words": extend_words,
        "summary": why,
        "reasons": reasons,
        "figures": {
            "shift": shift,
            "saving": saving,
            "fertility": fertility,
            "unk_rate": unk,
            "train_words": train_words,
            "extend_candidates": n_extend,
        },
        "thresholds": t.model_dump(),
    }
