"""The card of a pretrained arm's model folder (``model_card``): Hub metadata with the fine-tuning
``model-index`` once the report's scores exist, data, budget, figures, use and limits; the card written to
disk is the card ``push`` uploads. Fine-tuned and dataset cards are ``finetuned_and_corpus.py``'s."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from domainbert.cards.finetuned_and_corpus import (
    TASK_TYPES,
    base_model_id,
    dataset_ids,
    fmt_value,
    source_name,
    start_of,
)
from domainbert.config.pretrain import ARMS
from domainbert.core.artifact_types import replaced_token_detection
from domainbert.literature import smallest_published, too_small

if TYPE_CHECKING:
    from huggingface_hub import EvalResult

    from domainbert.config.domain import DomainConfig


def eval_results(cfg: DomainConfig, arm: str, scores: list[dict[str, Any]] | None) -> list[EvalResult]:
    """``model-index`` entries: each task's mean test score of ``arm`` over its seeds (report's results.json)."""
    from huggingface_hub import EvalResult

    out = []
    for row in scores or []:
        if row.get("model") != arm or row.get("mean") is None:
            continue
        task_type, task_name = TASK_TYPES[row["task_type"]]
        collapsed = f", {row['collapsed']} collapsed" if row.get("collapsed") else ""
        out.append(
            EvalResult(
                task_type=task_type,
                task_name=task_name,
                dataset_type=row["task"],
                dataset_name=row["task"],
                dataset_split="test",
                metric_type=row["metric"],
                metric_name=f"{row['metric']} (mean of {row['n_seeds']} seeds{collapsed})",
                metric_value=round(100 * row["mean"], 2),
            )
        )
    return out


def model_card(
    cfg: DomainConfig,
    arm: str,
    summary: dict[str, Any],
    scores: list[dict[str, Any]] | None = None,
    extension: dict[str, Any] | None = None,
) -> str:
    """README.md of an arm's model folder: Hub metadata, then data, budget and figures."""
    from huggingface_hub import ModelCard, ModelCardData

    results = eval_results(cfg, arm, scores)
    data = ModelCardData(
        base_model=None if ARMS[arm].from_scratch else base_model_id(cfg),
        datasets=dataset_ids(cfg) or None,
        language=list(cfg.language),
        license=cfg.hub.license,
        library_name="transformers",
        # a replaced-token detection discriminator has no trained MLM head: an encoder, not a fill-mask model
        pipeline_tag="feature-extraction" if replaced_token_detection(summary) else "fill-mask",
        tags=["domainbert", cfg.name, arm, *cfg.hub.tags],
        model_name=f"domainbert-{cfg.name}-{arm}" if results else None,
        eval_results=results or None,
    )
    lines = _arm_card_body(cfg, arm, summary) + _arm_card_extras(arm, results, extension)
    lines += ["![loss curve](loss_curve.png)", ""] + _arm_card_use(cfg, arm, summary)
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n" + "\n".join(lines)))


def _arm_card_body(cfg: DomainConfig, arm: str, p: dict[str, Any]) -> list[str]:
    """The arm card's title, data, budget and figures, from its pretraining summary ``p``."""
    own = cfg.pretrain.for_arm(arm)
    lines = [
        f"# domainbert {cfg.name} / {arm}",
        "",
        f"{cfg.description} Masked-language-model pretraining, arm **{arm}**, starting from "
        f"{start_of(cfg, arm, p.get('base_warmup'))}.",
        "",
        "## Data",
        "",
        f"In-domain corpus of the `{cfg.name}` domain (profile `{cfg.profile}`; sources: "
        f"{', '.join(source_name(s) for s in cfg.corpus.sources)}), train split, packed into sequences of "
        f"{', '.join(str(ph[2]) for ph in p['seq_len_phases'])} tokens"
        f"{' (documents concatenated, [SEP]-separated)' if p['packing'] else ' (one document per sequence)'}. "
        "Evaluation texts of the domain's tasks were removed from the corpus before training.",
        "",
        "## Budget",
        "",
        f"- token budget: {fmt_value(p['budget_tokens'])}; consumed: {fmt_value(p['tokens_consumed'])} in {fmt_value(p['steps'])} "
        "optimizer steps (every arm of a domain gets the same budget)",
        f"- objective: {_objective(p)}, dynamic masking "
        f"({'whole-word' if p['whole_word_mask'] else 'token-level'}), peak lr {p.get('lr', own.lr)}, "
        f"precision {p['precision']}, engine {p['engine']}, {p['world_size']} process(es)",
        # the arm's own schedules (arm_optim resolved), as plan prints them: a mask schedule is not one rate
        f"- schedules: {own.schedule_line()}",
        f"- parameters: {fmt_value(p['parameters']['total'])}, vocabulary: {fmt_value(p['vocab_size'])}",
        "",
        "## Figures",
        "",
        "| metric | before | after |",
        "|---|---|---|",
        f"| domain perplexity (validation) | {fmt_value(p['domain_perplexity_before'])} | {fmt_value(p['domain_perplexity'])} |",
        f"| general perplexity (forgetting) | {fmt_value(p['general_perplexity_before'])} | {fmt_value(p['general_perplexity'])} |",
        *(
            [
                f"| discriminator accuracy (validation) | {fmt_value(p.get('discriminator_accuracy_before'), 4)} | "
                f"{fmt_value(p.get('discriminator_accuracy'), 4)} |",
                f"| calling every token original (the accuracy's floor) | "
                f"{fmt_value(p.get('discriminator_floor_accuracy_before'), 4)} | "
                f"{fmt_value(p.get('discriminator_floor_accuracy'), 4)} |",
                "",
                "Replaced-token detection: the perplexities are its generator's (discarded after pretraining).",
            ]
            if replaced_token_detection(p)
            else []
        ),
        "",
        f"- final training loss: {fmt_value(p['final_loss'], 4)}"
        + (" (generator MLM + weighted detection loss)" if replaced_token_detection(p) else " (MLM)"),
        f"- real tokens/s: {fmt_value(p['real_tokens_per_s'], 0)}; real-token fraction: {fmt_value(p['real_token_fraction'], 3)}",
        f"- training FLOPs/token (est.): {fmt_value(p['flops_per_token'], 0)}; MFU: {fmt_value(p['mfu'], 4)}",
        f"- training wall time: {fmt_value(p['wall_seconds'], 1)} s",
        "",
        "Perplexities are MLM perplexities under each model's own tokenizer: compare an arm before and after "
        "training, not arms with different vocabularies.",
        "",
    ]
    return lines


def _objective(p: dict[str, Any]) -> str:
    if replaced_token_detection(p):
        return (
            f"replaced-token detection (ELECTRA / DeBERTa-v3: a {fmt_value(p.get('generator_layers'))}-layer generator "
            "sharing the token embeddings fills the masks, this encoder learns which tokens were replaced)"
        )
    return f"MLM{' + next-sentence prediction' if p.get('next_sentence_prediction') else ''}"


def _arm_card_extras(arm: str, results: list[EvalResult], extension: dict[str, Any] | None) -> list[str]:
    """The arm card's fine-tuning scores and, for the extended arm, its vocabulary extension."""
    lines: list[str] = []
    if results:
        lines += ["## Fine-tuning", "", "| task | metric | test score (mean over seeds) |", "|---|---|---|"]
        lines += [f"| {r.dataset_name} | {r.metric_name} | {r.metric_value:.2f} |" for r in results]
        lines += ["", "The domain's comparison report says how this compares with the base model and the floor.", ""]
    if arm == "extended" and extension:
        how = (
            f"set by vocab.extension.num_tokens, overriding the recommendation of "
            f"{extension.get('recommended_tokens')}"
            if extension.get("source") == "override"
            else "the number the vocabulary stage's recommendation gives"
        )
        lines += [
            "## Vocabulary extension",
            "",
            f"{extension['num_tokens']:,} domain tokens added to the base "
            f"vocabulary ({how}); new embeddings start as the mean of their base pieces'.",
            "",
        ]
    return lines


def _arm_card_use(cfg: DomainConfig, arm: str, p: dict[str, Any]) -> list[str]:
    """How to load the arm (the same lines for its folder and its Hub id), what it is for, and its limits."""
    tokens = p.get("tokens_consumed") or 0
    paper, published = smallest_published()
    rtd = replaced_token_detection(p)
    lines = _rtd_card_use(cfg, arm) if rtd else _mlm_card_use(cfg, arm)
    if too_small(tokens):
        lines += [
            f"**Budget warning:** {fmt_value(tokens)} pretraining tokens, {tokens / published:.1e} of {paper}'s "
            f"about {published:.1e}. At this budget the model is a test of the pipeline, not a model to use"
            + ("." if rtd else ": its predictions (fill-mask answers included) can be degenerate."),
            "",
        ]
    return lines


def _mlm_card_use(cfg: DomainConfig, arm: str) -> list[str]:
    """Use and limits of a masked-LM arm: fill-mask shows what it learnt, fine-tuning is what it is for."""
    return [
        "## Use",
        "",
        "```python",
        "from transformers import pipeline",
        "",
        f'fill = pipeline("fill-mask", model="PATH_OR_HUB_ID")  # this folder, or e.g. "your-org/domainbert-{cfg.name}-{arm}"',
        'print(fill(f"The {fill.tokenizer.mask_token} of the system was measured."))',
        "```",
        "",
        "`AutoModel.from_pretrained` gives the encoder to fine-tune (stock transformers classes, no remote code).",
        "",
        "## Intended use and limitations",
        "",
        f"An encoder for the `{cfg.name}` domain ({cfg.description.rstrip('.')}), to be fine-tuned "
        "on a downstream task; as a fill-mask model it only shows what pretraining taught it. It inherits the "
        "biases of its corpus and of the model it started from, and was evaluated only on the tasks above.",
        "",
    ]


def _rtd_card_use(cfg: DomainConfig, arm: str) -> list[str]:
    """Use and limits of a replaced-token detection discriminator: an encoder to fine-tune, no fill-mask."""
    return [
        "## Use",
        "",
        "```python",
        "from transformers import AutoModel, AutoTokenizer",
        "",
        f'name = "PATH_OR_HUB_ID"  # this folder, or e.g. "your-org/domainbert-{cfg.name}-{arm}"',
        "encoder, tokenizer = AutoModel.from_pretrained(name), AutoTokenizer.from_pretrained(name)",
        "```",
        "",
        "A discriminator, as ELECTRA and DeBERTa-v3 release theirs: its masked-LM head was never trained, so "
        "fill-mask answers are meaningless. Fine-tune it (stock transformers classes, no remote code).",
        "",
        "## Intended use and limitations",
        "",
        f"An encoder for the `{cfg.name}` domain ({cfg.description.rstrip('.')}), to be fine-tuned on a "
        "downstream task. It inherits the biases of its corpus and was evaluated only on the tasks above.",
        "",
    ]
