"""A stop or a cancel ends the flow runs and the task it interrupted Cancelled, logged at INFO, not Crashed.

A stop is Ctrl-C (SIGINT, to the whole process group from a terminal), a scheduler's SIGTERM or SIGUSR1; a
cancel from the Prefect UI or API sets the run Cancelling and the worker's runner sends its process SIGTERM.
Prefect's engine would record either as a crash of every flow and task it passes through, at ERROR with a
"Crash detected!" line: its SIGTERM bridge raises ``TerminationSignal`` wherever the flow is, Ctrl-C raises
``KeyboardInterrupt``, and domainbert's own handler (``core.signals``, which holds the signal while an arm
trains so that it checkpoints) raises ``StopRequested``. So a stop is raised inside task bodies only
(``@cancellable_task`` runs them under ``signals.stoppable``); in a flow's body and in the engine's code around
it a signal is recorded (``@cancellable`` runs the body under ``signals.graceful_stop``, over Prefect's SIGTERM
bridge) and raised at the next flow body's or task's start or the flow's own wait (``stages.results_or_stop``),
where nothing of Prefect's own bookkeeping is cut short. Outside the bodies (the engine creating a flow run,
setting its states, finishing it) Prefect's bridge would raise on SIGTERM; ``stops_recorded_in_the_engine``
(around ``domainbert run``'s flow call) hands the signal to domainbert's handler there too. ``@cancellable`` ends a flow so interrupted with a Cancelled
state: "cancelled (...)" when a cancel was asked for (the runner said so, or this flow run or one of its
parents is Cancelling or Cancelled on the API), else the stop's own message, which says to rerun the same
command. A parent whose subflow ended Cancelled gets ``CancelledRun`` from the call and ends Cancelled the
same way; the outermost flow leaves through Prefect's ``Abort`` (``_end_outermost``), which the CLI turns into
its stop line and exit status. Put it under ``@locked`` (whose wrapper Prefect reads a flow's parameter types
through).

Tasks: ``@cancellable_task`` ends the task a stop or a cancel interrupted Cancelled (it returns the state)
instead of Crashed: no retry, the rerun resumes. A flow calling a task directly gets that state back as a
value, not an exception, so it passes the value through ``unless_cancelled``, which raises ``CancelledRun`` for
it; a submitted task's future raises it by itself. Prefect's task engine logs every final state other than
Completed at ERROR, a Cancelled one included; ``CancelledIsNotAnError`` lowers that one line to INFO. This
module only translates.
"""

from __future__ import annotations

import functools
import logging
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TYPE_CHECKING, ParamSpec, TypeVar, cast
from unittest import mock

from domainbert.core import signals
from domainbert.flows.user_errors import quiet_user_errors

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


def _stops() -> tuple[type[BaseException], ...]:
    """What a stop arrives as: domainbert's handler, Python's SIGINT default, Prefect's SIGTERM bridge."""
    from prefect.exceptions import TerminationSignal

    return (signals.StopRequested, KeyboardInterrupt, TerminationSignal)


def _stop_message(exc: BaseException) -> str | None:
    """What ended the run, when ``exc`` is a stop (noted for the command's other processes) or a cancel; None
    for any other failure, left to Prefect."""
    from prefect.exceptions import CancelledRun, TerminationSignal

    if isinstance(exc, TerminationSignal):
        signals.note(exc.signal)
    elif isinstance(exc, KeyboardInterrupt):
        signals.note(signal.SIGINT)
    elif isinstance(exc, signals.StopRequested):
        signals.note(exc.signum)
    cancel = cancel_requested()
    if isinstance(exc, CancelledRun):  # a subflow or task that ended Cancelled, as it said
        return str(exc) if cancel or signals.stop_requested() else None
    if cancel:
        return f"cancelled ({_stop_text(exc)})"
    return _stop_text(exc)


def _stop_text(exc: BaseException) -> str:
    if isinstance(exc, signals.StopRequested):
        return str(exc)
    return str(signals.StopRequested(signals.requested_signal() or signal.SIGTERM))


def cancellable(fn: Callable[P, R]) -> Callable[P, R]:
    """``fn`` under domainbert's signal handlers, ending Cancelled when a stop or a cancel interrupted it (see the
    module docstring)."""
    from prefect.exceptions import CancelledRun

    interrupted: tuple[type[BaseException], ...] = (*_stops(), CancelledRun)

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from prefect.states import Cancelled

        quiet_user_errors()  # a user error ends this run Failed in one line (``flows.user_errors``)
        try:
            with signals.graceful_stop():
                signals.check()  # a stop recorded while the engine set this flow run up
                return fn(*args, **kwargs)
        except interrupted as exc:
            message = _stop_message(exc)
            if message is None:
                raise
            state: State[None] = Cancelled(message=message)
            _end_outermost(state)
            return cast(R, state)

    return wrapper


@contextmanager
def stops_recorded_in_the_engine() -> Iterator[None]:
    """While open, a SIGTERM that reaches Prefect's flow engine outside a flow's body (creating the flow run,
    setting its states, finishing it) goes to domainbert's handler when one is installed, as SIGINT already
    does: recorded under ``graceful_stop`` (and raised at the next flow body's or task's start, or by the
    caller after the flow), instead of Prefect's ``TerminationSignal`` raised in the engine's own bookkeeping,
    which ends the run Crashed with a "Crash detected!" ERROR line. Without a domainbert handler the bridge
    raises ``TerminationSignal`` as Prefect's does (a runner's cancel)."""
    from prefect.exceptions import TerminationSignal
    from prefect.utilities import engine

    def bridge(signum: int, _frame: FrameType | None) -> None:
        if not signals.handling():
            raise TerminationSignal(signal=signum)
        signals.deliver(signum)

    # ``capture_sigterm`` installs the module's ``_prefect_sigterm_handler`` by name at each flow run's start.
    with mock.patch.object(engine, "_prefect_sigterm_handler", bridge):
        yield


def cancellable_task(fn: Callable[P, R]) -> Callable[P, R]:
    """A task body whose run ends Cancelled when a stop or a cancel interrupted it: not retried, and not a
    crash; the rerun resumes."""
    interrupted = _stops()

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        from prefect.states import Cancelled

        quiet_user_errors()  # here too: a Dask worker process runs no flow
        try:
            with signals.stoppable():
                return fn(*args, **kwargs)
        except interrupted as exc:
            quiet_cancelled_tasks()  # here too: a Dask worker process never ran the flow's ``configured``
            return cast(R, Cancelled(message=_stop_message(exc)))

    return wrapper


def unless_cancelled(value: R) -> R:
    """``value``, a directly called task's result; a Cancelled state (``cancellable_task``) raises ``CancelledRun``
    and a stop recorded meanwhile ``StopRequested``, so the calling flow stops there as ``@cancellable``
    expects."""
    from prefect.exceptions import CancelledRun
    from prefect.states import State

    if isinstance(value, State) and value.is_cancelled():
        raise CancelledRun(value.message or "cancelled")
    signals.check()  # a stop recorded in the engine's code after the task's body (or of a cached task)
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
