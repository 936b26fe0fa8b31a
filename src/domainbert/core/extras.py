"""Optional dependencies: ``require`` imports one or says, in one line, which extra installs it.

DeepSpeed (``[deepspeed]``), prefect-dask (``[dask]``), TensorBoard (``[tracking]``) and the offline demo
model (``[demo]``) are extras, so a user who asks for one of them without it installed gets the pip command,
not an ``ImportError`` traceback. This module imports nothing optional itself.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from domainbert.core.errors import DomainbertError


def require(module: str, extra: str, purpose: str) -> ModuleType:
    """Import ``module`` (e.g. ``deepspeed``) or raise a ``DomainbertError`` naming the extra to install."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        if exc.name is not None and module.split(".")[0] != exc.name.split(".")[0]:
            raise  # the package is there but one of its own imports is broken: that traceback is the news
        raise DomainbertError(
            f"{purpose} needs the '{module.split('.')[0]}' package, which is not installed: "
            f"pip install 'domainbert[{extra}]'"
        ) from None
