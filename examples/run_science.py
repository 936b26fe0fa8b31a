"""The science pipeline in one sitting: the five stages `domainbert run science` runs, called in order, no Prefect.

By default it runs `make demo`'s design (DEMO below) on the shipped offline data. Overrides given on the command
line (`key=value`, as `domainbert run` takes them) go after DEMO's, so they win.

What `domainbert run` adds and this leaves out: Prefect's flow and task runs (the UI, the published artifacts),
task results cached on each stage's fingerprint (the stages here still skip outputs that are complete and up to
date), retries with backoff, Dask workers for corpus shards and fine-tuning runs (`--workers`), the run folder's
lock, the graceful stop on Ctrl-C with the line that continues the run, and the pretraining deployment on a GPU
pool. Experiment tracking (`tracking.report_to`) is the stages' own, so it works here too.

    python examples/run_science.py [--out runs/science-example] [key=value ...]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from domainbert.config.domain import load_domain, save_resolved_config
from domainbert.core import logs
from domainbert.core.errors import DomainbertError
from domainbert.core.models import quiet_libraries
from domainbert.core.paths import RunLayout
from domainbert.corpus.build import build_corpus
from domainbert.finetune.matrix import finetune_all
from domainbert.pretrain.stage import pretrain_arm
from domainbert.report.compare import read_answer, render_report
from domainbert.vocab.stage import run_vocab

# `make demo`: the NER task and the forgetting task, the DAPT arm and its general-text control, five seeds.
DEMO = [
    "finetune.forgetting_task.enabled=true",
    "finetune.only_tasks=[science-terms-ner,general-lexname]",
    "pretrain.arms=[continued,control]",
    "finetune.seeds=[1,2,3,4,5]",
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path("runs/science-example"), help="run folder (%(default)s)")
    parser.add_argument("--profile", default="offline", help="offline (shipped samples, the default) or full")
    parser.add_argument("overrides", nargs="*", help="key=value overrides, after the demo's")
    args = parser.parse_args()
    logs.configure()
    quiet_libraries()

    overrides = [*DEMO, *args.overrides]
    cfg = load_domain("science", overrides, profile=args.profile)
    layout = RunLayout(args.out.resolve())
    layout.root.mkdir(parents=True, exist_ok=True)
    save_resolved_config(layout.root, "science", args.profile, overrides, cfg)  # what `domainbert report` reads

    manifest = build_corpus(cfg, layout)  # 1. clean, filter, deduplicate, decontaminate, shard
    print(f"corpus: {manifest['documents']['train']} training documents in {layout.corpus}")
    run_vocab(cfg, layout)  # 2. the domain tokenizer, its fit against BERT's, the extended model
    print(f"vocab: {layout.vocab}")
    for arm in cfg.pretrain.replicate_names():  # 3. masked-LM pretraining, one arm after the other
        pretrain_arm(cfg, arm, layout)
        print(f"pretrain {arm}: {layout.pretrained_model(arm)}")
    results = finetune_all(cfg, layout)  # 4. every model x task x seed, and each task's floor
    print(f"finetune: {len(results)} runs in {layout.root / 'finetune'}")
    report = render_report(cfg, layout)  # 5. the paired comparison and its verdict
    print("\n" + (read_answer(report) or "").rstrip())
    print(f"report: {report}")


if __name__ == "__main__":
    try:
        main()
    except DomainbertError as exc:  # a bad override or input file: one line, as `domainbert` says it
        sys.exit(f"error: {exc}")
