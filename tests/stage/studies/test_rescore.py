"""studies/rescore.py rechecks a committed study's tables from its score file, through the report's own code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
SCORES = ROOT / "studies" / "scores" / "science-demo-6seeds.json.gz"


def test_rescore_prints_the_report_s_comparisons_and_the_claims_with_holm_over_them(tmp_path: Path) -> None:
    from domainbert.report.power import detectable_difference, holm

    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path)}
    out = subprocess.run([sys.executable, str(ROOT / "studies" / "rescore.py"), str(SCORES), "--seeds", "1", "2", "3",
                          "--pair", "continued", "control", "--pair", "continued", "base", "--samples", "400"],
                         capture_output=True, text=True, env=env, check=True)
    data = json.loads(out.stdout)
    assert {s["model"] for s in data["scores"]} == {"base", "original", "continued", "control", "floor"}
    assert all(s["n_seeds"] == 3 for s in data["scores"] if s["model"] != "floor")
    assert len(data["comparisons"]) == 10 and all(c["p_holm"] is not None for c in data["comparisons"])
    claim, other = data["claim"]
    assert (claim["model_b"], other["model_b"]) == ("control", "base")
    per_seed = [a - b for _, a, b in claim["per_seed"]]
    assert claim["paired"] and claim["units"] == 3 and abs(claim["diff"] - sum(per_seed) / 3) < 1e-12
    # Holm over the two claims, and what each detects at Holm's first threshold over two
    assert [c["p_holm"] for c in (claim, other)] == holm([claim["p_value"], other["p_value"]])
    assert claim["detectable"] == detectable_difference(claim["se"], claim["df"], 0.05, 2) > 0
    assert (tmp_path / "rescore-science-demo-6seeds.json").is_file()


def test_export_writes_a_run_s_results_as_a_score_file_rescore_reads(tmp_path: Path) -> None:
    sys.path.insert(0, str(ROOT / "tests" / "report"))
    from support.report import NER_TASK, write_ner_result

    run = tmp_path / "run"
    for seed, (base, cont) in {1: (20, 14), 2: (23, 13), 3: (22, 17)}.items():
        write_ner_result(run, "base", NER_TASK, seed, base)
        write_ner_result(run, "continued", NER_TASK, seed, cont)
    for seed in (1, 2):  # two runs made at a known commit (the record each run's folder gets); the rest before
        (run / "finetune" / "base" / NER_TASK / f"seed-{seed}" / "_domainbert.json").write_text(
            json.dumps({"source_revision": f"c0ffee{seed}", "finished_at": f"2026-12-0{seed}T10:00:00Z"}))
    out = tmp_path / "scores" / "point.json.gz"
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path)}
    done = subprocess.run([sys.executable, str(ROOT / "studies" / "export_scores.py"), str(run), str(out),
                           "--study", "a test", "--command", "none"], capture_output=True, text=True, env=env, check=True)
    assert json.loads(done.stdout)["runs"] == 6
    import gzip

    written = json.load(gzip.open(out, "rt", encoding="utf-8"))
    about = written["about"]
    assert about["run_revisions"] == ["c0ffee1", "c0ffee2"] and about["unrecorded"] == 4, about
    made = {(r["model"], r["seed"]): r["made"] for r in written["runs"]}
    assert made[("base", 2)] == {"revision": "c0ffee2", "finished_at": "2026-12-02T10:00:00Z"}, made
    assert sum(m["revision"] is None and m["finished_at"] is None for m in made.values()) == 4, made
    again = subprocess.run([sys.executable, str(ROOT / "studies" / "rescore.py"), str(out), "--samples", "400"],
                           capture_output=True, text=True, env=env, check=True)
    means = {s["model"]: s["mean"] for s in json.loads(again.stdout)["scores"]}
    from domainbert.core.paths import RunLayout
    from domainbert.report.inputs import finetune_results

    read = [r for _, r in finetune_results(RunLayout(run))]
    for model in ("base", "continued"):
        scores = [r["test"]["f1"] for r in read if r["model"] == model]
        assert abs(means[model] - sum(scores) / len(scores)) < 1e-12
    empty = subprocess.run([sys.executable, str(ROOT / "studies" / "export_scores.py"), str(tmp_path / "none"),
                            str(out), "--study", "x", "--command", "y"], capture_output=True, text=True, env=env)
    assert empty.returncode != 0 and "no finished fine-tuning result" in empty.stderr and "Traceback" not in empty.stderr


def _write_scores(path: Path, about: dict, runs: list[dict]) -> Path:
    import gzip

    with gzip.open(path, "wt", encoding="utf-8") as f:
        json.dump({"format": 1, "about": about, "runs": runs}, f)
    return path


def test_several_score_files_are_one_run_with_a_model_renamed_and_a_refitted_floor_kept_once(tmp_path: Path) -> None:
    import gzip

    law = ROOT / "studies" / "scores" / "study-2-law.json.gz"
    first = json.load(gzip.open(law, "rt", encoding="utf-8"))
    base_runs = [r for r in first["runs"] if r["model"] == "base"]
    floor = next(r for r in first["runs"] if r["model"] == "floor")
    later = [{**base_runs[0], "model": "original", "seed": seed, "test": {"macro_f1": score}}
             for seed, score in ((3, 0.50), (4, 0.58), (5, 0.61))]
    second = _write_scores(tmp_path / "later.json.gz", {"study": "later"}, [*later, floor])
    env = {**os.environ, "DOMAINBERT_BENCH_RESULTS": str(tmp_path)}
    cmd = [sys.executable, str(ROOT / "studies" / "rescore.py"), str(law), str(second), "--samples", "400"]
    out = subprocess.run([*cmd, "--rename", "study-2-law.json.gz:base=original"],
                         capture_output=True, text=True, env=env, check=True)
    scores = {s["model"]: s for s in json.loads(out.stdout)["scores"]}
    assert set(scores) == {"original", "floor"} and scores["floor"]["n_seeds"] == 1
    five = [r["test"]["macro_f1"] for r in base_runs] + [0.50, 0.58, 0.61]
    assert scores["original"]["n_seeds"] == 5 and abs(scores["original"]["mean"] - sum(five) / 5) < 1e-9
    (versus_floor,) = json.loads(out.stdout)["comparisons"]
    assert versus_floor["reference"] == "floor" and versus_floor["model"] == "original"

    unrenamed = subprocess.run(cmd, capture_output=True, text=True, env=env, check=True)
    assert {s["model"] for s in json.loads(unrenamed.stdout)["scores"]} == {"base", "original", "floor"}

    moved = _write_scores(tmp_path / "moved.json.gz", {}, [{**floor, "test": {"macro_f1": 0.7}}])
    clash = subprocess.run([*cmd[:3], str(moved)], capture_output=True, text=True, env=env)
    assert clash.returncode != 0 and "scores differently" in clash.stderr and "Traceback" not in clash.stderr
    other = _write_scores(tmp_path / "other.json.gz", {}, [{**later[0], "test_set": "another"}])
    split = subprocess.run([*cmd[:3], str(other)], capture_output=True, text=True, env=env)
    assert split.returncode != 0 and "another test split" in split.stderr and "Traceback" not in split.stderr
