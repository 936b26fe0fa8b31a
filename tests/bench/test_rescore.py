"""bench/rescore.py rechecks a committed study's tables from its score file, through the report's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCORES = ROOT / "bench" / "scores" / "science-demo-6seeds.json.gz"


def test_rescore_prints_the_report_s_comparisons_and_a_claim(tmp_path: Path) -> None:
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run([sys.executable, str(ROOT / "bench" / "rescore.py"), str(SCORES), "--seeds", "1", "2", "3",
                          "--pair", "continued", "control", "--samples", "400"],
                         capture_output=True, text=True, env=env, check=True)
    data = json.loads(out.stdout)
    assert {s["model"] for s in data["scores"]} == {"base", "original", "continued", "control", "floor"}
    assert all(s["n_seeds"] == 3 for s in data["scores"] if s["model"] != "floor")
    assert len(data["comparisons"]) == 10 and all(c["p_holm"] is not None for c in data["comparisons"])
    (claim,) = data["claim"]
    per_seed = [a - b for _, a, b in claim["per_seed"]]
    assert claim["paired"] and claim["units"] == 3 and abs(claim["diff"] - sum(per_seed) / 3) < 1e-12
    assert (tmp_path / "rescore-science-demo-6seeds.json").is_file()
