"""The literature's pretraining budgets, for the sentences that place a run's budget among them.

Each figure is a paper's reported steps x batch x sequence length. The report's headline and the model cards
both say how far below them a run is, and call a run "too small to conclude" (report) or "a smoke test, not a
model to use" (cards) below ``TOO_SMALL_SHARE`` of the smallest. Nothing here reads a run.
"""

from __future__ import annotations

# DAPT (Gururangan et al. 2020, appendix B): 12.5k steps of 2,048 sequences of up to 512 tokens.
PUBLISHED_BUDGETS = {"DAPT (Gururangan et al. 2020)": 12_500 * 2048 * 512}
# Below this share of the smallest published budget a run is too small to speak to the literature.
TOO_SMALL_SHARE = 1e-3


def smallest_published() -> tuple[str, int]:
    """(paper, tokens) of the smallest published budget."""
    return min(PUBLISHED_BUDGETS.items(), key=lambda kv: kv[1])


def too_small(tokens: float) -> bool:
    """Whether ``tokens`` is below ``TOO_SMALL_SHARE`` of the smallest published budget."""
    return tokens < TOO_SMALL_SHARE * smallest_published()[1]


# Most of DAPT's gains over RoBERTa in Don't Stop Pretraining (Gururangan et al. 2020, Table 3) lie between
# these, in points of the task's metric as a share: a design that cannot detect the upper end cannot answer
# whether domain-adaptive pretraining helped.
PUBLISHED_GAINS = (0.004, 0.035)
PUBLISHED_GAINS_SOURCE = "most of DAPT's gains in Don't Stop Pretraining (Gururangan et al. 2020, Table 3)"
