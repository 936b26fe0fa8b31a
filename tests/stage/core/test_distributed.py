"""core/distributed.py: the weights digest and the check that every rank's replica ends equal, on a real gloo
group of two processes on this machine's loopback."""

from __future__ import annotations

import os
import socket

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from domainbert.core.distributed import replica_digests, weights_digest


def _weights() -> dict[str, torch.Tensor]:
    torch.manual_seed(0)
    return {"b.bias": torch.randn(4), "a.weight": torch.randn(3, 4), "step": torch.tensor(7)}


def test_digest_reads_every_name_value_and_dtype():
    weights = _weights()
    digest = weights_digest(weights)
    assert digest == weights_digest(dict(reversed(list(weights.items()))))  # name order, not insertion order
    assert len(digest) == 64 and replica_digests(weights) == [digest]  # outside a group: this process alone
    nudged = {**weights, "a.weight": weights["a.weight"].clone()}
    nudged["a.weight"][2, 3] = torch.nextafter(nudged["a.weight"][2, 3], torch.tensor(1.0))  # one ulp
    renamed = {("c.bias" if k == "b.bias" else k): v for k, v in weights.items()}
    as_double = {**weights, "b.bias": weights["b.bias"].double()}
    reshaped = {**weights, "a.weight": weights["a.weight"].reshape(4, 3)}
    others = [weights_digest(w) for w in (nudged, renamed, as_double, reshaped)]
    assert len({digest, *others}) == 5


def _rank(rank: int, port: int, results: dict) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    try:
        weights = _weights()
        results[("equal", rank)] = replica_digests(weights)
        if rank == 1:
            weights["a.weight"][0, 0] += 1e-6  # a replica that drifted
        try:
            results[("drifted", rank)] = replica_digests(weights)
        except RuntimeError as exc:
            results[("drifted", rank)] = str(exc)
    finally:
        dist.destroy_process_group()


def test_replicas_of_two_ranks():
    """Equal replicas: each rank gets both digests, in rank order. One drifted: both ranks raise, naming both."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with mp.Manager() as manager:
        results = manager.dict()
        mp.spawn(_rank, args=(port, results), nprocs=2, join=True)
        got = dict(results)
    alone = weights_digest(_weights())
    assert got[("equal", 0)] == got[("equal", 1)] == [alone, alone]
    drifted = [got[("drifted", 0)], got[("drifted", 1)]]
    assert all(isinstance(v, str) and "the ranks' weights differ" in v and alone in v for v in drifted), drifted
