"""A cancel from the Prefect UI or API ends a flow run Cancelled, not Crashed.

To cancel a run, the UI sets it Cancelling and the worker's runner sends its process SIGTERM. While an arm
trains, domainbert's own SIGTERM handler (``core.signals``) holds the signal: the training checkpoints and
stops at its next step with ``StopRequested``, which Prefect's engine would record as a crash of every flow it
passes through (and, its own handler not being the one installed, Prefect's runner cannot tell the process
that a cancel is coming). ``@cancellable`` ends such a flow with a Cancelled state instead when a cancel was
asked for: the runner said so, or this flow run or one of its parents is Cancelling or Cancelled on the API. A
parent whose subflow ended Cancelled gets ``CancelledRun`` from the call and ends Cancelled the same
way; the outermost flow leaves through Prefect's ``Abort`` (``_end_outermost``). A stop
that no cancel asked for (Slurm, Kubernetes, Ctrl-C) is left as it is: the run is stopped, to be resumed.
Put it under ``@locked`` (whose wrapper Prefect reads a flow's parameter types through).

Tasks: ``@cancellable_task`` ends the task a cancel interrupted Cancelled (it returns the state) instead of
Crashed. A flow calling a task directly gets that state back as a value, not an exception, so it passes the
value through ``unless_cancelled``, which raises ``CancelledRun`` for it; a submitted task's future raises it by
itself. Prefect's task engine logs every final state other than Completed at ERROR, a Cancelled one
included; ``CancelledIsNotAnError`` lowers that one line to INFO. This module only translates.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar, cast

from domainbert.core import signals

if TYPE_CHECKING:
    from uuid import UUID

    from prefect.client.schemas.objects import FlowRun
    from prefect.states import State

P = ParamSpec("P")
R = TypeVar("R")
logger = logging.getLogger(__name__)
MAX_PARENTS = 16  # the pipeline nests its stage flows one level deep; the bound only guards against a cycle


def _flow_run() -> FlowRun | None:
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    return ctx.flow_run if ctx is not None else None


def _task_runs_flow_run_id() -> UUID | None:
    """The flow run of the task running here: a task on a Dask worker process has no flow run context."""
    from prefect.context import TaskRunContext

    ctx = TaskRunContext.get()
    return ctx.task_run.flow_run_id if ctx is not None else None


def _cancelling_on_the_api() -> bool:
    """Whether this flow run or one of its parents is Cancelling or Cancelled (what a cancel from the UI sets)."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.objects import StateType

    current = _flow_run()
    run_id = current.id if current is not None else _task_runs_flow_run_id()
    if run_id is None:
        return False
    try:
        with get_client(sync_client=True) as client:
            run = client.read_flow_run(run_id)
            for _ in range(MAX_PARENTS):
                if run.state is not None and run.state.type in (StateType.CANCELLING, StateType.CANCELLED):
                    return True
                if run.parent_task_run_id is None:
                    return False
                parent = client.read_task_run(run.parent_task_run_id).flow_run_id
                if parent is None:
                    return False
                run = client.read_flow_run(parent)
    except Exception:  # noqa: BLE001 - an API that cannot answer: the stop stays a stop
        logger.debug("could not read the flow run's state", exc_info=True)
    return False


def cancel_requested() -> bool:
    """Whether the stop under way is a cancel of this flow run (or of a run it belongs to)."""
    try:
        from prefect._internal.control_listener import get_intent
    except ImportError:
        get_intent = None  # type: ignore[assignment]  # a Prefect without the runner's control channel
    if get_intent is not None and get_intent() == "cancel":
        return True
    return _cancelling_on_the_api()


def cancellable(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` ending Cancelled when a cancel, not a bare stop, interrupted it (see the module docstring)."""
    from prefect.exceptions import CancelledRun

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from prefect.states import Cancelled

        try:
            return fn(*args, **kwargs)
        except (signals.StopRequested, CancelledRun) as exc:
            if not cancel_requested():
                raise
            message = str(exc) if isinstance(exc, CancelledRun) else f"cancelled ({exc})"  # a task's, as it said
            state: State[None] = Cancelled(message=message)
            _end_outermost(state)
            return cast(R, state)

    return wrapper


def cancellable_task(fn: Callable[P, R]) -> Callable[P, R]:
    """A task body whose run ends Cancelled when a cancel, not a bare stop, interrupted it (a bare stop stays a
    crash to be retried or resumed)."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from prefect.states import Cancelled

        try:
            return fn(*args, **kwargs)
        except signals.StopRequested as exc:
            if not cancel_requested():
                raise
            quiet_cancelled_tasks()  # here too: a Dask worker process never ran the flow's ``configured``
            return cast(R, Cancelled(message=f"cancelled ({exc})"))

    return wrapper


def unless_cancelled(value: R) -> R:
    """``value``, a directly called task's result; a Cancelled state (``cancellable_task``) raises ``CancelledRun``,
    so the calling flow stops there as ``@cancellable`` expects."""
    from prefect.exceptions import CancelledRun
    from prefect.states import State

    if isinstance(value, State) and value.is_cancelled():
        raise CancelledRun(value.message or "cancelled")
    return value


class CancelledIsNotAnError(logging.Filter):
    """Lowers the task engine's "Finished in state Cancelled" line from ERROR to INFO: the user asked for it."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno == logging.ERROR and str(record.msg).startswith("Finished in state Cancelled"):
            record.levelno, record.levelname = logging.INFO, "INFO"
        return True


def quiet_cancelled_tasks() -> None:
    """Install ``CancelledIsNotAnError`` on Prefect's task-run logger (once per process)."""
    target = logging.getLogger("prefect.task_runs")
    if not any(isinstance(f, CancelledIsNotAnError) for f in target.filters):
        target.addFilter(CancelledIsNotAnError())


def _end_outermost(state: State) -> None:
    """For the outermost flow run (no parent), record ``state`` and leave through Prefect's ``Abort``, which its
    engine ends with an INFO line and exit status 0; returned, the state would come back to the engine as a
    ``CancelledRun`` it logs as an unexpected error. Subflows return the state to their parent."""
    from prefect.client.orchestration import get_client
    from prefect.context import TaskRunContext
    from prefect.exceptions import Abort

    current = _flow_run()
    if current is None or current.parent_task_run_id is not None or TaskRunContext.get() is not None:
        return
    with get_client(sync_client=True) as client:
        client.set_flow_run_state(current.id, state, force=True)
    abort = Abort(state.message)
    abort.state = state  # type: ignore[attr-defined]  # the engine keeps it as the run's state
    raise abort
