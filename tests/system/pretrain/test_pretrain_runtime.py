"""pretrain.runtime.torch_threads: training gets the machine's cores whatever torch's pool was left at."""

from __future__ import annotations

import os

import pytest
import torch

from domainbert.pretrain.runtime import default_threads, torch_threads

CORES = len(os.sched_getaffinity(0))


@pytest.mark.skipif(CORES < 2, reason="needs two cores to tell one thread from the default")
def test_training_uses_every_core_after_torch_was_left_at_one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    # As after torch was loaded while a local Dask cluster had set OMP_NUM_THREADS=1 for its workers.
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with torch_threads(None):
            assert torch.get_num_threads() == CORES
        assert torch.get_num_threads() == 1
    finally:
        torch.set_num_threads(before)


def test_an_explicit_count_and_the_users_environment_are_respected(monkeypatch: pytest.MonkeyPatch) -> None:
    before = torch.get_num_threads()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert default_threads() == 1
    with torch_threads(None):
        assert torch.get_num_threads() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    with torch_threads(2):
        assert torch.get_num_threads() == 2
    assert torch.get_num_threads() == before


SHM = """
import os, sys
from domainbert.pretrain.runtime import init_distributed
init_distributed(use_deepspeed=True)
import deepspeed.comm as ds
print("world", ds.get_world_size())
"""


@pytest.mark.deepspeed
def test_deepspeed_on_cpu_starts_without_compiling_its_shared_memory_op(tmp_path) -> None:
    """The op serves only DeepSpeed's inference all-reduce; compiling it took minutes at every first start."""
    import subprocess
    import sys

    pytest.importorskip("deepspeed")
    extensions = tmp_path / "torch-extensions"
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_PORT")}
    env["TORCH_EXTENSIONS_DIR"] = str(extensions)
    proc = subprocess.run([sys.executable, "-c", SHM], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0 and "world 1" in proc.stdout, proc.stderr[-2000:]
    assert not (extensions / "deepspeed_shm_comm").exists() and "shm_comm" not in proc.stdout + proc.stderr
