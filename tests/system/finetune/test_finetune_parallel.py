"""Data-parallel fine-tuning: the rank shares of a batch, the settings, and a real torchrun world of two on CPU."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from domainbert.core.errors import ConfigError
from domainbert.core.paths import RunLayout
from domainbert.finetune.jobs import Job, run_record
from domainbert.finetune.parallel import launch_command, launches, rank_share
from domainbert.finetune.stage import finetune_one
from support.finetune import make_cfg


def _token_features(rng: np.random.Generator, n: int) -> list[dict]:
    """NER-like features: a label per sub-token, -100 on special and continuation pieces."""
    feats = []
    for _ in range(n):
        labels = [int(x) if rng.random() > 0.3 else -100 for x in rng.integers(0, 3, rng.integers(2, 12))]
        feats.append({"labels": labels})
    return feats


@pytest.mark.parametrize("world", [2, 3])
def test_rank_shares_rebuild_the_global_mean_loss(world):
    """Each rank's mean loss times its factor, summed over ranks and divided by the world (what DDP's gradient
    mean does), is the mean over the whole batch: per labelled token for NER, per example otherwise."""
    rng = np.random.default_rng(0)
    for feats in (_token_features(rng, 40), [{"labels": int(i % 2)} for i in range(40)]):
        per_unit = [rng.random(sum(1 for x in f["labels"] if x != -100) if isinstance(f["labels"], list) else 1)
                    for f in feats]
        for batch in ([3, 9, 1, 4, 7, 0, 2], list(range(40)), [5]):
            everything = np.concatenate([per_unit[i] for i in batch])
            total = 0.0
            seen: list[int] = []
            for rank in range(world):
                mine, weight = rank_share(batch, feats, rank, world)
                units = np.concatenate([per_unit[i] for i in mine])
                total += weight * (units.mean() if units.size else 0.0) / world
                if weight:
                    seen += mine
            assert total == pytest.approx(everything.mean() if everything.size else 0.0, rel=1e-12)
            assert sorted(seen) == sorted(batch)  # every example once; an idle rank runs one at weight 0


def test_settings_launch_and_stay_out_of_the_fingerprint(tiny_bert, tasks_dir):  # noqa: F811
    one = make_cfg(tiny_bert, tasks_dir)
    two = make_cfg(tiny_bert, tasks_dir, "finetune.num_processes=2", "finetune.save_models=true")
    only = make_cfg(tiny_bert, tasks_dir, "finetune.only_tasks=[ner]")  # which tasks run: not this one's result
    job = Job("base", str(tiny_bert), "ner", 1, "finetune")
    assert run_record(one, job)[2] == run_record(two, job)[2] == run_record(only, job)[2]
    assert [t.name for t in only.finetune.tasks] == ["ner"]
    assert (one.finetune.num_processes, one.finetune.save_models) == (1, "best")  # the defaults
    assert launches(2) and not launches(1)
    cmd = launch_command(2, ["--task", "ner"], python="py")
    assert cmd[:4] == ["py", "-m", "torch.distributed.run", "--standalone"]
    assert cmd[cmd.index("--nproc_per_node") + 1] == "2" and cmd[-4:] == ["-m", "domainbert.finetune.worker", "--task", "ner"]
    with pytest.raises(ConfigError, match="names one GPU"):
        make_cfg(tiny_bert, tasks_dir, "finetune.num_processes=2", "finetune.device=cuda:1")


@pytest.fixture(scope="module")
def no_dropout_bert(tiny_bert, tmp_path_factory) -> Path:
    """The tiny BERT without dropout: then a world of two computes what one process computes."""
    from transformers import BertModel

    folder = tmp_path_factory.mktemp("models") / "tiny-bert-no-dropout"
    shutil.copytree(tiny_bert, folder)
    BertModel.from_pretrained(folder, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0).save_pretrained(folder)
    return folder


@pytest.mark.slow
@pytest.mark.parametrize("task", ["ner", "cls"])
def test_torchrun_world_of_two_matches_one_process(tmp_path, no_dropout_bert, tasks_dir, task):  # noqa: F811
    """A real ``torchrun --nproc_per_node 2`` (gloo): one result, written once, with the one-process run's
    losses, validation scores and test predictions. A batch of 9 over 64 examples ends with a batch of one,
    which leaves rank 1 idle for a step; NER weighs the ranks by labelled tokens, classification (mean
    pooling, whose unused pooler DDP must tolerate) by examples."""
    settings = ("finetune.epochs=1.5", "finetune.lr=0.0005", "finetune.batch_size=9", "finetune.evals_per_epoch=2",
                "finetune.torch_threads=1", "finetune.pooling=mean")
    one = finetune_one(make_cfg(no_dropout_bert, tasks_dir, *settings), RunLayout(tmp_path / "one"), "base",
                       str(no_dropout_bert), task, 1)
    layout = RunLayout(tmp_path / "two")
    cfg = make_cfg(no_dropout_bert, tasks_dir, *settings, "finetune.num_processes=2")
    two = finetune_one(cfg, layout, "base", str(no_dropout_bert), task, 1)
    assert (one["processes"], two["processes"]) == (1, 2)
    assert (two["steps"], two["train_examples"]) == (one["steps"], one["train_examples"])
    assert [h["step"] for h in two["history"]] == [h["step"] for h in one["history"]]
    for a, b in zip(one["history"], two["history"], strict=True):
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)
        assert b["validation"] == a["validation"]  # scores of the predictions: equal, not close
    assert two["loss_start"] == pytest.approx(one["loss_start"], rel=1e-5)
    assert two["pred"] == one["pred"] and two["test"] == one["test"]
    # Exactly one result and one kept model, from rank 0; nothing half-written beside them.
    files = sorted(p.relative_to(layout.root / "finetune").as_posix() for p in (layout.root / "finetune").rglob("*")
                   if p.is_file() and "/best/" not in p.as_posix())
    assert files == [f"base/{task}/seed-1/_domainbert.json", f"base/{task}/seed-1/result.json"]
    assert sorted(p.name for p in (layout.root / "finetune" / "base" / task).iterdir()) == ["best", "seed-1"]
    assert (layout.finetuned_model("base", task) / "config.json").is_file()
    assert json.loads((layout.finetune("base", task, 1) / "result.json").read_text())["test"] == two["test"]
    log = (layout.root / "launch" / "finetune" / "base" / task / "seed-1" / "launch.log").read_text()
    assert "rank 0" in log and "rank 1 domainbert.finetune" not in log  # only rank 0 logs its progress
    # Up to date now: the parent skips it without launching again.
    assert finetune_one(cfg, layout, "base", str(no_dropout_bert), task, 1)["test"] == two["test"]
    assert log == (layout.root / "launch" / "finetune" / "base" / task / "seed-1" / "launch.log").read_text()
