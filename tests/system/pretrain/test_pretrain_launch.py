"""Launcher command lines and the generated DeepSpeed config."""

from __future__ import annotations

import json

import pytest
import torch

from domainbert.core.errors import ConfigError
from domainbert.pretrain.ds_config import build_ds_config
from domainbert.pretrain.launch import WORKER, build_command
from support.pretrain import hf_zero_config, make_cfg


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
    config = build_ds_config(pcfg, world_size=2, total_steps=8, hidden_size=128)
    assert config["train_batch_size"] == 4 * 2 * 2 and config["gradient_accumulation_steps"] == 2
    zero = config["zero_optimization"]
    assert zero["stage"] == 3 and zero["offload_optimizer"]["device"] == "cpu" and zero["offload_param"]["device"] == "cpu"
    user = tmp_path / "ds.json"
    user.write_text(json.dumps({"train_batch_size": "auto", "zero_optimization": {"stage": 1}}))
    pcfg = make_cfg(base_model, f"pretrain.deepspeed.config_file={user}").pretrain.for_arm("continued")
    config = build_ds_config(pcfg, world_size=1, total_steps=8, hidden_size=128)
    assert config["zero_optimization"] == {"stage": 1} and config["train_batch_size"] == 4
    user.write_text("{not json")
    with pytest.raises(ConfigError, match="DeepSpeed config"):
        build_ds_config(pcfg, world_size=1, total_steps=8, hidden_size=128)


@pytest.mark.parametrize("stage", [2, 3])
def test_hugging_face_zero_json_has_every_auto_filled(base_model, tmp_path, stage):
    user = tmp_path / f"zero{stage}.json"
    user.write_text(json.dumps(hf_zero_config(stage, offload=True)))
    pcfg = make_cfg(base_model, f"pretrain.deepspeed.config_file={user}", "pretrain.deepspeed.enabled=true",
                    "pretrain.grad_accum=2", "pretrain.max_grad_norm=0.5", "pretrain.adam_betas=[0.9, 0.95]",
                    "pretrain.precision=bf16").pretrain.for_arm("continued")
    config = build_ds_config(pcfg, world_size=2, total_steps=100, hidden_size=128)
    assert "auto" not in json.dumps(config)
    assert (config["train_micro_batch_size_per_gpu"], config["gradient_accumulation_steps"],
            config["train_batch_size"]) == (4, 2, 16)
    assert config["gradient_clipping"] == 0.5
    assert config["optimizer"]["params"] == {"lr": pcfg.lr, "betas": [0.9, 0.95], "eps": pcfg.adam_eps,
                                             "weight_decay": pcfg.weight_decay}
    assert config["scheduler"]["params"] == {"warmup_min_lr": 0, "warmup_max_lr": pcfg.lr,
                                             "warmup_num_steps": int(pcfg.warmup_ratio * 100), "total_num_steps": 100}
    assert config["bf16"]["enabled"] is torch.cuda.is_available() and config["fp16"]["enabled"] is False
    zero = config["zero_optimization"]
    assert zero["stage"] == stage and zero["reduce_bucket_size"] == 128 * 128
    if stage == 3:
        assert (zero["stage3_prefetch_bucket_size"], zero["stage3_param_persistence_threshold"]) == (14745, 1280)
        assert zero["stage3_max_live_parameters"] == 1e9  # a given value stays


def test_deepspeed_json_auto_or_value_we_cannot_honour_is_one_line(base_model, tmp_path):
    user = tmp_path / "ds.json"
    pcfg_of = lambda: make_cfg(base_model, f"pretrain.deepspeed.config_file={user}").pretrain.for_arm("continued")  # noqa: E731
    user.write_text(json.dumps({**hf_zero_config(2), "flops_profiler": {"enabled": "auto"}}))
    with pytest.raises(ConfigError) as err:
        build_ds_config(pcfg_of(), world_size=1, total_steps=10, hidden_size=128)
    assert "flops_profiler.enabled" in str(err.value) and str(user) in str(err.value)
    assert "\n" not in str(err.value)
    config = hf_zero_config(2)
    config["optimizer"]["params"]["lr"] = 3e-5  # DeepSpeed would not use it (the trainer passes its optimizer)
    config["gradient_clipping"] = 2.0
    user.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match=r"gradient_clipping=2\.0 but pretrain\.max_grad_norm gives 1\.0; "
                                          r"optimizer\.params\.lr=3e-05 but pretrain\.lr gives 0\.0001"):
        build_ds_config(pcfg_of(), world_size=1, total_steps=10, hidden_size=128)


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
