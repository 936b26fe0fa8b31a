"""Where things live: the project root, the domain YAMLs and the layout of a run directory.

``RunLayout`` is the contract between stages: each stage writes only under its own folder and reads the
folders of the stages before it from here, never from paths of its own making.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from domainbert.core.errors import ConfigError


def project_root() -> Path:
    """The folder holding ``domains/`` and ``corpora/``.

    The current directory when it has a ``domains/`` folder (a checkout, or a project of one's own: its YAMLs
    are the ones being edited, whatever the environment says); else ``DOMAINBERT_HOME`` (a worker started
    anywhere, the Docker image's ``/app``); else the source checkout this package was installed from (editable
    or not, as long as ``domains/`` sits two levels above ``src/domainbert``); else the current directory.
    Every command logs the domain file it read.
    """
    if (Path.cwd() / "domains").is_dir():
        return Path.cwd().resolve()
    env = os.environ.get("DOMAINBERT_HOME")
    if env:
        return Path(env).resolve()
    checkout = Path(__file__).resolve().parents[3]  # src/domainbert/core/paths.py
    if (checkout / "domains").is_dir():
        return checkout
    return Path.cwd()


def machine_cache() -> Path:
    """This machine's cache of things every run may reuse (``$XDG_CACHE_HOME/domainbert``, else
    ``~/.cache/domainbert``): derived tables and models, each under a name taken from its content."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "domainbert"


def domains_dir() -> Path:
    return project_root() / "domains"


def available_domains() -> list[str]:
    return sorted(p.stem for p in domains_dir().glob("*.yaml"))


def resolve_domain_file(domain: str | Path) -> Path:
    """A domain name (``science``) or a YAML path -> the YAML file; unknown names list the known ones."""
    text = str(domain)
    if text.endswith((".yaml", ".yml")) or os.sep in text:
        path = Path(text)
        if not path.is_file():
            raise ConfigError("domain file not found", file=path)
        return path.resolve()
    path = domains_dir() / f"{text}.yaml"
    if not path.is_file():
        known = ", ".join(available_domains()) or "(none)"
        raise ConfigError(f"unknown domain {text!r}; known domains: {known} (or pass a path to a YAML file)")
    return path


REPLICATE_SEP = "@r"  # pretraining replicate r >= 2 of an arm lives in pretrain/<arm>@r<r> (and finetunes as such)
SHARED_PRETRAIN = ("base-warmup",)  # folders under pretrain/ that every replicate shares


@dataclass(frozen=True)
class RunLayout:
    """Folders of one domain run (default ``runs/<domain>/``); ``replicate``: which pretraining replicate of the
    arms ``pretrain(arm)`` names (1: the arm's own folder, r: ``<arm>@r<r>``; the warm-up is shared)."""

    root: Path
    replicate: int = 1

    def for_replicate(self, replicate: int) -> RunLayout:
        return RunLayout(self.root, replicate)

    @property
    def corpus(self) -> Path:
        return self.root / "corpus"

    @property
    def vocab(self) -> Path:
        return self.root / "vocab"

    @property
    def tokenizer(self) -> Path:
        """The domain tokenizer (a Hugging Face tokenizer folder)."""
        return self.vocab / "tokenizer"

    @property
    def extended_model(self) -> Path:
        """Base model + tokenizer with the domain tokens added (input of the ``extended`` arm)."""
        return self.vocab / "extended-model"

    def pretrain(self, arm: str) -> Path:
        if self.replicate > 1 and arm not in SHARED_PRETRAIN and REPLICATE_SEP not in arm:
            arm = f"{arm}{REPLICATE_SEP}{self.replicate}"
        return self.root / "pretrain" / arm

    def pretrained_model(self, arm: str) -> Path:
        """The Hugging Face model folder an arm ends with."""
        return self.pretrain(arm) / "model"

    def finetune(self, model: str, task: str, seed: int) -> Path:
        return self.root / "finetune" / model / task / f"seed-{seed}"

    def finetuned_model(self, model: str, task: str) -> Path:
        """The fine-tuned model kept for a model and task: its best seed on validation (``finetune.save_models``)."""
        return self.root / "finetune" / model / task / "best"

    @property
    def report(self) -> Path:
        return self.root / "report"


def default_run_dir(domain_name: str) -> Path:
    return Path("runs") / domain_name
