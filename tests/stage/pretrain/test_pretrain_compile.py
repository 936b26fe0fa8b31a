"""pretrain.compile: the encoder compiled with torch.compile trains as the eager one does (CPU, inductor)."""

from __future__ import annotations

import pytest
import torch

from domainbert.core.paths import RunLayout
from domainbert.pretrain.stage import pretrain_arm
from support.pretrain import make_cfg

pytestmark = [pytest.mark.slow]  # inductor compiles C++ on first use: about a minute on 2 cores


def test_a_compiled_encoder_trains_like_the_eager_one(base_model, tmp_path, texts, monkeypatch):
    from support.pretrain import write_corpus

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    losses = {}
    for compiled in (False, True):
        layout = RunLayout(tmp_path / f"compile-{compiled}")
        write_corpus(layout.corpus, texts)
        cfg = make_cfg(base_model, "pretrain.arms=[continued]", "pretrain.budget_tokens=512", "pretrain.precision=fp32",
                       "pretrain.torch_threads=1", f"pretrain.compile={str(compiled).lower()}")
        summary = pretrain_arm(cfg, "continued", layout)
        losses[compiled] = [loss for _, loss in summary["loss_curve"]]
    assert len(losses[True]) == len(losses[False]) == 4
    # the same steps on the same batches and masks; dropout draws from inductor's own generator when compiled,
    # so the losses match closely, not exactly
    assert losses[True] == pytest.approx(losses[False], rel=0.02)
    # and it trains: its weights moved (four steps' losses are too noisy to fall every time: 6.39 -> 6.44 once)
    from safetensors.torch import load_file

    before = load_file(str(base_model / "model.safetensors"))
    after = load_file(str(RunLayout(tmp_path / "compile-True").pretrain("continued") / "model" / "model.safetensors"))
    moved = [k for k in before if k in after and k.endswith("weight") and not torch.equal(before[k], after[k])]
    assert len(moved) > len(before) // 2, moved
