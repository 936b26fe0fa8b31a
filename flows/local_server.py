"""Prefect's temporary API server, bound to the command that started it.

Without ``PREFECT_API_URL`` Prefect starts a temporary server (``SubprocessASGIServer``: ``uvicorn`` in a child
process) the first time a client is needed, and stops it at exit. A SIGKILL of ``domainbert run`` skips
that exit, and the server (a couple of hundred MB) would run on with no parent. ``start_temporary_server``
starts it first, from the calling thread, as a child the kernel kills when this process dies
(``core.processes.die_with_parent``); Prefect's own calls find it running and reuse it (Prefect keeps one
instance per port, and ours is the instance for "any port"). With ``PREFECT_API_URL`` set nothing is started.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

from prefect.server.api import server as server_module
from prefect.server.api.server import SubprocessASGIServer
from prefect.settings import PREFECT_API_URL

from domainbert.core.processes import child_of


class _BoundPopen:
    """``subprocess`` as Prefect's server module sees it while it starts the server: each child it opens
    dies with this process. Anything else is the real module."""

    def __getattr__(self, name: str) -> Any:
        return getattr(subprocess, name)

    @staticmethod
    def Popen(*args: Any, **kwargs: Any) -> subprocess.Popen[Any]:  # noqa: N802 - stands in for subprocess.Popen
        popen: Any = subprocess.Popen  # the arguments are Prefect's, passed on untouched
        return popen(*args, preexec_fn=child_of(os.getpid()), **kwargs)


class _BoundServer(SubprocessASGIServer):
    def _run_uvicorn_command(self) -> subprocess.Popen[Any]:
        # Prefect builds the command and environment; only the Popen it calls is ours, for this one call.
        real = server_module.subprocess
        server_module.subprocess = _BoundPopen()  # type: ignore[assignment]
        try:
            return super()._run_uvicorn_command()
        finally:
            server_module.subprocess = real


def start_temporary_server() -> str | None:
    """Start the temporary server bound to this process unless an API is configured; its API URL, or None.

    Call it from a thread that lives as long as the run (the main thread): the kernel kills the server when
    the thread that started it ends."""
    if PREFECT_API_URL.value():
        return None
    server = _BoundServer()
    server.start()
    return server.api_url
