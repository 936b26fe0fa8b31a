"""Settings worth a second look: far from the literature's defaults for their arm, or budgets that cannot mean
what a reader will take them to mean.

``setting_flags`` reads a resolved configuration only; ``budget_flags`` also needs the corpus size in tokens
(known once the corpus exists; before it, ``source_budget_flags`` weighs the budget against the most tokens
the source files can hold); ``overlap_flags`` reads the local tasks and names examples
their evaluation splits share with their training split (``split_overlap``). ``all_flags`` gathers them for
``plan`` and ``validate``; the report shows the same sentences among its caveats. Nothing here refuses a setting: an unusual value can be deliberate, but it should never be
silent. The reference values and their sources:

* peak learning rate: ``config.pretrain.DEFAULT_ARM_OPTIM`` (BERT/BioBERT's 1e-4 for continued and extended
  pretraining, RoBERTa's 6e-4 regime for from-scratch); flagged outside [1/5, 5] times it;
* warmup share: 0.01 to 0.1 of the steps (BERT 1%, RoBERTa/DAPT 6%, academic-budget BERT up to 10%), flagged
  outside [0, 0.25] or at 0;
* masking rate: 0.15 (BERT, RoBERTa); flagged outside [0.1, 0.4] (Wettig et al. 2023 found up to 40% works);
* sequence length: 128 to 512 (BERT's two phases); flagged below 64;
* budget: below a tenth of one pass over the corpus, or above a hundred passes (TAPT's 100 epochs over task
  text is the largest repetition the literature recommends); a from-scratch arm under 10 million tokens (the
  BabyLM strict-small track's budget, the smallest at which small encoders are reported to learn).
"""

from __future__ import annotations

import json
from pathlib import Path

from domainbert.config.domain import DomainConfig
from domainbert.config.pretrain import ARMS, DEFAULT_ARM_OPTIM, Arm
from domainbert.core.errors import DomainbertError
from domainbert.task_data.split_overlap import find_overlap
from domainbert.task_data.splits import load_task

LR_FACTOR = 5.0
WARMUP_MAX = 0.25
MASK_RANGE = (0.10, 0.40)
MIN_SEQ_LEN = 64
MIN_PASSES, MAX_PASSES = 0.1, 100.0
SCRATCH_MIN_TOKENS = 10_000_000


def setting_flags(cfg: DomainConfig) -> list[str]:
    """Sentences naming each pretraining setting far from the literature's default for its arm."""
    out: list[str] = []
    p = cfg.pretrain
    for arm in p.arms:
        resolved, default = p.for_arm(arm), DEFAULT_ARM_OPTIM[arm]
        lr = resolved.lr or default["lr"]
        if not default["lr"] / LR_FACTOR <= lr <= default["lr"] * LR_FACTOR:
            out.append(
                f"pretrain: the {arm} arm trains at a peak learning rate of {lr:g}, against {default['lr']:g} "
                f"in the literature for this arm (more than {LR_FACTOR:g} times off; set by "
                f"{_lr_source(cfg, arm)})"
            )
        warmup = resolved.warmup_ratio if resolved.warmup_ratio is not None else default["warmup_ratio"]
        if warmup == 0 or warmup > WARMUP_MAX:
            out.append(
                f"pretrain: the {arm} arm warms its learning rate up over {warmup:.0%} of the steps (the "
                f"literature uses 1-10%, {default['warmup_ratio']:.0%} for this arm)"
            )
    # every rate the arms train at: the one rate, or each phase of a masking schedule
    rates = (
        [("pretrain.mask_rate", p.mask_rate)]
        if not p.mask_schedule
        else [
            (f"pretrain.mask_schedule's phase {i} (until {phase.until:.0%})", phase.rate)
            for i, phase in enumerate(p.mask_schedule, 1)
        ]
    )
    for name, rate in rates:
        if not MASK_RANGE[0] <= rate <= MASK_RANGE[1]:
            out.append(
                f"{name} is {rate:g} (BERT and RoBERTa mask 0.15; more than "
                f"{MASK_RANGE[1]:g} or under {MASK_RANGE[0]:g} is untested in the literature)"
            )
    shortest = min([p.seq_len, *(phase.seq_len for phase in p.seq_len_schedule)])
    if shortest < MIN_SEQ_LEN:
        out.append(f"pretrain: sequences of {shortest} tokens (BERT pretrains at 128 and 512)")
    scratch = [arm for arm in p.arms if ARMS[arm].from_scratch and p.arm_budget(arm) < SCRATCH_MIN_TOKENS]
    if scratch:
        budget = min(p.arm_budget(arm) for arm in scratch)
        out.append(
            f"pretrain: {', '.join(scratch)} from scratch on {budget:,} tokens: a random encoder at that "
            f"budget (no from-scratch arm learnt at 300,000 tokens here; BERT-mini at 18,432,000 fit the "
            "science text well below a unigram model, and still scored under both science floors: "
            "studies/03-from-scratch.md and studies/07-from-scratch-hour.md; the smallest budgets small "
            f"encoders learn from in the literature are about {SCRATCH_MIN_TOKENS:,} tokens, BabyLM's "
            "strict-small track): expect its runs to collapse, and compare it at a larger budget"
        )
    return out


def _lr_source(cfg: DomainConfig, arm: Arm) -> str:
    own = cfg.pretrain.arm_optim.get(arm)
    return f"pretrain.arm_optim.{arm}.lr" if own and own.lr is not None else "pretrain.lr"


def corpus_budgets(cfg: DomainConfig) -> dict[str, int]:
    """Each distinct budget of the corpus arms -> the setting that gives it (``pretrain.budget_tokens`` or an
    arm's ``arm_optim.<arm>.budget_tokens``); the stage's own when no corpus arm is configured."""
    p, out = cfg.pretrain, dict[str, int]()
    for arm in p.arms:
        if not ARMS[arm].on_task_text:
            out.setdefault(_budget_setting(cfg, arm), p.arm_budget(arm))
    return out or {"pretrain.budget_tokens": p.budget_tokens}


def _budget_setting(cfg: DomainConfig, arm: str) -> str:
    """The setting an arm's budget comes from (``PretrainConfig.arm_budget``: the control follows continued)."""
    own = cfg.pretrain.arm_optim.get(arm)  # type: ignore[call-overload]
    if own is not None and own.budget_tokens is not None:
        return f"pretrain.arm_optim.{arm}.budget_tokens"
    return _budget_setting(cfg, "continued") if arm == "control" else "pretrain.budget_tokens"


def passes(cfg: DomainConfig, corpus_tokens: int) -> float:
    """How many times the largest corpus arm's budget goes over the corpus."""
    return max(corpus_budgets(cfg).values()) / max(corpus_tokens, 1)


def budget_flags(cfg: DomainConfig, corpus_tokens: int | None) -> list[str]:
    """Sentences when a corpus arm's budget is under a tenth of a pass or over a hundred passes."""
    if corpus_tokens is None or corpus_tokens <= 0:
        return []
    out = []
    for setting, budget in corpus_budgets(cfg).items():
        n = budget / corpus_tokens
        if n < MIN_PASSES:
            out.append(
                f"{setting} {budget:,} is {n:.3g} passes over the {corpus_tokens:,}-token corpus: most of the "
                "corpus is never seen, so the arms measure the budget more than the domain"
            )
        elif n > MAX_PASSES:
            out.append(
                f"{setting} {budget:,} is {n:,.0f} passes over the {corpus_tokens:,}-token corpus (more than "
                f"{MAX_PASSES:g}): the arms would memorise the corpus; add text or lower the budget"
            )
    return out


def source_budget_flags(cfg: DomainConfig, tokens_at_most: int | None) -> list[str]:
    """Before the corpus exists: a sentence when the budget is over a hundred passes even over the most tokens
    the source files can hold. Only this direction is sure: filters and deduplication only shrink a corpus, so
    a budget under a tenth of a pass over the files may still be more over the corpus."""
    if not tokens_at_most:
        return []
    n = passes(cfg, tokens_at_most)
    if n <= MAX_PASSES:
        return []
    setting, budget = max(corpus_budgets(cfg).items(), key=lambda item: item[1])
    return [
        f"{setting} {budget:,} is at least {int(n):,} passes over the corpus: its "
        f"source files hold at most {tokens_at_most:,} tokens by their sizes (the corpus is not built yet); more "
        f"than {MAX_PASSES:g} passes would memorise the corpus: add text or lower the budget"
    ]


def corpus_tokens(corpus_dir: Path) -> int | None:
    """The corpus's estimated training tokens from its manifest, or None before the corpus stage has run."""
    try:
        manifest = json.loads((corpus_dir / "manifest.json").read_text(encoding="utf-8"))
        return int(manifest["estimated_tokens"]["train"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def overlap_flags(cfg: DomainConfig) -> list[str]:
    """One sentence per local task whose validation or test split shares examples with its training split, and
    what fine-tuning does with them (``finetune.split_overlap``)."""
    out = []
    for task in cfg.finetune.tasks:
        if task.format == "hf":
            continue  # needs the network; the fine-tuning stage checks it when it reads the task
        try:
            data = load_task(task)
        except DomainbertError:
            continue  # validate reports the task's error itself
        overlap = find_overlap(data)
        if overlap.any:
            sizes = {split: len(examples) for split, examples in data.splits.items()}
            action = (
                "left out of scoring"
                if cfg.finetune.split_overlap == "exclude"
                else "scored anyway (finetune.split_overlap: keep)"
            )
            out.append(f"{overlap.sentence(task.name, sizes)}; {action}")
    return out


def machine_flags(cfg: DomainConfig) -> list[str]:
    """Settings this machine runs badly: bf16 asked for where torch can only emulate it (no GPU, no AVX512-BF16
    or AMX on the CPU). Not in the report: they say where a run happens, not what it means."""
    import torch

    from domainbert.core.distributed import native_bf16

    if torch.cuda.is_available() or native_bf16(torch.device("cpu")):
        return []
    settings = {
        "pretrain.precision": cfg.pretrain.precision,
        "pretrain.base_warmup.precision": cfg.pretrain.base_warmup.precision,
    }
    asked = [key for key, value in settings.items() if value == "bf16"]
    return [
        f"{key} is bf16 but this machine has no GPU and its CPU no native bf16 (AVX512-BF16 or AMX): torch "
        "emulates it, many times slower than fp32; set it to auto (bf16 only where it is native) or fp32"
        for key in asked
    ]


def all_flags(cfg: DomainConfig, corpus_dir: Path | None, source_tokens: int | None = None) -> list[str]:
    """Every flag of a run: its settings, its budget against the corpus (once built; before, against the most
    ``source_tokens`` its source files can hold), its tasks' overlaps and what this machine would run slowly."""
    tokens = corpus_tokens(corpus_dir) if corpus_dir is not None else None
    budget = budget_flags(cfg, tokens) if tokens is not None else source_budget_flags(cfg, source_tokens)
    return setting_flags(cfg) + budget + overlap_flags(cfg) + machine_flags(cfg)
