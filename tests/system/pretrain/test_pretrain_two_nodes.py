"""Two machines on one: two network namespaces joined by a veth pair, one training process in each.

Each "node" is a network namespace with its own hostname (``node0``, ``node1``) and a hosts file that names both
(10.77.0.1 and 10.77.0.2, addresses that exist only inside the namespaces, on an interface called ``dbt0`` in
each), so the processes find each other as on a cluster: by name, over the link between them, never over the
host's loopback. The pretraining worker trains a 2-layer model a few steps over gloo, started the three ways
docs/cluster.md gives for several nodes: ``torchrun --nnodes 2`` on each node, DeepSpeed's launcher without ssh
(``--no_ssh --node_rank``), and deploy/slurm/pretrain.sbatch with a stand-in ``srun`` that starts its command once
per node, in that node's namespace, as Slurm does. Every rank's weights must end equal: ``summary.json`` holds a
SHA-256 per rank (``replica_digests``).

Needs root (``ip netns``, ``unshare``); skipped otherwise. The namespaces are removed after each test.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

from domainbert.config.domain import save_run_config
from domainbert.core.models import load_mlm_model
from domainbert.core.paths import RunLayout, project_root
from domainbert.pretrain.launch import WORKER, worker_args
from domainbert.pretrain.stage import arm_fingerprint
from support.pretrain import make_cfg, write_corpus

pytestmark = pytest.mark.slow

IFNAME = "dbt0"  # the link's name on both nodes, as a cluster's nodes share one (eth1, ib0)
PORT = "29500"  # nothing else listens inside namespaces made for this test
# DeepSpeed's launcher and start on two nodes: minutes on a loaded 2-core CPU (no op is compiled any more:
# pretrain.runtime skips DeepSpeed's shared-memory comm op, which training never uses).
DEEPSPEED_TIMEOUT_S = 900
SBATCH = project_root() / "deploy" / "slurm" / "pretrain.sbatch"
# Run "$@" as the node: its own hostname (UTS namespace) and its hosts file bound over /etc/hosts in a mount
# namespace of its own (the host's file is untouched).
NODE_SHELL = 'mount --bind "$0" /etc/hosts && hostname "$1" && shift && exec "$@"'
AS_NODE = ("unshare", "--uts", "--mount", "sh", "-c", NODE_SHELL)


@dataclass(frozen=True)
class Node:
    hostname: str
    netns: str
    addr: str
    hosts: Path

    def run(self, argv: list[str]) -> list[str]:
        """``argv`` as a command line that runs it on this node."""
        return ["ip", "netns", "exec", self.netns, *AS_NODE, str(self.hosts), self.hostname, *argv]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


def _remove(namespaces: list[str], veth: str) -> None:
    """Kill what still runs in the test's namespaces (only this test's processes are in them), then delete them."""
    for ns in namespaces:
        pids = subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)  # takes its end of the veth pair with it
    subprocess.run(["ip", "link", "del", veth], capture_output=True)  # still here only if a move failed


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    """Two namespaces joined by a veth pair, named uniquely for this run; always removed afterwards."""
    if os.geteuid() != 0:
        pytest.skip("needs root: network namespaces (ip netns) and unshare")
    missing = [tool for tool in ("ip", "unshare", "mount", "hostname") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)}")
    tag = f"{os.getpid() % 10000}{secrets.token_hex(2)}"
    hosts = tmp_path / "hosts"
    found = [Node(f"node{i}", f"dbert-{tag}-{i}", f"10.77.0.{i + 1}", hosts) for i in range(2)]
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{n.addr} {n.hostname}\n" for n in found))
    veth = [f"dbv{tag}{i}" for i in range(2)]  # interface names: at most 15 characters
    made: list[str] = []
    try:
        try:
            for node in found:
                _ip("netns", "add", node.netns)
                made.append(node.netns)
            _ip("link", "add", veth[0], "type", "veth", "peer", "name", veth[1])
            for node, end in zip(found, veth, strict=True):
                _ip("link", "set", end, "netns", node.netns)
                _ip("-n", node.netns, "link", "set", end, "name", IFNAME)
                _ip("-n", node.netns, "addr", "add", f"{node.addr}/24", "dev", IFNAME)
                _ip("-n", node.netns, "link", "set", IFNAME, "up")
                _ip("-n", node.netns, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as exc:
            pytest.skip(f"cannot make network namespaces here: {' '.join(exc.cmd)}: {exc.stderr.strip()}")
        yield found
    finally:
        _remove(made, veth[0])


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1", "GLOO_SOCKET_IFNAME": IFNAME, **extra}


def _run_all(commands: list[list[str]], logs: list[Path], env: dict[str, str], timeout: float = 300) -> None:
    """Start every command at once (one per node), wait for all; each must exit 0."""
    procs = []
    for command, log in zip(commands, logs, strict=True):
        with log.open("w") as out:
            procs.append(
                subprocess.Popen(
                    command, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True, cwd=log.parent
                )
            )
    deadline = time.monotonic() + timeout
    try:
        for proc in procs:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)  # the process group this test started
                proc.wait()
    tails = "\n".join(
        f"--- {log.name} (exit {p.returncode})\n{log.read_text()[-2500:]}" for p, log in zip(procs, logs, strict=True)
    )
    assert [p.returncode for p in procs] == [0] * len(procs), tails


def _on_each_node(nodes: list[Node], python_args: Callable[[int], list[str]], tmp_path: Path) -> None:
    """``python *python_args(rank)`` on each node at once, logged to ``<hostname>.log``; each must exit 0."""
    commands = [node.run([sys.executable, *python_args(rank)]) for rank, node in enumerate(nodes)]
    _run_all(commands, [tmp_path / f"{node.hostname}.log" for node in nodes], _env())


def _worker_args(base_model: Path, run: RunLayout, *overrides: str) -> list[str]:
    """The worker's arguments on the resolved config, as deploy/slurm/pretrain.sbatch writes them."""
    cfg = make_cfg(base_model, "pretrain.arms=[continued]", *overrides)
    config = save_run_config(cfg, run.pretrain("continued") / "run_config.json")
    return worker_args(config, "continued", run.root, arm_fingerprint(cfg, "continued", run))


def _check_two_equal_replicas(run: RunLayout, base_model: Path) -> dict:
    summary = json.loads((run.pretrain("continued") / "summary.json").read_text())
    # 2 ranks x 4 sequences x 32 tokens a step: the 1024-token budget takes 4 steps.
    assert (summary["world_size"], summary["steps"], summary["tokens_consumed"]) == (2, 4, 1024)
    digests = summary["replica_digests"]
    assert len(digests) == 2 and digests[0] == digests[1], digests  # both ranks hold the same weights
    trained = load_mlm_model(run.pretrained_model("continued")).state_dict()
    base = load_mlm_model(base_model).state_dict()
    key = "bert.encoder.layer.0.attention.self.query.weight"
    assert not torch.equal(trained[key], base[key])  # the steps changed the weights
    return summary


def test_torchrun_two_nodes(nodes, base_model, texts, tmp_path):
    """``torchrun --nnodes 2 --nproc-per-node 1 --node-rank N --master-addr node0`` on each node."""
    run = RunLayout(tmp_path / "run")
    write_corpus(run.corpus, texts)
    args = _worker_args(
        base_model,
        run,
        "pretrain.launch.launcher=torchrun",
        "pretrain.launch.num_nodes=2",
        "pretrain.launch.num_processes=1",
    )
    launcher = f"-m torch.distributed.run --nnodes 2 --nproc-per-node 1 --master-addr node0 --master-port {PORT}"
    _on_each_node(nodes, lambda rank: [*launcher.split(), "--node-rank", str(rank), "-m", WORKER, *args], tmp_path)
    assert _check_two_equal_replicas(run, base_model)["engine"] == "torch"


@pytest.mark.deepspeed
@pytest.mark.timeout(DEEPSPEED_TIMEOUT_S)
def test_deepspeed_launcher_two_nodes_without_ssh(nodes, base_model, texts, tmp_path):
    """``deepspeed --hostfile H --no_ssh --node_rank N --master_addr node0`` on each node, ZeRO-2."""
    run = RunLayout(tmp_path / "run")
    write_corpus(run.corpus, texts)
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("".join(f"{node.hostname} slots=1\n" for node in nodes))
    args = _worker_args(
        base_model,
        run,
        "pretrain.deepspeed.enabled=true",
        "pretrain.deepspeed.zero_stage=2",
        "pretrain.launch.launcher=deepspeed",
        f"pretrain.launch.hostfile={hostfile}",
        "pretrain.launch.num_nodes=2",
        "pretrain.launch.num_processes=1",
    )
    launcher = f"-m deepspeed.launcher.runner --hostfile {hostfile} --no_ssh --master_addr node0 --master_port {PORT}"
    _on_each_node(
        nodes, lambda rank: [*launcher.split(), "--node_rank", str(rank), "--module", WORKER, *args], tmp_path
    )
    summary = _check_two_equal_replicas(run, base_model)
    assert (summary["engine"], summary["zero_stage"]) == ("deepspeed", 2)


SRUN = """#!/bin/bash
# srun stand-in: one task per node, each in its node's namespace with SLURM_NODEID/SLURM_PROCID set, as srun
# starts them; exits with the first failing task's status.
while [[ $# -gt 0 && $1 == --* ]]; do shift; done
pids=()
i=0
for node in $TEST_NODES; do  # netns:hostname
  SLURM_NODEID=$i SLURM_PROCID=$i SLURM_LOCALID=0 ip netns exec "${node%%:*}" unshare --uts --mount \\
    sh -c "$NODE_SHELL" "$TEST_HOSTS" "${node##*:}" "$@" &
  pids+=($!)
  i=$((i + 1))
done
rc=0
for pid in "${pids[@]}"; do
  wait "$pid" || { status=$?; [[ $rc == 0 ]] && rc=$status; }
done
exit "$rc"
"""
SCONTROL = """#!/bin/bash
# scontrol stand-in: the job's node names for `show hostnames`, one write each, as a slow scontrol can (a reader
# that stops after the first name makes the second write fail: SIGPIPE)
if [[ $1 == show && $2 == hostnames ]]; then for h in $TEST_HOSTNAMES; do echo "$h"; sleep 0.2; done; exit 0; fi
echo "scontrol $* is not expected here" >&2; exit 1
"""


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param([], id="torch"),
        pytest.param(
            ["pretrain.deepspeed.enabled=true", "pretrain.deepspeed.zero_stage=2"],
            id="deepspeed",
            marks=[pytest.mark.deepspeed, pytest.mark.timeout(DEEPSPEED_TIMEOUT_S)],
        ),
    ],
)
def test_slurm_template_two_nodes(nodes, base_model, texts, tmp_path, engine):
    """deploy/slurm/pretrain.sbatch as ``sbatch --nodes=2`` runs it: the script on the first node, its srun line
    once per node (torchrun with the c10d rendezvous on the first node's name); the DeepSpeed engine (ZeRO-2)
    under the same torchrun too."""
    run = RunLayout(tmp_path / "run")
    write_corpus(run.corpus, texts)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    env = _env(
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        PYTHON=sys.executable,
        GPUS_PER_NODE="1",
        MASTER_PORT=PORT,
        SLURM_JOB_ID="4343",
        SLURM_JOB_NODELIST="node[0-1]",
        SLURM_NNODES="2",
        NODE_SHELL=NODE_SHELL,
        TEST_NODES=" ".join(f"{n.netns}:{n.hostname}" for n in nodes),
        TEST_HOSTS=str(nodes[0].hosts),
        TEST_HOSTNAMES=" ".join(n.hostname for n in nodes),
    )
    overrides = [
        f"base_model.name_or_path={base_model}",
        "pretrain.arms=[continued]",
        "pretrain.seq_len=32",
        "pretrain.batch_size=4",
        "pretrain.budget_tokens=1024",
        "pretrain.eval_documents=10",
        "pretrain.log_every=2",
        "pretrain.checkpoint_every=4",
        "pretrain.scratch_size=base_config",
        *engine,
    ]
    batch = nodes[0].run(["bash", str(SBATCH), "science", "continued", str(run.root), "offline", *overrides])
    _run_all([batch], [tmp_path / "slurm-4343.out"], env)
    summary = _check_two_equal_replicas(run, base_model)
    assert summary["engine"] == ("deepspeed" if engine else "torch")
