"""Print the image's requirements, one per line: pyproject's dependencies and the extras the Docker image offers
(deepspeed, dask, tracking, demo), less torch, which the Dockerfile installs from a wheel index of its own.

Reads pyproject.toml only, so the Dockerfile installs every dependency before it copies the sources.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

EXTRAS = ("deepspeed", "dask", "tracking", "demo")


def requirements(pyproject: Path) -> list[str]:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    wanted = project["dependencies"] + [d for name in EXTRAS for d in extras[name]]
    return [d for d in wanted if name_of(d) != "torch"]


def name_of(requirement: str) -> str:
    """The distribution name of a requirement string, lowercased: 'torch>=2.4' -> 'torch'."""
    return re.split(r"[\s<>=!~;\[(@]", requirement.strip(), maxsplit=1)[0].lower()


if __name__ == "__main__":
    print("\n".join(requirements(Path(sys.argv[1] if len(sys.argv) > 1 else "pyproject.toml"))))
