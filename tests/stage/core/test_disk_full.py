"""A full disk on a small tmpfs: a checkpoint that does not fit is one OSError(ENOSPC) naming the folder, whatever
library ran out of room (safetensors, torch.save), and nothing is left under a final name."""

from __future__ import annotations

import errno
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from domainbert.core.errors import os_error_line
from domainbert.pretrain import checkpoint as ckpt


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs (root only; skipped where mounting is not permitted)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)], capture_output=True).returncode:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


class _Engine:
    """Saves 4 MiB of weights the way the real engines do: safetensors or torch.save."""

    def __init__(self, how: str) -> None:
        self.how = how

    def save(self, folder: Path) -> None:
        weights = {"w": torch.ones(1 << 20)}
        if self.how == "safetensors":
            from safetensors.torch import save_file

            save_file(weights, str(folder / "model.safetensors"))
        else:
            torch.save(weights, folder / "optimizer.pt")


@pytest.mark.parametrize("how", ["safetensors", "torch"])
def test_a_checkpoint_that_does_not_fit_is_enospc_naming_the_folder_and_leaves_no_final_name(small_disk, how):
    root = small_disk / "checkpoints"
    with pytest.raises(OSError) as info:
        ckpt.save_checkpoint(root, 3, _Engine(how), {"step": 3})
    assert info.value.errno == errno.ENOSPC
    assert str(root) in info.value.filename
    assert "No space left on device; free space there" in os_error_line(info.value)
    assert sorted(p.name for p in root.iterdir()) == []  # neither step-3 nor its temporary folder
    assert ckpt.list_checkpoints(root) == []


def test_a_checkpoint_is_written_under_a_temporary_name_and_renamed_when_complete(tmp_path, monkeypatch):
    root, seen = tmp_path / "checkpoints", []
    engine = _Engine("safetensors")
    monkeypatch.setattr(engine, "save", lambda folder: seen.append(sorted(p.name for p in root.iterdir())))
    assert ckpt.save_checkpoint(root, 5, engine, {"step": 5}) == root / "step-5"
    assert seen == [[".tmp-step-5"]] and (root / "step-5" / ckpt.STATE).is_file()
    (root / ".tmp-step-9").mkdir()  # a save cut short by a kill
    ckpt.prune_checkpoints(root, keep=2)
    assert sorted(p.name for p in root.iterdir()) == ["step-5"]


def test_plan_states_the_disk_a_run_needs(tmp_path, capsys):
    from domainbert.cli import run_cli

    assert run_cli(["plan", "science", "pretrain.keep_checkpoints=4", "--no-estimate", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "5 checkpoints of" in out and "keep_checkpoints + 1" in out
    assert "disk: pretraining needs up to" in out


def test_disk_needed_counts_keep_plus_one_checkpoints_and_the_model():
    one, peak = ckpt.disk_needed(1_000_000, keep=2)
    assert one == 12_000_000 and peak == 3 * one + 4_000_000


def test_a_library_running_out_of_room_in_an_output_folder_is_enospc_naming_it(small_disk):
    from safetensors.torch import save_file

    from domainbert.core.artifacts import atomic_output

    final = small_disk / "pretrain" / "continued"
    with pytest.raises(OSError) as info:
        with atomic_output(final, config={}) as tmp:
            save_file({"w": torch.ones(1 << 20)}, str(tmp / "model.safetensors"))
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(final)
    assert not final.exists() and list(final.parent.iterdir()) == []


def test_a_copy_that_ran_out_of_room_is_named_by_its_first_destination():
    import shutil

    why = "[Errno 28] No space left on device: '/run/a/model.safetensors' -> '/run/best.tmp-1/model.safetensors'"
    exc = shutil.Error([("/run/a/model.safetensors", "/run/best.tmp-1/model.safetensors", why)])
    assert os_error_line(exc) == (
        "/run/best.tmp-1/model.safetensors: No space left on device; free space there and rerun (finished stages are kept)"
    )
