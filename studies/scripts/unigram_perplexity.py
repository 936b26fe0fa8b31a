"""The unigram bar for a run's masked-LM perplexity: what a model that knows only how often each token occurs
scores on the same held-out text, under each arm's own tokenizer.

    python studies/scripts/unigram_perplexity.py runs/science-scratch-study [--arms continued scratch]

For each arm, its tokenizer (``pretrain/<arm>/model``) encodes the corpus's training split, whose token counts
(add-one smoothed over the vocabulary) are the unigram model, and the first ``pretrain.eval_documents``
documents of the validation split, the pretraining's own domain evaluation set (``pretrain.evaluation``).
The unigram perplexity is exp of the mean negative log-probability of the validation tokens (special tokens
left out): masked positions are drawn uniformly, so it is the expected perplexity of a unigram guess at them.
Printed beside the arm's recorded ``domain_perplexity`` (its ``summary.json``) and their ratio. An encoder
that has learnt nothing but frequencies scores about the unigram figure; issue 50 asks a from-scratch arm to
fall well below it. Deterministic. Prints one JSON document (also ``bench/results/unigram-perplexity-*.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT / "bench"), str(ROOT)) if p not in sys.path]

from common import emit, git_revision, set_offline_env  # noqa: E402


def token_counts(tokenizer: Any, texts: Any) -> Counter[int]:
    counts: Counter[int] = Counter()
    special = set(tokenizer.all_special_ids)
    for text in texts:
        counts.update(i for i in tokenizer(text, add_special_tokens=False)["input_ids"] if i not in special)
    return counts


def unigram_perplexity(train: Counter[int], held_out: Counter[int], vocab_size: int) -> float:
    total = sum(train.values()) + vocab_size
    nll = sum(n * -math.log((train[i] + 1) / total) for i, n in held_out.items())
    return math.exp(nll / max(sum(held_out.values()), 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a run folder (its domain is read from config.resolved.json)")
    parser.add_argument("--arms", nargs="+", default=None, help="default: the run's arms")
    args = parser.parse_args()
    set_offline_env()
    from transformers import AutoTokenizer

    from domainbert.config.domain import RESOLVED_CONFIG, load_domain
    from domainbert.core.paths import RunLayout
    from domainbert.corpus.store import iter_texts
    from domainbert.pretrain.evaluation import validation_texts

    saved = json.loads((args.run / RESOLVED_CONFIG).read_text())
    cfg = load_domain(saved["domain_file"], saved["overrides"], profile=saved["profile"])
    layout = RunLayout(args.run)
    held_out_texts = validation_texts(layout, cfg.pretrain.eval_documents)
    results = {}
    for arm in args.arms or list(cfg.pretrain.arms):
        folder = args.run / "pretrain" / arm
        tokenizer = AutoTokenizer.from_pretrained(folder / "model")
        train = token_counts(tokenizer, iter_texts(Path(layout.corpus), "train"))
        held_out = token_counts(tokenizer, held_out_texts)
        unigram = unigram_perplexity(train, held_out, len(tokenizer))
        summary = json.loads((folder / "summary.json").read_text())
        model = summary.get("domain_perplexity")
        results[arm] = {
            "vocabulary": len(tokenizer),
            "train_tokens": sum(train.values()),
            "held_out_documents": len(held_out_texts),
            "held_out_tokens": sum(held_out.values()),
            "unigram_perplexity": round(unigram, 1),
            "domain_perplexity_before": summary.get("domain_perplexity_before"),
            "domain_perplexity": model,
            "model_over_unigram": round(model / unigram, 3) if model else None,
        }
    emit({"run": str(args.run), "arms": results, "revision": git_revision()}, f"unigram-perplexity-{args.run.name}")


if __name__ == "__main__":
    main()
