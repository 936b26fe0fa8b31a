"""The budget curve corrects its claims over the whole curve (arms x references x tasks x budgets)."""

from __future__ import annotations

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[3] / "studies" / "scripts"


def gain(model: str, p: float, low: float, high: float) -> dict:
    return {"task": "ner", "model": model, "reference": "original", "metric": "f1", "diff": (low + high) / 2,
            "ci_low": low, "ci_high": high, "p_value": p, "verdict": "better" if low > 0 else "no significant difference"}


def test_a_lone_p_of_0_012_among_six_points_is_not_a_smallest_budget(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    sys.modules.pop("budget_curve", None)
    import budget_curve

    ps = [0.012, 0.3, 0.5, 0.6, 0.8, 0.9]
    points = [
        {"index": k, "arms": {"tapt": {"tokens_consumed": 1000 * (k + 1)}},
         "gains": [gain("tapt", p, 0.006 if p < 0.05 else -0.02, 0.051)]}
        for k, p in enumerate(ps)
    ]
    assert budget_curve.smallest_budgets(points)["tapt - original / ner"]["tokens"] == 1000  # uncorrected
    budget_curve.correct_curve(points, 0.95)
    assert abs(points[0]["gains"][0]["p_holm"] - 0.072) < 1e-12
    assert budget_curve.smallest_budgets(points)["tapt - original / ner"] is None


def test_later_points_reuse_point_0s_shared_models_and_never_an_arm_or_their_own(monkeypatch, tmp_path) -> None:
    monkeypatch.syspath_prepend(str(SCRIPTS))
    sys.modules.pop("budget_curve", None)
    import budget_curve

    first, later = tmp_path / "point-0", tmp_path / "point-1"
    for model in ("base", "original", "floor", "continued"):
        seed = first / "finetune" / model / "ner" / "seed-1"
        seed.mkdir(parents=True)
        (seed / "result.json").write_text(model)
    own = later / "finetune" / "original" / "ner" / "seed-1"
    own.mkdir(parents=True)
    (own / "result.json").write_text("point 1's own")

    assert budget_curve.share_references(first, later) == ["base", "floor"]
    assert (later / "finetune" / "base" / "ner" / "seed-1" / "result.json").read_text() == "base"
    assert (own / "result.json").read_text() == "point 1's own"  # never overwritten
    assert not (later / "finetune" / "continued").exists()  # an arm differs at every point
