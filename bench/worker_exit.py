"""How long closing the local Dask workers of ``run --workers 2`` takes, with and without ``ExitWithoutTeardown``.

    .venv/bin/python bench/worker_exit.py [--rounds 5] [--quick]

Each round starts a local cluster of two worker processes as ``run --workers 2`` does
(``flows.local_workers``: ``starting``, then ``start`` for the ``domainbert`` contender only), has each worker
import what a fine-tuning run imports (torch, transformers, datasets), and times ``local_workers.close``, the
call a stopped or finished run waits on. ``distributed`` is the same cluster with distributed's own ending: the
interpreter's teardown after the worker closes. Prints and writes ``bench/results/worker-exit.json``: each
contender's seconds per round, their spread and the ratio of the medians. What it leaves out: the flow, Prefect's server, and
the cluster's start (the same for both).
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import emit, git_revision, machine_info, spread
from domainbert.flows import local_workers


def _import_what_a_run_imports() -> None:
    import datasets  # noqa: F401
    import torch  # noqa: F401
    import transformers.models.bert.modeling_bert  # noqa: F401


def close_seconds(without_teardown: bool) -> float:
    from distributed import Client, LocalCluster

    with local_workers.starting():
        cluster = LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)
        if without_teardown:
            local_workers.start(client)
    try:
        client.run(_import_what_a_run_imports)
        t0 = time.perf_counter()
        local_workers.close(client)
        return time.perf_counter() - t0
    finally:
        client.close()
        cluster.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one round (the test suite's check that it runs)")
    args = parser.parse_args()
    rounds = 1 if args.quick else args.rounds
    seconds: dict[str, list[float]] = {"distributed": [], "domainbert": []}
    for _ in range(rounds):  # alternated, so that a change in the machine's speed falls on both
        seconds["distributed"].append(round(close_seconds(without_teardown=False), 3))
        seconds["domainbert"].append(round(close_seconds(without_teardown=True), 3))
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    emit({"benchmark": "worker-exit", "revision": git_revision(), "machine": machine_info(), "rounds": rounds,
          "workers": 2, "seconds": seconds, "spread": {name: spread(v) for name, v in seconds.items()},
          "distributed_over_domainbert": round(medians["distributed"] / medians["domainbert"], 1)}, "worker-exit")


if __name__ == "__main__":
    main()
