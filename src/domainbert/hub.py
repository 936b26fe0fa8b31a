"""Hub-ready cards and publishing: the model card of a pretrained arm, the dataset card of a corpus, ``push``,
and the card of a fine-tuned run's saved model (``finetune.save_models``).

Cards are built with ``huggingface_hub``'s ``ModelCardData`` / ``DatasetCardData`` so their metadata is what
the Hub parses: ``base_model``, ``datasets``, ``license``, ``language``, ``tags`` and, once the fine-tuning
results exist, a ``model-index`` with each task's mean test score over seeds. No card holds a local path:
sources are named by their Hub id, their source name or their file name. ``push`` uploads one model folder (or
the corpus) in a single commit with a freshly built card; the token comes from the environment only
(``HF_TOKEN``), never from a file or the command line. This module does not train or evaluate anything.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from domainbert.core.errors import DomainbertError
from domainbert.services.cards import dataset_card, model_card

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


def publish(
    cfg: DomainConfig, layout: RunLayout, what: str, repo: str, *, private: bool = False, dry_run: bool = False
) -> list[str]:
    """Push a finished arm's model folder (``what`` = the arm) or the corpus (``what`` = ``corpus``) with a
    freshly built card: an arm's carries the fine-tuning scores of the run's report when it has been rendered.

    Raises:
        DomainbertError: nothing finished to push, a damaged folder, or ``push_folder``'s errors.
    """
    import json

    from domainbert.core.artifacts import is_complete, verify_folder

    if what == "corpus":
        folder = Path(layout.corpus)
        if not is_complete(folder):
            raise DomainbertError("no finished corpus to push: run `domainbert corpus` first", file=folder)
        verify_folder(folder)
        card = dataset_card(cfg, json.loads((folder / "manifest.json").read_text()))
        return push_folder(folder, repo, card, repo_type="dataset", private=private, dry_run=dry_run)
    arms = list(cfg.pretrain.arms)
    if what not in arms:
        raise DomainbertError(f"unknown arm {what!r}: push one of {', '.join(arms)} or 'corpus'", field="--arm")
    folder = Path(layout.pretrained_model(what))
    if not is_complete(folder):
        raise DomainbertError(
            f"arm {what!r} has no finished model to push: run `domainbert pretrain` first", file=folder
        )
    verify_folder(folder)
    summary = json.loads((Path(layout.pretrain(what)) / "summary.json").read_text())
    results = Path(layout.report) / "results.json"
    scores = json.loads(results.read_text())["scores"] if results.is_file() else None
    ext = Path(layout.extended_model) / "extension.json"
    extension = json.loads(ext.read_text()) if what == "extended" and ext.is_file() else None
    card = model_card(cfg, what, summary, scores, extension)
    return push_folder(folder, repo, card, private=private, dry_run=dry_run)
