"""The base of every corpus component (``Component``) and the registry of their versioned names.

Components register themselves with ``@register`` where they are defined: the transforms and simple filters
in ``filters``, Gopher repetition in ``repetition``, language ID in ``langid_filter``. ``create`` and
``available`` import those modules first, so a name resolves wherever the lookup happens, and no component
module imports another (the registry sits below all of them). This module defines no component.
"""

from __future__ import annotations

from typing import ClassVar, Generic, Literal, TypeVar

from pydantic import ValidationError

from domainbert.config.corpus import FilterSpec
from domainbert.config.schema import StrictModel
from domainbert.core.errors import ConfigError

PLUGINS = ("domainbert.corpus.filters", "domainbert.corpus.repetition", "domainbert.corpus.langid_filter")


class NoOptions(StrictModel):
    """A component without options."""


# Covariant: a component only reads its options, so any component is a ``Component[StrictModel]`` and the
# pipeline and the registry hold components of every options model under that one type.
OptionsT = TypeVar("OptionsT", bound=StrictModel, covariant=True)


class Component(Generic[OptionsT]):
    """Base of transforms and filters. Subclasses set ``name``, ``kind`` and ``Options`` (also their type
    parameter, so ``self.options`` has the fields of their own options model)."""

    name: ClassVar[str]
    kind: ClassVar[Literal["transform", "filter"]]
    Options: ClassVar[type[StrictModel]] = NoOptions

    def __init__(self, options: OptionsT) -> None:
        self.options = options

    def transform(self, text: str) -> str:  # pragma: no cover - overridden by transforms
        raise NotImplementedError

    def filter(self, text: str) -> tuple[bool, str]:  # pragma: no cover - overridden by filters
        raise NotImplementedError

    def filter_batch(self, texts: list[str]) -> list[tuple[bool, str]]:
        """``filter`` over many texts; components whose work vectorises across documents override it."""
        return [self.filter(t) for t in texts]


_REGISTRY: dict[str, type[Component[StrictModel]]] = {}

ComponentT = TypeVar("ComponentT", bound=type[Component[StrictModel]])


def register(cls: ComponentT) -> ComponentT:
    """Class decorator adding a component to the registry under its versioned ``name``."""
    if cls.name in _REGISTRY:
        raise RuntimeError(f"component {cls.name} registered twice")
    _REGISTRY[cls.name] = cls
    return cls


def available() -> list[str]:
    """The registered component names."""
    _load_plugins()
    return sorted(_REGISTRY)


def _load_plugins() -> None:
    import importlib

    for module in PLUGINS:  # each registers its components on import
        importlib.import_module(module)


def create(spec: FilterSpec, where: str = "corpus.filters") -> Component[StrictModel]:
    """Instantiate one component from its YAML spec; unknown names and options are ConfigErrors."""
    _load_plugins()
    cls = _REGISTRY.get(spec.name)
    if cls is None:
        raise ConfigError(f"unknown filter {spec.name!r}; valid names: {', '.join(available())}", field=where)
    try:
        options = cls.Options.model_validate(spec.options)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = "unknown option" if err["type"] == "extra_forbidden" else err["msg"]
        raise ConfigError(f"{spec.name}: {msg}", field=f"{where}.options.{loc}") from None
    return cls(options)
