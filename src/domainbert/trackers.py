"""Where training metrics go besides ``metrics.jsonl``: TensorBoard, MLflow and Weights & Biases.

``tracking.report_to`` in a domain file lists the backends (TensorBoard by default). Pretraining sends one
run per arm, fine-tuning one run per model x task x seed, each with its settings as parameters and tags
naming the domain, the stage and the result fingerprint. Only rank 0 tracks.

A resumed run replays the steps after its last checkpoint, and an external tracker cannot take back a
point it was sent. So each run folder keeps ``tracking.json`` (the backends' run ids and the last step sent
under that fingerprint): a rerun continues the same MLflow and W&B runs and skips what the interrupted
process already sent. The replay repeats the original (seeded masks, data position and RNG in the
checkpoint; the resume test finds the same losses to 1e-4), so the skipped points are the ones the tracker
holds. TensorBoard instead hides the
replayed events with ``purge_step``.

A backend that fails when the run starts (not installed, an unusable tracking URI) stops the run with one
line naming the setting; one that fails mid-run is switched off with a warning, so a lost tracking server
never costs the training. This module leaves out model files (the run folder and ``domainbert push`` hold
them) and system metrics.
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Literal, Protocol

from domainbert.config.tracking import TrackingConfig
from domainbert.core.errors import DomainbertError
from domainbert.core.extras import require

log = logging.getLogger(__name__)
STATE_FILE = "tracking.json"
MLFLOW_PARAM_CHARS = 6000  # MLflow refuses longer parameter values
MLFLOW_BATCH = 100  # MLflow's limit on parameters per log_batch call
Status = Literal["FINISHED", "FAILED", "KILLED"]  # how a run ended, in MLflow's words


class Sink(Protocol):
    name: str

    def log(self, step: int, metrics: dict[str, float]) -> None: ...

    def close(self, status: Status) -> None: ...


class TensorBoardSink:
    name = "tensorboard"

    def __init__(self, folder: Path, purge_step: int | None, params: dict[str, str] | None = None) -> None:
        require("tensorboard", "tracking", "tracking.report_to: tensorboard")
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder / "tensorboard"), purge_step=purge_step)
        self.params = params or {}
        self.last: dict[str, float] = {}

    def log(self, step: int, metrics: dict[str, float]) -> None:
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
            self.last[key] = value

    def close(self, status: Status) -> None:
        # The HParams tab: the run's settings against its final evaluation scores (a finished run only).
        final = {k: v for k, v in self.last.items() if k.split("/")[0] in ("eval", "validation", "test")}
        if status == "FINISHED" and final and self.params:
            self.writer.add_hparams(self.params, final, run_name="hparams")
        self.writer.close()


@contextlib.contextmanager
def _store_lock(uri: str) -> Iterator[None]:
    """Serialise access to a local SQLite store: fine-tuning workers share it, and two processes creating
    its tables or the same experiment at once would collide. The lock is an flock on the database file itself
    (SQLite's own locks are POSIX record locks, which an flock does not touch), so no lock file is left."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    db = Path(uri[len("sqlite:///") :])
    db.parent.mkdir(parents=True, exist_ok=True)
    with open(db, "a") as handle:  # an empty file is a valid, empty SQLite database
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class MlflowSink:
    name = "mlflow"

    def __init__(
        self,
        uri: str,
        experiment: str,
        run_name: str,
        run_id: str | None,
        params: dict[str, str],
        tags: dict[str, str],
        artifact_root: Path | None = None,
    ) -> None:
        require("mlflow", "tracking", "tracking.report_to: mlflow")
        from mlflow import MlflowClient
        from mlflow.entities import Param

        self.uri = uri
        with _store_lock(uri):
            self.client = MlflowClient(tracking_uri=uri)
            found = self.client.get_experiment_by_name(experiment)
            # A local store keeps its artifacts beside it in the run folder (MLflow's default is ./mlruns of
            # whatever directory the command ran in).
            location = artifact_root.resolve().as_uri() if artifact_root is not None else None
            experiment_id = (
                found.experiment_id if found else self.client.create_experiment(experiment, artifact_location=location)
            )
            if run_id is None:
                run_id = self.client.create_run(experiment_id, run_name=run_name, tags=tags).info.run_id
                items = [Param(k, v[:MLFLOW_PARAM_CHARS]) for k, v in params.items()]
                for i in range(0, len(items), MLFLOW_BATCH):
                    self.client.log_batch(run_id, params=items[i : i + MLFLOW_BATCH])
            else:
                self.client.update_run(run_id, status="RUNNING")
        self.run_id = run_id

    def log(self, step: int, metrics: dict[str, float]) -> None:
        from mlflow.entities import Metric

        now = int(time.time() * 1000)
        with _store_lock(self.uri):
            self.client.log_batch(self.run_id, metrics=[Metric(k, v, now, step) for k, v in metrics.items()])

    def log_artifacts(self, paths: list[Path]) -> None:
        for path in paths:
            self.client.log_artifact(self.run_id, str(path))

    def close(self, status: Status) -> None:
        with _store_lock(self.uri):
            self.client.set_terminated(self.run_id, status=status)


class WandbSink:
    name = "wandb"

    def __init__(
        self,
        folder: Path,
        project: str,
        entity: str | None,
        mode: str,
        run_name: str,
        run_id: str | None,
        params: dict[str, str],
        tags: dict[str, str],
    ) -> None:
        wandb = require("wandb", "tracking", "tracking.report_to: wandb")
        # W&B tags are short labels (64 characters at most): the fingerprint goes with the config instead.
        labels = [f"{k.removeprefix('domainbert.')}:{v}" for k, v in tags.items()]
        self.run = wandb.init(
            project=project,
            entity=entity,
            name=run_name,
            id=run_id,
            resume="allow",
            dir=str(folder),
            mode=mode,
            config={**params, **tags},
            tags=[label for label in labels if len(label) <= 64],
            reinit="create_new",
        )
        self.run_id = self.run.id

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def close(self, status: Status) -> None:
        self.run.finish(exit_code={"FINISHED": 0, "FAILED": 1, "KILLED": 143}[status])


def _installed(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def flat_params(data: dict[str, Any], prefix: str = "") -> dict[str, str]:
    """A nested settings dict as ``a.b.c`` -> string, the form MLflow and W&B show as parameters."""
    out: dict[str, str] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            out.update(flat_params(value, f"{name}."))
        else:
            out[name] = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return out


class Tracker:
    """The backends of one run (rank 0). ``log`` takes ``{name: value}`` at a step, dropping non-numbers."""

    def __init__(
        self,
        cfg: TrackingConfig,
        *,
        folder: Path,
        store_root: Path,
        domain: str,
        run_name: str,
        fingerprint: str,
        params: dict[str, Any],
        tags: dict[str, str],
        resume_step: int | None,
    ) -> None:
        self.folder = folder
        self.fingerprint = fingerprint
        folder.mkdir(parents=True, exist_ok=True)
        previous = self._read_state()
        ids = previous.get("run_ids", {}) if previous.get("fingerprint") == fingerprint else {}
        # Points up to this step were sent by an earlier process of this run; the rerun replays them.
        self.skip_through = previous.get("sent_step", -1) if ids else -1
        self.sent_step = self.skip_through
        flat = flat_params(params)
        tags = {"domainbert.domain": domain, "domainbert.fingerprint": fingerprint, **tags}
        experiment = cfg.experiment or f"domainbert-{domain}"
        self.sinks: list[Sink] = []
        for backend in cfg.report_to:
            if backend == "tensorboard" and "report_to" not in cfg.model_fields_set and not _installed("tensorboard"):
                log.info("TensorBoard is not installed (pip install 'domainbert[tracking]'): metrics.jsonl only")
                continue  # the default asks for TensorBoard only where it is there; a listed backend must be
            try:
                self.sinks.append(
                    self._open(
                        backend, cfg, store_root, experiment, run_name, ids.get(backend), flat, tags, resume_step
                    )
                )
            except DomainbertError:
                raise
            except Exception as exc:  # noqa: BLE001 - any backend failure becomes one line naming the setting
                self.close("FAILED")
                raise DomainbertError(
                    f"cannot start {backend} tracking: {type(exc).__name__}: {exc}", field="tracking.report_to"
                ) from None
        self._write_state()

    def _open(
        self,
        backend: str,
        cfg: TrackingConfig,
        store_root: Path,
        experiment: str,
        run_name: str,
        run_id: str | None,
        params: dict[str, str],
        tags: dict[str, str],
        resume_step: int | None,
    ) -> Sink:
        if backend == "tensorboard":
            # Resumed from step N: hide the events after N (logged again as they are replayed); a fresh start
            # hides every earlier event.
            return TensorBoardSink(self.folder, resume_step + 1 if resume_step is not None else 0, params)
        if backend == "mlflow":
            remote = cfg.mlflow_tracking_uri or os.environ.get("MLFLOW_TRACKING_URI")
            uri = remote or f"sqlite:///{(store_root / 'mlflow.db').resolve()}"
            # A store on this machine keeps its artifacts beside it (the run's, or the user's SQLite file), never
            # in MLflow's default ./mlruns of whatever directory the command ran in; a server keeps its own.
            local_db = uri.removeprefix("sqlite:///") if uri.startswith("sqlite:///") else None
            artifacts = Path(local_db).parent / "mlartifacts" if local_db else None
            return MlflowSink(uri, experiment, run_name, run_id, params, tags, artifacts)
        mode = cfg.wandb_mode or os.environ.get("WANDB_MODE") or "online"
        return WandbSink(self.folder, experiment, cfg.wandb_entity, mode, run_name, run_id, params, tags)

    def _read_state(self) -> dict[str, Any]:
        try:
            return json.loads((self.folder / STATE_FILE).read_text())
        except (OSError, ValueError):
            return {}

    def _write_state(self) -> None:
        ids = {s.name: s.run_id for s in self.sinks if hasattr(s, "run_id")}
        tmp = self.folder / f".{STATE_FILE}.tmp"
        tmp.write_text(json.dumps({"fingerprint": self.fingerprint, "run_ids": ids, "sent_step": self.sent_step}))
        os.replace(tmp, self.folder / STATE_FILE)

    def log(self, step: int, metrics: dict[str, Any]) -> None:
        values = {
            k: float(v)
            for k, v in metrics.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
        }
        if not values:
            return
        for sink in list(self.sinks):
            # TensorBoard purged the replayed steps, so it takes them again; the others already hold them.
            if isinstance(sink, TensorBoardSink) or step > self.skip_through:
                try:
                    sink.log(step, values)
                except Exception as exc:  # noqa: BLE001 - a lost tracker must not cost the training
                    log.warning(
                        "%s tracking failed at step %d (%s: %s); it is off for the rest of this run",
                        sink.name,
                        step,
                        type(exc).__name__,
                        exc,
                    )
                    self.sinks.remove(sink)
        if step > self.sent_step:
            self.sent_step = step
            self._write_state()

    def log_artifacts(self, paths: list[Path]) -> None:
        """Files to keep with the run (summary, card, report) in the backends that store files (MLflow)."""
        present = [p for p in paths if Path(p).is_file()]
        for sink in list(self.sinks):
            if present and hasattr(sink, "log_artifacts"):
                try:
                    sink.log_artifacts(present)
                except Exception as exc:  # noqa: BLE001 - a lost tracker must not cost the results
                    log.warning("%s artifact upload failed (%s: %s)", sink.name, type(exc).__name__, exc)

    def close(self, status: Status = "FINISHED") -> None:
        for sink in self.sinks:
            try:
                sink.close(status)
            except Exception as exc:  # noqa: BLE001
                log.warning("closing %s tracking failed (%s: %s)", sink.name, type(exc).__name__, exc)
        self.sinks = []


class MetricsLog:
    """``metrics.jsonl`` plus the configured trackers, for rank 0 (other ranks pass ``enabled=False``).

    Each record gets ``time`` (UTC, ISO 8601); the trackers see its numbers as ``<kind>/<name>``. On resume
    from step N the records after N are dropped from metrics.jsonl, so the replayed steps are not there twice;
    a fresh start empties it.
    """

    def __init__(
        self, folder: Path, enabled: bool, resume_step: int | None, tracker: Callable[[], Tracker] | None = None
    ) -> None:
        self.enabled = enabled
        self.path = folder / "metrics.jsonl"
        self.tracker: Tracker | None = None
        if not enabled:
            return
        folder.mkdir(parents=True, exist_ok=True)
        kept = []
        if resume_step is not None and self.path.is_file():
            kept = [
                line
                for line in self.path.read_text().splitlines()
                if line.strip() and json.loads(line).get("step", 0) <= resume_step
            ]
        self.path.write_text("".join(line + "\n" for line in kept))
        self.tracker = tracker() if tracker else None

    def write(self, record: dict[str, Any]) -> None:
        if not self.enabled:
            return
        record = {**record, "time": datetime.datetime.now(datetime.UTC).isoformat(timespec="milliseconds")}
        with self.path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")
        if self.tracker:
            kind = record.get("kind", "train")
            self.tracker.log(
                record["step"], {f"{kind}/{k}": v for k, v in record.items() if k not in ("step", "kind")}
            )

    def close(self, status: Status = "FINISHED", artifacts: list[Path] | None = None) -> None:
        if self.tracker:
            if artifacts:
                self.tracker.log_artifacts(artifacts)
            self.tracker.close(status)
            self.tracker = None
