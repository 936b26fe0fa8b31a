"""The configuration reference (``docs/configuration.md``), generated from the pydantic models.

Every key of a domain YAML, section by section: its dotted path, type, default and description, as the models
declare them, so the reference cannot drift from what ``load_domain`` accepts (a test compares the file with
this module's output). ``python -m domainbert.config.reference docs/configuration.md`` rewrites it. Nested
models get a section of their own; lists of models (``corpus.sources``, ``finetune.tasks``) are documented by
their item's fields under ``key[]``. What it leaves out: profiles and overrides (docs/usage.md, "Domains").
"""

from __future__ import annotations

import sys
import types
import typing
from pathlib import Path
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from domainbert.config.domain import DomainConfig

HEADER = """# Configuration reference

Generated from the pydantic models in `src/domainbert/config/` by
`python -m domainbert.config.reference docs/configuration.md`; a test fails when this file is stale.
A domain YAML holds these keys at its top level and in `profiles.<name>` (deep-merged over the top level);
`dotted.key=value` overrides on the command line set them too. Unknown keys are errors. Paths are resolved
against the YAML's folder. `key[]` is an item of a list.
"""


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The config models an annotation holds (itself, list items, union members, dict values)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        out += _models_in(arg)
    return out


def _type_name(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _type_name(typing.get_args(annotation)[0])
    if origin is typing.Literal:
        return " \\| ".join(repr(a).replace("'", "`") for a in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(_type_name(a) for a in typing.get_args(annotation))
    if origin is not None:
        args = ", ".join(_type_name(a) for a in typing.get_args(annotation))
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "null"
    return getattr(annotation, "__name__", str(annotation))


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "see below"
    text = repr(value.model_dump() if isinstance(value, BaseModel) else value)
    return f"`{text}`" if len(text) <= 60 else f"`{text[:57]}...`"


def _rows(model: type[BaseModel], prefix: str, sections: list[tuple[str, type[BaseModel]]]) -> list[str]:
    rows = []
    for name, field in model.model_fields.items():
        key = f"{prefix}{name}"
        nested = _models_in(field.annotation)
        many = typing.get_origin(field.annotation) in (list, dict) or any(
            typing.get_origin(a) in (list, dict) for a in typing.get_args(field.annotation)
        )
        for sub in nested:
            sections.append((f"{key}[]" if many else key, sub))
        description = (field.description or "").replace("|", "\\|").replace("\n", " ")
        if nested and not description:
            description = "see " + ", ".join(f"`{sub.__name__}`" for sub in nested)
        rows.append(f"| `{key}` | {_type_name(field.annotation)} | {_default(field)} | {description} |")
    return rows


def render() -> str:
    """The whole reference as Markdown."""
    out = [HEADER]
    queue: list[tuple[str, type[BaseModel]]] = [("", DomainConfig)]
    seen: set[tuple[str, str]] = set()
    while queue:
        key, model = queue.pop(0)
        if (key, model.__name__) in seen:
            continue
        seen.add((key, model.__name__))
        found: list[tuple[str, type[BaseModel]]] = []
        title = f"`{key}`" if key else "top level"
        doc = " ".join((model.__doc__ or "").split())
        out += [
            f"## {title} ({model.__name__})",
            "",
            doc,
            "",
            "| key | type | default | description |",
            "| --- | --- | --- | --- |",
        ]
        out += _rows(model, f"{key}." if key else "", found)
        out.append("")
        queue += found
    return "\n".join(out).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else Path("docs/configuration.md")
    target.write_text(render(), encoding="utf-8")
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
