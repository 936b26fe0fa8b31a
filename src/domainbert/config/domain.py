"""A domain: one YAML file validated into ``DomainConfig``.

A domain file holds the shared settings at its top level and a ``profiles:`` mapping (``offline`` and
``full`` at least). Loading deep-merges the chosen profile over the top level (mappings merge, lists and
scalars replace), then applies command-line overrides (``pretrain.max_steps=50``, values parsed as YAML),
then validates the result strictly. Errors name the file, the profile or override, and the field.
Relative paths are resolved against the YAML's folder (see ``domainbert.config.schema.PathStr``).
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import Field, ValidationError, model_validator

from domainbert.config.corpus import CorpusConfig
from domainbert.config.finetune import CompareConfig, FinetuneConfig
from domainbert.config.hub import HubConfig
from domainbert.config.pretrain import BaseModelConfig, PretrainConfig
from domainbert.config.schema import PLAIN_NAME, StrictModel
from domainbert.config.tracking import TrackingConfig
from domainbert.config.vocab import TokenizerConfig, VocabConfig
from domainbert.core.errors import ConfigError
from domainbert.core.paths import resolve_domain_file

DEFAULT_PROFILE = "offline"


class DomainConfig(StrictModel):
    """Everything a domain run needs, after the profile and overrides are applied."""

    name: str = Field(pattern=r"^[a-z0-9][a-z0-9_-]*$")
    """The domain's name: the run folder (runs/<name>) and the names of its models and report derive from it."""
    description: str
    """One line on the domain, shown in the report and on model cards."""
    language: list[str] = Field(min_length=1, description="ISO 639-1 codes of the corpus languages.")
    profile: str = Field(description="The profile this config was resolved with.")
    corpus: CorpusConfig
    tokenizer: TokenizerConfig
    vocab: VocabConfig
    base_model: BaseModelConfig
    pretrain: PretrainConfig
    finetune: FinetuneConfig
    compare: CompareConfig = CompareConfig()
    hub: HubConfig = HubConfig()
    tracking: TrackingConfig = TrackingConfig()

    @model_validator(mode="after")
    def _only_models_known(self) -> DomainConfig:
        only = self.finetune.only_models
        known = ["base", "original", *self.pretrain.arms, *self.finetune.extra_models]
        unknown = [m for m in only or [] if m not in known]
        if unknown:
            raise ValueError(f"finetune.only_models names {unknown}, not among the models {known}")
        return self


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """Mappings merge key by key; anything else in ``patch`` replaces what ``base`` had."""
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def apply_override(data: dict[str, Any], override: str) -> dict[str, Any]:
    """Apply one ``dotted.key=value`` override; the value is parsed as YAML (``50``, ``true``, ``[1, 2]``)."""
    if "=" not in override:
        raise ConfigError(f"override {override!r} is not of the form key.path=value")
    key, raw = override.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"override {override!r} has an empty key")
    try:
        value = load_yaml(raw)
    except yaml.YAMLError as exc:
        raise ConfigError(f"override {override!r}: value is not valid YAML ({exc})") from None
    patch: dict[str, Any] = {parts[-1]: value}
    for part in reversed(parts[:-1]):
        patch = {part: patch}
    return deep_merge(data, patch)


def _format_errors(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"] if not str(p).startswith("function-"))
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key (check the spelling)"
        elif err["type"] == "missing":
            msg = "required field is missing"
        elif err["type"] == "string_pattern_mismatch" and (err.get("ctx") or {}).get("pattern") == PLAIN_NAME:
            loc = loc.removesuffix(".[key]")  # a mapping's key: the key itself is named in loc
            msg = (
                f"{err['input']!r} is not a plain name: it becomes a folder of the run, so it takes letters, "
                "digits, '.', '_' and '-' only, not starting with '.' (no '/', no '..')"
            )
        lines.append(f"{loc}: {msg}")
    return "; ".join(lines)


class _NoAliasLoader(yaml.SafeLoader):
    """PyYAML's safe loader without aliases: a few nested aliases (a "billion laughs") expand to gigabytes once
    the mapping is merged, copied or validated, so a domain file or override writes every value out."""

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None,
                None,
                f"an alias (*{event.anchor}) is not allowed in a domain file: write the value out",
                event.start_mark,
            )
        return super().compose_node(parent, index)


def load_yaml(text: str) -> Any:
    """``yaml.safe_load`` without aliases (``_NoAliasLoader``), for domain files and overrides."""
    return yaml.load(text, Loader=_NoAliasLoader)  # noqa: S506 - a SafeLoader subclass


def read_domain_yaml(path: Path) -> dict[str, Any]:
    try:
        data = load_yaml(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"not UTF-8 text (byte {exc.object[exc.start]:#04x}); save the file as UTF-8", file=path, line=line
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror or exc}", file=path) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise ConfigError(
            f"invalid YAML: {getattr(exc, 'problem', exc)}", file=path, line=mark.line + 1 if mark else None
        ) from None
    if not isinstance(data, dict):
        raise ConfigError("a domain file must be a YAML mapping", file=path)
    return data


def load_domain(
    domain: str | Path, overrides: list[str] | tuple[str, ...] = (), profile: str = DEFAULT_PROFILE
) -> DomainConfig:
    """Load, merge and validate a domain.

    Args:
        domain: a domain name (``science``) or a path to a YAML file.
        overrides: ``dotted.key=value`` strings applied after the profile.
        profile: the profile to apply (``offline`` by default, ``full`` for the real data).

    Raises:
        ConfigError: naming the file, the profile or override, and the offending field.
    """
    path = resolve_domain_file(domain)
    data = read_domain_yaml(path)
    profiles = data.pop("profiles", None)
    if not isinstance(profiles, dict) or not profiles:
        raise ConfigError("a 'profiles:' mapping (with at least 'offline') is required", file=path, field="profiles")
    if profile not in profiles:
        raise ConfigError(
            f"unknown profile {profile!r}; this domain has: {', '.join(sorted(profiles))}", file=path, field="profiles"
        )
    patch = profiles[profile] or {}
    if not isinstance(patch, dict):
        raise ConfigError("a profile must be a mapping", file=path, field=f"profiles.{profile}")
    merged = deep_merge(data, patch)
    merged["profile"] = profile
    for override in overrides:
        merged = apply_override(merged, override)
    try:
        return DomainConfig.model_validate(merged, context={"base_dir": str(path.parent)})
    except ValidationError as exc:
        where = f"profile {profile!r}" + (f", overrides {list(overrides)}" if overrides else "")
        raise ConfigError(f"{_format_errors(exc)} ({where})", file=path) from None


def resolved_dict(cfg: StrictModel) -> dict[str, Any]:
    """The JSON form saved beside every artifact."""
    return cfg.model_dump(mode="json")


RESOLVED_CONFIG = "config.resolved.json"


def save_resolved_config(
    root: Path, domain: str | Path, profile: str, overrides: list[str], cfg: DomainConfig
) -> Path:
    """Write ``<run>/config.resolved.json`` (atomically): the YAML, profile and overrides a run was made with and
    the config they resolved to. ``domainbert report`` reads the profile and overrides back (``recorded_invocation``)."""
    from domainbert.core.artifacts import write_json_atomic

    path = Path(root) / RESOLVED_CONFIG
    write_json_atomic(
        path,
        {
            "domain_file": str(resolve_domain_file(domain)),
            "profile": profile,
            "overrides": list(overrides),
            "resolved_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "config": resolved_dict(cfg),
        },
    )
    return path


def recorded_invocation(root: Path) -> tuple[str, list[str]] | None:
    """(profile, overrides) the run in ``root`` was last made with, or None (no readable record)."""
    try:
        saved = json.loads((Path(root) / RESOLVED_CONFIG).read_text())
        return str(saved["profile"]), [str(o) for o in saved["overrides"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_run_config(cfg: DomainConfig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(resolved_dict(cfg), indent=2, sort_keys=True) + "\n")
    return path
