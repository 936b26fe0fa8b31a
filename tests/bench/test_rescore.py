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


def test_export_writes_a_run_s_results_as_a_score_file_rescore_reads(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from report_fixtures import NER_TASK, write_ner_result

    run = tmp_path / "run"
    for seed, (base, cont) in {1: (20, 14), 2: (23, 13), 3: (22, 17)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
    out = tmp_path / "scores" / "point.json.gz"
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "bench" / "export_scores.py"), str(run), str(out),
                           "--study", "a test", "--command", "none"], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout)["runs"] == 6
    again = subprocess.run([sys.executable, str(ROOT / "bench" / "rescore.py"), str(out), "--samples", "400"],
                           capture_output=True, text=True, env=env, check=True)
    means = {s["model"]: s["mean"] for s in json.loads(again.stdout)["scores"]}
    from domainbert.core.paths import RunLayout
    from domainbert.report.inputs import finetune_results

    read = [r for _, r in finetune_results(RunLayout(run))]
    for model in ("base", "continued"):
        scores = [r["test"]["f1"] for r in read if r["model"] == model]
        assert abs(means[model] - sum(scores) / len(scores)) < 1e-12
    empty = subprocess.run([sys.executable, str(ROOT / "bench" / "export_scores.py"), str(tmp_path / "none"),
                            str(out), "--study", "x", "--command", "y"], capture_output=True, text=True, env=env)
    assert empty.returncode != 0 and "no finished fine-tuning result" in empty.stderr and "Traceback" not in empty.stderr
