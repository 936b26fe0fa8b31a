"""Counting the places a training step would make the host wait for the device, on a CPU-only machine.

Every host read of a device scalar (``.item()``, ``float(t)``, ``int(t)``, ``bool(t)``, an ``if`` on a tensor)
goes through ``aten._local_scalar_dense``; ``.tolist()``, ``.numpy()`` and ``.cpu()`` read a whole tensor; a
boolean mask used as an index (``aten.nonzero``, ``masked_select``, ``index`` with a bool index) gives a shape
only the device knows. On a GPU each of these waits for every kernel queued before it. On the CPU nothing
waits, but the same calls happen, so ``HostReads`` records them (a ``TorchDispatchMode`` for the operators, a
``TorchFunctionMode`` for the tensor methods) with the step they happen in.

Reads inside other libraries that a step cannot avoid (``KNOWN``) are counted under the name ``known``, so a test
can hold them to what is expected and still fail on any other.

Host-side batch building (numpy streams, masking with a CPU generator) works on host tensors by design and is
left out by ``HostReads.host_side``, which pauses the count inside the functions it wraps.
"""

from __future__ import annotations

import functools
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

# Reads in other libraries that a step cannot avoid, by the function that makes them (see the trainers' docs).
KNOWN = {
    # transformers' SDPA mask: with an attention mask (a padded batch) it asks ``padding_mask.all()`` on the device
    "_ignore_bidirectional_mask_sdpa": "transformers' SDPA padding-mask check",
    # transformers' one-time padding warning, asked by models (DeBERTa-v2) called without an attention mask
    "warn_if_padding_and_no_attention_mask": "transformers' padding warning",
}
READ_METHODS = {"tolist", "numpy", "cpu"}
SHAPE_OPS = {"aten.nonzero.default", "aten.masked_select.default"}
INDEX_OPS = {"aten.index.Tensor", "aten.index_put.default", "aten.index_put_.default", "aten._index_put_impl_.default"}


def _bool_index(args: tuple[Any, ...]) -> bool:
    indices = args[1] if len(args) > 1 else []
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices or [])


class HostReads:
    """``with reads:`` records host reads and data-dependent shapes per ``reads.step`` (the caller sets it)."""

    def __init__(self) -> None:
        self.step: Any = None
        self.counts: Counter[tuple[Any, str]] = Counter()
        self.where: dict[tuple[Any, str], str] = {}  # the first occurrence's innermost project frames
        self.paused = 0
        outer = self

        class _Ops(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = str(func)
                if not outer.paused and (
                    name == "aten._local_scalar_dense.default"
                    or name in SHAPE_OPS
                    or (name in INDEX_OPS and _bool_index(args))
                ):
                    outer.record(name)
                return func(*args, **(kwargs or {}))

        class _Methods(TorchFunctionMode):
            def __torch_function__(self, func, types, args=(), kwargs=None):
                name = getattr(func, "__name__", "")
                if not outer.paused and name in READ_METHODS:
                    outer.record(f"Tensor.{name}")
                return func(*args, **(kwargs or {}))

        self._modes = (_Ops(), _Methods())

    def __enter__(self) -> HostReads:
        for mode in self._modes:
            mode.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        for mode in reversed(self._modes):
            mode.__exit__(*exc)

    def record(self, name: str) -> None:
        stack = traceback.extract_stack()
        if any(f.name in KNOWN for f in stack):  # a read outside this project's code: counted apart
            name = "known"
        key = (self.step, name)
        self.counts[key] += 1
        if key not in self.where:
            frames = [f for f in stack if "domainbert" in f.filename or "transformers" in f.filename]
            self.where[key] = " <- ".join(f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in frames[::-1][:4])

    def report(self, step: Any) -> str:
        return "; ".join(f"{name} x{n} at {self.where[(step, name)]}" for name, n in self.at(step).items())

    def host_side(self, fn: Any) -> Any:
        """``fn`` with the count paused while it runs (batch building on host tensors)."""

        @functools.wraps(fn)
        def paused(*args: Any, **kwargs: Any) -> Any:
            self.paused += 1
            try:
                return fn(*args, **kwargs)
            finally:
                self.paused -= 1

        return paused

    def at(self, step: Any) -> Counter[str]:
        return Counter({name: n for (s, name), n in self.counts.items() if s == step})
