"""Launcher command lines and the generated DeepSpeed config."""

from __future__ import annotations

import json

import pytest
from pretrain_fixtures import make_cfg

from domainbert.errors import ConfigError
from domainbert.pretrain.ds_config import build_ds_config
from domainbert.pretrain.launch import WORKER, build_command


def test_deepspeed_and_torchrun_commands(base_model, tmp_path):
    ds = make_cfg(base_model, "pretrain.launch.launcher=deepspeed", "pretrain.launch.num_processes=4").pretrain.launch
    cmd = build_command(ds, ["--arm", "scratch"], python="py")
    assert cmd[:3] == ["py", "-m", "deepspeed.launcher.runner"]
    assert cmd[cmd.index("--num_gpus") + 1] == "4" and cmd[-3:] == [WORKER, "--arm", "scratch"]
    hostfile = tmp_path / "hosts"
    hostfile.write_text("a slots=8\nb slots=8\n")
    multi = make_cfg(base_model, "pretrain.launch.launcher=deepspeed", f"pretrain.launch.hostfile={hostfile}",
                     "pretrain.launch.num_nodes=2", "pretrain.launch.num_processes=8").pretrain.launch
    cmd = build_command(multi, [], python="py")
    assert cmd[cmd.index("--hostfile") + 1] == str(hostfile) and cmd[cmd.index("--num_nodes") + 1] == "2"
    tr = make_cfg(base_model, "pretrain.launch.launcher=torchrun", "pretrain.launch.num_processes=2").pretrain.launch
    cmd = build_command(tr, [], python="py")
    assert cmd[:3] == ["py", "-m", "torch.distributed.run"] and cmd[cmd.index("--nproc_per_node") + 1] == "2"
    missing = make_cfg(base_model, "pretrain.launch.launcher=deepspeed",
                       f"pretrain.launch.hostfile={tmp_path / 'nope'}").pretrain.launch
    with pytest.raises(ConfigError, match="hostfile"):
        build_command(missing, [])


def test_generated_and_user_deepspeed_configs(base_model, tmp_path):
    pcfg = make_cfg(base_model, "pretrain.deepspeed.enabled=true", "pretrain.deepspeed.zero_stage=3",
                    "pretrain.deepspeed.offload_optimizer=true", "pretrain.deepspeed.offload_params=true",
                    "pretrain.grad_accum=2").pretrain
    config = build_ds_config(pcfg, world_size=2)
    assert config["train_batch_size"] == 4 * 2 * 2 and config["gradient_accumulation_steps"] == 2
    zero = config["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_optimizer"]["device"] == "cpu" and zero["offload_param"]["device"] == "cpu"
    user = tmp_path / "ds.json"
    user.write_text(json.dumps({"train_batch_size": "auto", "zero_optimization": {"stage": 1}}))
    pcfg = make_cfg(base_model, f"pretrain.deepspeed.config_file={user}").pretrain
    config = build_ds_config(pcfg, world_size=1)
    assert config["zero_optimization"] == {"stage": 1} and config["train_batch_size"] == 4
    user.write_text("{not json")
    with pytest.raises(ConfigError, match="DeepSpeed config"):
        build_ds_config(pcfg, world_size=1)


@pytest.mark.slow
def test_torchrun_two_processes_without_deepspeed(base_model, layout):
    import socket

    from domainbert.pretrain.checkpoint import list_checkpoints
    from domainbert.pretrain.stage import pretrain_arm

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = make_cfg(base_model, "pretrain.launch.launcher=torchrun", "pretrain.launch.num_processes=2",
                   f"pretrain.launch.master_port={port}", "pretrain.checkpoint_every=2")
    summary = pretrain_arm(cfg, "continued", layout)
    assert (summary["world_size"], summary["engine"], summary["steps"], summary["tokens_consumed"]) == (2, "torch", 4, 1024)
    assert summary["domain_perplexity"] < summary["domain_perplexity_before"]
    [(step, folder)] = list_checkpoints(layout.pretrain("continued") / "checkpoints")
    assert step == 2 and (folder / "model.safetensors").is_file() and (folder / "rng-rank1.pt").is_file()
