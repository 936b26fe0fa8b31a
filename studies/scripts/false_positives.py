"""Study 19: the page's family-wise false-positive rate, simulated from a model fitted to real runs.

    python studies/scripts/false_positives.py --task ner-sized --pages 200 --out ner.json
    python studies/scripts/false_positives.py --quick --out /tmp/fp.json

A stopped run goes on where it stopped when started again with the same ``--out``: the file is rewritten, whole,
after each design, with ``complete`` false until the last.

Each test example of a run is right when ``mu + a_i + b_mi (+ b_mri) + c_ms + e_msi > 0`` (``studies/19-false-positive-calibration.md``):
``a`` the example's difficulty (sd 1), ``b`` the model's own per-example effect, ``c`` the seed's shift of the
run, shared between models under one seed with correlation ``rho``, ``e`` per-example flips, ``b_mri`` a
pretraining replicate's own per-example effect. ``fit_task`` sets ``mu``, ``sd_b``, ``sd_c``, ``sd_e`` and
``sd_rep`` so that one model's runs match a real file's mean score, seed sd and flip share, its paired
comparisons' test-sampling variance, and the replicate share of ``power.REPLICATE_SHARE``.

``simulate`` makes a pool of independent null comparisons of one design, each through the report's own
``paired.pairing``, ``paired.PairedDraws`` and ``stats.draw_until_sure`` (the p-value's rule for more draws; the
bounds' rule is left out, as no interval is read), and reads three p-values from each: the method's, a normal in
place of the t, and the example bootstrap alone (as a normal). ``page_rates`` cuts the pool into pages of ``m``
and counts the pages where Holm keeps a claim. What it leaves out: the metric is accuracy, not F1 or macro-F1;
the comparisons of a page are independent, where a real page's share a reference and a test set; draws are made
as for a one-comparison page (``FAMILY``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy import optimize, stats

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from domainbert.report.paired import PairedDraws, pairing  # noqa: E402
from domainbert.report.power import REPLICATE_SHARE, TASK_PRIORS  # noqa: E402
from domainbert.report.stats import draw_until_sure  # noqa: E402

ALPHA = 0.05
SAMPLES = 1000  # compare.bootstrap_samples' default
PAGE_SIZES = (9, 12, 14, 18, 20, 26, 28, 72)  # plan.design_power.planned_family over the shipped profiles
SEEDS = (3, 5, 10)
REPLICATES = (1, 2)
# rho of the seed shift: all of it shared (scores correlate as far as the flips let them, 0.7-0.8 here) or none
RHOS = {"r high": 1.0, "r 0": 0.0}
VARIANTS = ("method", "normal", "examples")
# The simulation draws as a one-comparison page does: a page of 72 draws more where a p-value is near 0.05,
# which makes the p-value surer, not larger or smaller on average (each draw's t tail is integrated exactly).
FAMILY = 1
REAL = {
    "ner-sized": ("studies/scores/science-demo-6seeds.json.gz", "science-terms-ner", "base"),
    "classification-sized": ("studies/scores/study-0-manpages-fr-recipe.json.gz", "manpages-fr-section", "base"),
}


@dataclass(frozen=True)
class TaskModel:
    """The latent model of one task (see the module)."""

    name: str
    n: int
    mu: float
    sd_b: float
    sd_c: float
    sd_e: float
    sd_rep: float
    target: dict[str, float]


def real_targets(path: str, task: str, model: str) -> dict[str, float]:
    """What the fit matches, from a committed score file: test size, one model's mean, seed sd and flip share,
    and the median test-sampling variance of the task's paired comparisons (``PairedDraws.example_var``)."""
    import itertools

    from domainbert.report.draws import RunScores
    from domainbert.report.results import group_results
    from domainbert.report.stats import seed_noise_of
    from studies.score_files import read_scores

    _, runs = read_scores(ROOT / path)
    models = group_results(runs)[task]
    scores = RunScores(models[model], None, 0, SAMPLES)
    noise = seed_noise_of(scores.full, scores.boot(0))
    assert noise is not None
    example = []
    for a, b in itertools.combinations([m for m in models if m != "floor"], 2):
        pair = pairing(models[a], models[b])
        if pair is not None:
            both = RunScores(models[a] + models[b], None, 0, SAMPLES)
            example.append(PairedDraws(pair, both, len(models[a])).v_example)
    return {
        "n": float(scores.n_examples),
        "mean": float(scores.full.mean()),
        "seed_sd": noise.sd,
        "flip_share": min(noise.within / noise.sd**2, 0.9),
        "pair_example_var": float(np.median(example)),
    }


def fit_task(name: str, target: dict[str, float], seed: int = 0) -> TaskModel:
    """The latent model whose runs match ``target`` (to the precision of one fixed test set of its size)."""
    n = int(target["n"])
    rng = np.random.default_rng(seed)
    a, z_b, z_b2, z_r = (rng.standard_normal(n) for _ in range(4))

    def parts(sd_b: float, sd_e: float) -> tuple[float, float, float]:
        """mu for the mean, the flips' variance of one run's score, and the score's slope in the seed shift."""
        mu = optimize.brentq(lambda m: stats.norm.cdf((m + a + sd_b * z_b) / sd_e).mean() - target["mean"], -20, 20)
        p = stats.norm.cdf((mu + a + sd_b * z_b) / sd_e)
        slope = float(stats.norm.pdf((mu + a + sd_b * z_b) / sd_e).mean() / sd_e)
        return mu, float((p * (1 - p)).mean() / n), slope

    def example_var(sd_b: float, sd_e: float) -> float:
        mu = parts(sd_b, sd_e)[0]
        pa = stats.norm.cdf((mu + a + sd_b * z_b) / sd_e)
        pb = stats.norm.cdf((mu + a + sd_b * z_b2) / sd_e)
        return float((pa - pb).var() / n)

    flips = target["flip_share"] * target["seed_sd"] ** 2
    sd_b, sd_e = 0.5, 0.5
    for _ in range(6):  # alternate the two one-dimensional fits; each moves the other little
        sd_e = optimize.brentq(lambda e, b=sd_b: parts(b, e)[1] - flips, 0.02, 20)
        lo = example_var(0.0, sd_e)
        if target["pair_example_var"] <= lo:
            sd_b = 0.0
        else:
            sd_b = optimize.brentq(lambda b, e=sd_e: example_var(b, e) - target["pair_example_var"], 0.0, 10)
    mu, flip_var, slope = parts(sd_b, sd_e)
    sd_c = math.sqrt(max(target["seed_sd"] ** 2 - flip_var, 0.0)) / slope
    # a replicate's own per-example effect: the sd of its mean score REPLICATE_SHARE of the task type's pair sd
    # (power.TASK_PRIORS, measured on the committed scores), at this test size

    def rep_sd(sd: float) -> float:
        moved = stats.norm.cdf((mu + a + sd_b * z_b + sd * z_r) / sd_e) - stats.norm.cdf((mu + a + sd_b * z_b) / sd_e)
        return float(moved.std() / math.sqrt(n))

    prior = TASK_PRIORS["ner" if name.startswith("ner") else "classification"]
    goal = REPLICATE_SHARE * prior.pair_sd * math.sqrt(prior.test_examples / n)
    sd_rep = optimize.brentq(lambda s: rep_sd(s) - goal, 1e-6, 20) if rep_sd(20) > goal else 20.0
    return TaskModel(name, n, float(mu), float(sd_b), float(sd_c), float(sd_e), float(sd_rep), target)


class SimScores:
    """A comparison's runs as ``draws.Scores``: accuracy per run, and per chunk on the design's shared draws."""

    def __init__(self, right: np.ndarray, weights: list[np.ndarray]) -> None:
        self.right = right  # [runs, n] 0/1
        self.full = right.mean(1)
        self._weights = weights

    def boot(self, index: int) -> np.ndarray:
        return np.asarray(self.right @ self._weights[index].T, dtype=float) / self.right.shape[1]


def design_weights(n: int, rng: np.random.Generator, chunks: int = 16) -> list[np.ndarray]:
    """``chunks`` chunks of ``SAMPLES`` bootstrap draws of ``n`` examples, as count weights."""
    return [rng.multinomial(n, np.full(n, 1.0 / n), size=SAMPLES).astype(np.float32) for _ in range(chunks)]


def null_comparison(
    task: TaskModel, seeds: int, replicates: int, rho: float, rng: np.random.Generator
) -> tuple[list[dict], list[dict], np.ndarray]:
    """One null comparison's runs: the arm (``replicates`` replicates x ``seeds``) and the reference (one
    checkpoint x ``seeds``), and their examples right, A's runs first. With replicates the reference's checkpoint
    has its own per-example effect too, so that its latent spread, and so its expected score, is the arm's."""
    n = task.n
    base = task.mu + rng.standard_normal(n)
    shared = rng.standard_normal(seeds)
    cells = []
    for model, reps in (("A", replicates), ("B", 1)):
        own = base + task.sd_b * rng.standard_normal(n)
        for r in range(1, reps + 1):
            rep = own + (task.sd_rep * rng.standard_normal(n) if replicates > 1 else 0.0)
            for s in range(seeds):
                shift = task.sd_c * (math.sqrt(rho) * shared[s] + math.sqrt(1 - rho) * rng.standard_normal())
                right = rep + shift + task.sd_e * rng.standard_normal(n) > 0
                cells.append(({"model": model, "seed": s + 1, "replicate": r if model == "A" else 1}, right))
    runs_a = [c for c, _ in cells if c["model"] == "A"]
    runs_b = [c for c, _ in cells if c["model"] == "B"]
    return runs_a, runs_b, np.stack([r for _, r in cells]).astype(np.float32)


def p_values(
    runs_a: list[dict], runs_b: list[dict], scores: SimScores, family: int
) -> tuple[float, float, float]:
    """The method's p-value, with a normal in place of the t, and of the example bootstrap alone (a normal)."""
    pair = pairing(runs_a, runs_b)
    assert pair is not None
    drawer = PairedDraws(pair, scores, len(runs_a))
    dist = draw_until_sure(drawer, SAMPLES, ALPHA, family, sure_bounds=False)
    normal = type(dist)(dist.example, dist.scale, None).p_value()
    examples = float(2 * stats.norm.sf(abs(drawer.point) / math.sqrt(drawer.v_example))) if drawer.v_example else 1.0
    return dist.p_value(), normal, examples


def simulate(
    task: TaskModel, seeds: int, replicates: int, rho: float, comparisons: int, seed: int
) -> tuple[np.ndarray, float]:
    """``[comparisons, 3]`` p-values (``VARIANTS``) of independent nulls, and the scores' mean correlation."""
    rng = np.random.default_rng(seed)
    weights = design_weights(task.n, rng)
    out = np.empty((comparisons, len(VARIANTS)))
    r = []
    for k in range(comparisons):
        runs_a, runs_b, right = null_comparison(task, seeds, replicates, rho, rng)
        scores = SimScores(right, weights)
        out[k] = p_values(runs_a, runs_b, scores, FAMILY)
        full = scores.full
        a = full[: len(runs_a)].reshape(replicates, seeds)[0]
        r.append(np.corrcoef(a, full[len(runs_a) :])[0, 1] if seeds > 2 else np.nan)
    return out, float(np.nanmean(r))


def page_rates(p: np.ndarray, size: int) -> list[int]:
    """Per variant, [pages, false pages]: consecutive comparisons in pages of ``size``; a page is false when
    Holm keeps a claim, i.e. its smallest p is at most alpha / size."""
    pages = p.shape[0] // size
    cut = p[: pages * size].reshape(pages, size, -1).min(axis=1)
    return [[pages, int((cut[:, v] <= ALPHA / size).sum())] for v in range(p.shape[1])]


def design_key(design: dict) -> tuple[str, int, int, str]:
    return (design["task"], design["seeds"], design["replicates"], design["correlation"])


def run(
    tasks: dict[str, TaskModel], pages: int, seed: int, done: list[dict], save: Callable[[list[dict]], None]
) -> list[dict]:
    """Every design's counts; designs already in ``done`` are kept, and ``save`` gets the list after each new one.

    A design's stream is seeded from its identity, so a design run after a stop gives the counts it would have
    given in one uninterrupted run."""
    designs = list(done)
    finished = {design_key(d) for d in done}
    for task in tasks.values():
        t_index = list(REAL).index(task.name)
        for seeds in SEEDS:
            for replicates in REPLICATES:
                for r_index, (label, rho) in enumerate(RHOS.items()):
                    if (task.name, seeds, replicates, label) in finished:
                        continue
                    start = time.time()
                    code = [seed, t_index, seeds, replicates, r_index]
                    p, r = simulate(task, seeds, replicates, rho, pages * max(PAGE_SIZES), int(np.dot(code, [1, 7, 31, 131, 523])))
                    for size in PAGE_SIZES:
                        counts = page_rates(p, size)
                        designs.append(
                            {"task": task.name, "seeds": seeds, "replicates": replicates, "correlation": label,
                             "r": round(r, 3), "page": size, **{v: c for v, c in zip(VARIANTS, counts, strict=True)}}
                        )
                    save(designs)
                    print(f"{task.name} {seeds} seeds x {replicates} rep, {label} (r {r:.2f}): "
                          f"{time.time() - start:.0f} s; page 72: {designs[-1]}", flush=True)
    return designs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--pages", type=int, default=500, help="pages of the largest size per design")
    ap.add_argument("--seed", type=int, default=19)
    ap.add_argument("--quick", action="store_true", help="4 pages a design: checks that the script runs")
    ap.add_argument("--task", choices=sorted(REAL), action="append", help="only these tasks (default: both)")
    ap.add_argument("--merge", type=Path, nargs="+", help="merge these outputs into --out instead of running")
    args = ap.parse_args()
    if args.merge:
        parts = [json.loads(p.read_text(encoding="utf-8")) for p in args.merge]
        for path, part in zip(args.merge, parts, strict=True):
            if not part["about"].get("complete", True):
                sys.exit(f"{path}: the run has not finished (about.complete is false); start it again to finish it")
        merged = {"about": [part["about"] for part in parts], "designs": [d for part in parts for d in part["designs"]]}
        args.out.write_text(json.dumps(merged, indent=1) + "\n", encoding="utf-8")
        return
    tasks = {name: fit_task(name, real_targets(*where)) for name, where in REAL.items() if name in (args.task or REAL)}
    for t in tasks.values():
        print(t, flush=True)
    pages = 4 if args.quick else args.pages
    about = {"alpha": ALPHA, "samples": SAMPLES, "pages_at_72": pages, "seed": args.seed,
             "tasks": [asdict(t) for t in tasks.values()]}
    done: list[dict] = []
    if args.out.exists():  # a stopped run of the same settings: keep its finished designs
        earlier = json.loads(args.out.read_text(encoding="utf-8"))
        if {k: v for k, v in earlier["about"].items() if k in about} != about:
            sys.exit(f"{args.out}: written with other settings (about); remove it or choose another --out")
        done = earlier["designs"]
    start = time.time()
    elapsed = float(earlier["about"].get("seconds", 0)) if done else 0.0

    def save(designs: list[dict], complete: bool = False) -> None:
        whole = {**about, "seconds": round(elapsed + time.time() - start), "complete": complete}
        tmp = args.out.with_name(args.out.name + ".tmp")
        tmp.write_text(json.dumps({"about": whole, "designs": designs}, indent=1) + "\n", encoding="utf-8")
        tmp.replace(args.out)  # all or nothing: a stop mid-write leaves the last whole file

    save(run(tasks, pages, args.seed, done, save), complete=True)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
