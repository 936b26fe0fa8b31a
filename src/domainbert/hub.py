"""Hub-ready cards and publishing: the model card of a pretrained arm, the dataset card of a corpus, ``push``
of an arm, the corpus or a kept fine-tuned model (``finetune/<model>/<task>/best``, ``finetune.save_models``).

Cards are built with ``huggingface_hub``'s ``ModelCardData`` / ``DatasetCardData`` so their metadata is what
the Hub parses: ``base_model``, ``datasets``, ``license``, ``language``, ``tags`` and, once the fine-tuning
results exist, a ``model-index`` with each task's mean test score over seeds. No card holds a local path:
sources are named by their Hub id, their source name or their file name. ``push`` uploads one model folder (or
the corpus) in a single commit with the card on disk (an arm's is refreshed with the scores whenever the report
is rendered), so what is pushed is what the folder shows; the token comes from the environment only
(``HF_TOKEN``), never from a file or the command line. This module does not train or evaluate anything.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from domainbert.cards.finetuned_and_corpus import dataset_card
from domainbert.core.artifacts import CARD
from domainbert.core.errors import DomainbertError

if TYPE_CHECKING:
    from domainbert.config.domain import DomainConfig
    from domainbert.core.paths import RunLayout

NOT_UPLOADED = {"_domainbert.json"}  # the run's integrity record: local paths and hashes, not for the Hub


def push_folder(
    folder: Path, repo: str, card: str, *, repo_type: str = "model", private: bool = False, dry_run: bool = False
) -> list[str]:
    """Upload ``folder`` (less ``NOT_UPLOADED``, with ``card`` as README.md) to ``repo`` in one commit.

    Returns:
        The paths in the repository that were (or, with ``dry_run``, would be) uploaded.

    Raises:
        DomainbertError: no ``HF_TOKEN`` in the environment, offline mode, or the Hub refused (one line).
    """
    files = sorted(
        p
        for p in folder.rglob("*")
        if p.is_file() and p.name not in NOT_UPLOADED and p.relative_to(folder).as_posix() != "README.md"
    )
    paths = ["README.md", *(p.relative_to(folder).as_posix() for p in files)]
    if dry_run:
        return paths
    token = os.environ.get("HF_TOKEN")
    if not token:
        raise DomainbertError("push needs a Hugging Face token in the HF_TOKEN environment variable")
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes"):
        raise DomainbertError("push cannot reach the Hub: HF_HUB_OFFLINE is set")
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi(token=token)
    ops = [CommitOperationAdd("README.md", card.encode())]
    ops += [CommitOperationAdd(p.relative_to(folder).as_posix(), str(p)) for p in files]
    try:
        api.create_repo(repo, repo_type=repo_type, private=private, exist_ok=True)
        api.create_commit(repo, ops, repo_type=repo_type, commit_message=f"domainbert: upload {folder.name}")
    except (HfHubHTTPError, OSError) as exc:
        raise DomainbertError(f"the Hub refused the upload to {repo}: {str(exc).splitlines()[0]}") from None
    return paths


@dataclass(frozen=True)
class PushPlan:
    """What ``push`` uploads: the folder, the card (as README.md) and the Hub repository type."""

    folder: Path
    card: str
    repo_type: str


def push_plan(cfg: DomainConfig, layout: RunLayout, what: str) -> PushPlan:
    """The upload of a finished arm's model folder (``what`` = the arm) or of the corpus (``what`` =
    ``corpus``) with the card on disk (an arm's carries the report's fine-tuning scores once it is rendered).

    Raises:
        DomainbertError: nothing finished to push, or a damaged folder.
    """
    import json

    from domainbert.core.artifacts import is_complete, verify_folder

    if what == "corpus":
        folder = Path(layout.corpus)
        if not is_complete(folder):
            raise DomainbertError("no finished corpus to push: run `domainbert corpus` first", file=folder)
        verify_folder(folder)
        card_path = folder / CARD
        card = (
            card_path.read_text(encoding="utf-8")
            if card_path.is_file()
            else dataset_card(cfg, json.loads((folder / "manifest.json").read_text()))
        )
        return PushPlan(folder, card, "dataset")
    if "/" in what:
        return _finetuned_plan(cfg, layout, what)
    arms = list(cfg.pretrain.arms)
    if what not in arms:
        raise DomainbertError(f"unknown arm {what!r}: push one of {', '.join(arms)} or 'corpus'", field="--arm")
    folder = Path(layout.pretrained_model(what))
    if not is_complete(folder):
        raise DomainbertError(
            f"arm {what!r} has no finished model to push: run `domainbert pretrain` first", file=folder
        )
    verify_folder(folder)
    card_path = folder / CARD
    reported = (Path(layout.report) / "results.json").is_file()
    # the card on disk is the pretraining stage's; once a report exists its scores go into the uploaded card
    card = (
        card_path.read_text(encoding="utf-8")
        if card_path.is_file() and not reported
        else _built_card(cfg, layout, what)
    )
    return PushPlan(folder, card, "model")


def _finetuned_plan(cfg: DomainConfig, layout: RunLayout, what: str) -> PushPlan:
    """The upload of the fine-tuned model kept for ``what`` = ``<model>/<task>`` (``best_model``), refused when
    it was made under another configuration than the one given."""
    from domainbert.core.artifacts import is_complete, verify_folder
    from domainbert.finetune.best_model import group_fingerprints, held_seed
    from domainbert.finetune.jobs import FROZEN_SUFFIX, Job, models_to_compare, task_config
    from domainbert.task_data.splits import task_data_hash

    model, _, task = what.partition("/")
    models = models_to_compare(cfg, layout)
    frozen = model.endswith(FROZEN_SUFFIX) and model not in models
    ref = models.get(model.removesuffix(FROZEN_SUFFIX) if frozen else model)
    if ref is None:
        raise DomainbertError(
            f"unknown model {model!r}: push one of {', '.join(models)} (as MODEL/TASK)", field="--finetuned"
        )
    task_cfg = task_config(cfg, task)
    folder = Path(layout.finetuned_model(model, task))
    if not is_complete(folder):
        raise DomainbertError(
            f"no fine-tuned model kept for {what}: run `domainbert finetune` (finetune.save_models: best or all)",
            file=folder,
        )
    verify_folder(folder)
    job = Job(model, ref, task, cfg.finetune.seeds[0], "frozen" if frozen else "finetune")
    if held_seed(layout, job, group_fingerprints(cfg, job, task_data_hash(task_cfg))) is None:
        raise DomainbertError(
            f"the model kept for {what} was fine-tuned under another configuration or base: rerun `domainbert "
            "finetune` with this one (or pass the overrides the run was made with)",
            file=folder,
        )
    return PushPlan(folder, (folder / CARD).read_text(encoding="utf-8"), "model")


def publish(
    cfg: DomainConfig, layout: RunLayout, what: str, repo: str, *, private: bool = False, dry_run: bool = False
) -> list[str]:
    """``push_plan`` uploaded to ``repo`` (or, with ``dry_run``, listed); the paths in the repository.

    Raises:
        DomainbertError: ``push_plan``'s and ``push_folder``'s errors.
    """
    plan = push_plan(cfg, layout, what)
    return push_folder(plan.folder, repo, plan.card, repo_type=plan.repo_type, private=private, dry_run=dry_run)


def _built_card(cfg: DomainConfig, layout: RunLayout, arm: str) -> str:
    """An arm's card built afresh: its summary and, once the report is rendered, the report's scores."""
    import json

    from domainbert.pretrain.outputs import model_card

    summary = json.loads((Path(layout.pretrain(arm)) / "summary.json").read_text())
    results = Path(layout.report) / "results.json"
    scores = json.loads(results.read_text())["scores"] if results.is_file() else None
    return model_card(cfg, arm, summary, scores)
