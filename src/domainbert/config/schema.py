"""Building blocks of the typed configs: a strict pydantic base and path fields resolved against the YAML.

Every config model derives from ``StrictModel`` (unknown keys are errors, as in llm-foundry and OLMo).
``PathStr`` fields given as relative paths are resolved against the folder of the domain YAML that
declared them, so a domain file can say ``../corpora/science/foldoc.jsonl.gz`` and work from any cwd.
Globs stay globs; URLs (``s3://``, ``hf://``, ...) are left alone.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, StringConstraints, ValidationInfo


class StrictModel(BaseModel):
    """A config model: unknown keys rejected, values validated on assignment, frozen after validation."""

    # A field's docstring (the string under it) is its description, as a Field(description=...) would be.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, frozen=True, use_attribute_docstrings=True)


def resolve_against_yaml(value: str, info: ValidationInfo) -> str:
    if "://" in value or os.path.isabs(value):
        return value
    base = (info.context or {}).get("base_dir") if info.context else None
    if base is None:
        return value
    return os.path.normpath(str(Path(base) / value))


PathStr = Annotated[str, AfterValidator(resolve_against_yaml)]
"""A local path or glob; relative values are resolved against the domain YAML's folder."""


def resolve_dotted_ref(value: str, info: ValidationInfo) -> str:
    """A model reference written ``./x`` or ``../x`` is a folder relative to the YAML; anything else (a hub id,
    ``package:...``, an absolute path) is left as written."""
    return resolve_against_yaml(value, info) if value.startswith(("./", "../")) else value


ModelRef = Annotated[str, AfterValidator(resolve_dotted_ref)]
"""A model reference: a hub id, ``package:<module>`` or a folder (``./`` and ``../`` relative to the YAML)."""


PLAIN_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"

PlainName = Annotated[str, StringConstraints(pattern=PLAIN_NAME)]
"""A name that becomes one folder of the run (a task, an extra model): letters, digits, ``.``, ``_`` and ``-``,
not starting with a dot, so that no name can climb out of the run folder (``../x``) or name an absolute path."""
