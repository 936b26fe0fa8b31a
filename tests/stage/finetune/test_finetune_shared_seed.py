"""A fine-tuning seed is one draw shared by every model: the head's initialisation, the data order and the dropout
masks are the same for two different encoders fine-tuned under the same seed. That is what makes runs under one
seed a pair (report/paired.py), so it is checked here on the real loop."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch

from domainbert.finetune.runner import prepare_run, run_finetune
from domainbert.finetune.trainer import TrainSettings
from domainbert.task_data.splits import load_task
from support.finetune import keyword_task


def other_encoder(tiny_bert: Path, folder: Path) -> Path:
    """The same architecture and tokenizer as ``tiny_bert`` with other weights (another pretraining)."""
    from safetensors.torch import load_file, save_file

    shutil.copytree(tiny_bert, folder)
    weights = load_file(str(folder / "model.safetensors"))
    gen = torch.Generator().manual_seed(7)
    save_file({k: v + 0.05 * torch.randn(v.shape, generator=gen) for k, v in weights.items()},
              str(folder / "model.safetensors"))
    return folder


def record_training(monkeypatch) -> dict[str, list]:
    """Every training forward's input ids and the first dropout mask of each call, as the loop makes them."""
    seen: dict[str, list] = {"batches": [], "masks": []}
    dropout = torch.nn.functional.dropout

    def recording(x, p=0.5, training=True, inplace=False):
        out = dropout(x, p, training, inplace)
        if training and p > 0:
            seen["masks"].append((out == 0).flatten()[:512].clone())
        return out

    monkeypatch.setattr(torch.nn.functional, "dropout", recording)
    return seen


@pytest.mark.parametrize("seed", [1, 4])
def test_two_encoders_under_one_seed_share_head_data_order_and_dropout(tmp_path, tiny_bert, monkeypatch, seed):
    data = load_task(keyword_task(tmp_path))
    other = other_encoder(tiny_bert, tmp_path / "other")
    heads = [prepare_run(data, str(ref), seed, "cls", 32)[0].classifier.weight.detach().clone()
             for ref in (tiny_bert, other)]
    assert torch.equal(heads[0], heads[1])  # the head depends on the seed only
    assert not torch.equal(heads[0], prepare_run(data, str(tiny_bert), seed + 1, "cls", 32)[0].classifier.weight)
    settings = TrainSettings(epochs=1, lr=1e-3, batch_size=8, seed=seed)
    runs = []
    for ref in (tiny_bert, other):
        seen = record_training(monkeypatch)

        def forward(module, *args, _seen=seen, _call=torch.nn.Module.__call__, **kwargs):
            if module.training and "input_ids" in kwargs and hasattr(module, "classifier"):
                _seen["batches"].append(kwargs["input_ids"].clone())
            return _call(module, *args, **kwargs)

        monkeypatch.setattr(torch.nn.Module, "__call__", forward)
        out = run_finetune(data, str(ref), settings, 32)
        monkeypatch.undo()
        runs.append((seen, out))
    (a, out_a), (b, out_b) = runs
    assert a["batches"] and len(a["batches"]) == len(b["batches"])
    assert all(torch.equal(x, y) for x, y in zip(a["batches"], b["batches"], strict=True))  # the data order
    assert a["masks"] and len(a["masks"]) == len(b["masks"])
    same = sum(torch.equal(x, y) for x, y in zip(a["masks"], b["masks"], strict=True))
    assert same == len(a["masks"])  # every dropout mask of the loop


