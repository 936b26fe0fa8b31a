"""Read back what the trackers stored, through their own file formats: TensorBoard event files and W&B's
offline run files (a LevelDB-style log of protobuf records after a 7-byte header)."""

from __future__ import annotations

import json
import struct
from collections.abc import Iterator
from pathlib import Path

BLOCK = 32768  # the log's block size: a record header never straddles a block
FULL, LAST = 1, 4


def wandb_records(path: Path) -> Iterator:
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", path
    pos, chunks = 7, []
    while pos + 7 <= len(data):
        left = BLOCK - pos % BLOCK
        if left < 7:  # padding at the end of a block
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if kind == 0:
            break
        chunks.append(data[pos + 7:pos + 7 + length])
        pos += 7 + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(b"".join(chunks))
            chunks = []
            yield record


def wandb_history(folder: Path) -> list[tuple[int, dict[str, float]]]:
    """(step, {key: value}) of every history row of the one offline W&B run under ``folder``."""
    files = sorted(folder.glob("wandb/offline-run-*/run-*.wandb"))
    rows = []
    for file in files:
        for record in wandb_records(file):
            if record.WhichOneof("record_type") == "history":
                row = {item.key or "/".join(item.nested_key): json.loads(item.value_json)
                       for item in record.history.item}
                rows.append((record.history.step.num, {k: v for k, v in row.items() if not k.startswith("_")}))
    return rows


def tensorboard_scalars(folder: Path) -> dict[str, list[tuple[int, float]]]:
    """Scalars as TensorBoard shows them (purged events left out)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}
