"""Every command README.md, docs/usage.md, docs/own-domain.md, docs/cluster.md, docs/development.md, docs/demo.md,
docs/profiles.md and examples/README.md show, run as they write it; and every deployment prefect.yaml defines,
loaded as ``prefect deploy`` loads it.

``COMMANDS`` is the one table: each documented command (a line of a ```bash block, comments and line
continuations folded, or an inline code span that starts with ``domainbert``, ``.venv/bin/domainbert``,
``make``, ``prefect``, ``python bench/`` or ``python examples/``) maps to how the suite runs it or why it cannot
here. A doc that gains a command the table does not list fails ``test_every_documented_command_is_in_the_table``.

prefect.yaml's deployments cannot run here (a server and workers: tests/system/flows/test_flows_server.py deploys one
under ``pytest -m server``), but each entry point is loaded, without a server: its file exists, it names a
Prefect flow, and the flow takes the parameters the deployment passes. Every ``prefect deployment run
FLOW/DEPLOYMENT`` the docs show, and the pretraining deployment a deployment sends its stage to, names one of them.

A command that runs gets a fresh folder: a copy of the checkout (its ``corpora/`` linked, read only; ``.venv``
the environment the suite runs in, as ``make setup`` leaves it), or the project docs/own-domain.md lays out.
It runs under ``bash -c`` exactly as written, must exit 0, print no traceback and print the lines its ``How``
expects (``expect``); its exit code and time are listed at the end of the session (``tests/conftest.py``). Kinds:

- ``RUN``: every lane; ``SLOW``: marked slow (over ~30 s on a 2-core CPU);
- ``CI_FIRST``: slow, and one ``.ci/run`` runs on the same checkout before the suite: skipped as done under CI
  (``CI`` set), run as ``SLOW`` elsewhere;
- ``LONG``: a whole pipeline, tens of minutes to hours on a CPU: run with ``DOMAINBERT_DOCS_LONG=1``;
- ``SKIP``: needs what a test machine has not (the network, a Hub token, root, a Prefect server and workers);
- ``MENTION``: not a command to run (a placeholder, a name in prose, a shell line that only sets variables).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from support.docs import own_domain_project

REPO = Path(__file__).resolve().parents[3]
DOCS = ("README.md", "docs/usage.md", "docs/own-domain.md", "docs/cluster.md", "docs/development.md", "docs/demo.md",
        "docs/profiles.md", "examples/README.md")
PREFIXES = ("domainbert", ".venv/bin/domainbert", "make", "prefect")
SCRIPTS = ("python bench/", "python examples/", ".venv/bin/python examples/")  # inline spans that run a script
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)
RUN, SLOW, CI_FIRST, LONG, SKIP, MENTION = "run", "slow", "ci-first", "long", "skip", "mention"
LONG_ENV = "DOMAINBERT_DOCS_LONG"


@dataclass(frozen=True)
class How:
    """How the suite treats one documented command."""

    kind: str
    reason: str = ""  # why it is slow, long, skipped or not a command
    where: str = "checkout"  # "checkout": a copy of the repository; "project": docs/own-domain.md's project
    before: tuple[str, ...] = ()  # documented commands it follows in the same folder, in the doc's order
    replace: tuple[tuple[str, str], ...] = ()  # a path it cannot use here -> one under the test's folder
    home: bool = False  # it writes to the user's home: HOME is a folder of the test's own
    expect: tuple[str, ...] = ()  # regular expressions (one line each, ``re.M``) its output must match


SERVER = "a Prefect server and workers (tests/system/flows/test_flows_server.py runs these steps under `pytest -m server`)"
SETS = "sets variables for the commands after it; nothing to run on its own"
PROSE = "a name or a placeholder in prose, not a command line"
SUITE = "the test suite itself (CI runs it through .ci/run); run from inside the suite it would recurse"
NETWORK = "installs from the network (PyPI, PyTorch's wheel index); the suite runs in the environment it made"
DEMO_RUN = "the whole science pipeline: many minutes on 2 cores, with and without bf16 (timed in the README's table)"
SLURM = (
    "Slurm and several GPU nodes; tests/system/pretrain/test_pretrain_two_nodes.py runs the template on two network "
    "namespaces as two nodes (root), srun and scontrol replaced by stand-ins"
)
HUB = "a Hugging Face token and the network, and a finished run's models (`domainbert run science` first)"

COMMANDS: dict[str, How] = {
    # README.md
    "make demo": How(LONG, DEMO_RUN),
    "make demo PYTHON=python3.11": How(LONG, DEMO_RUN + ", with the interpreter named"),
    "make scratch-study": How(LONG, "studies 7 and 12: an hour of from-scratch pretraining, then 30 fine-tuning runs of up to 10 epochs"),
    "make test": How(SKIP, SUITE),
    "make test-fast": How(SKIP, SUITE),
    "make test-unit": How(SKIP, SUITE),
    "make test-stage": How(SKIP, SUITE),
    "make test-system": How(SKIP, SUITE),
    'make test PYTEST_ARGS="-m \'not slow\'"': How(SKIP, SUITE),
    "make setup": How(SKIP, NETWORK),
    "make demo TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu": How(SKIP, NETWORK),
    "make lint": How(CI_FIRST, "mypy (its cache cold in a fresh folder), import-linter and ruff over the package"),
    "make typecheck": How(CI_FIRST, "mypy over the package, cold (`make lint` runs it first)"),
    "domainbert --verbose run science": How(LONG, "the whole science pipeline with library output shown"),
    ".venv/bin/domainbert plan science --detect 1.0": How(
        SLOW, "plan times a few training steps here, then prices the designs that detect 1 point"
    ),
    "domainbert plan <name>": How(MENTION, PROSE),
    # docs/usage.md
    ".venv/bin/domainbert validate": How(RUN),
    ".venv/bin/domainbert corpus law": How(SLOW, "the law corpus: about 75 s on a 2-core CPU"),
    ".venv/bin/domainbert corpus science": How(SLOW, "the science corpus"),
    ".venv/bin/domainbert pretrain science pretrain.max_steps=50 pretrain.precision=bf16 --arm continued": How(
        LONG,
        "the base's general warm-up on an empty machine cache (200 steps: 107 s on a 2-core CPU in bf16, 294 s held to AVX2 in fp32), then "
        "50 steps",
        before=(".venv/bin/domainbert corpus science",),
    ),
    ".venv/bin/domainbert run tweets --out /data/runs/tweets": How(
        LONG, "the whole tweets pipeline", replace=(("/data/runs/tweets", "data/runs/tweets"),)
    ),
    ".venv/bin/domainbert run science --profile full": How(SKIP, "the network: Hub datasets and bert-base-uncased"),
    ".venv/bin/domainbert compare runs/science runs/law": How(
        SKIP, "the finished runs of `run science` and `run law` (an hour on a CPU); on folders that hold no run it "
        "refuses in one line, exit 2 (tests/stage/cli/test_cli.py)"
    ),
    # On a fresh folder every arm is sized and timed; the TAPT arm's task text does not exist before the run, so
    # its size comes from the task files (its estimate raised a TypeError once).
    ".venv/bin/domainbert plan science --workers 2": How(
        SLOW,
        "plan times a few training steps on this machine",
        expect=(
            *(rf"^pretrain {arm} .* [\d,]+ tokens.*~[\d.]+ min$" for arm in ("continued", "control")),
            r"^pretrain tapt .* [\d,]+ tokens \(task text estimated from the task files\).*~[\d.]+ min$",
            r"^finetune .*~[\d.]+ min$",
            r"^estimated model time: ~[\d.]+ min on this machine",
        ),
    ),
    "HF_TOKEN=... .venv/bin/domainbert push science --arm continued --repo my-org/science-bert": How(SKIP, HUB),
    "HF_TOKEN=... .venv/bin/domainbert push science --finetuned continued/science-terms-ner --repo my-org/sci-ner "
    "--dry-run": How(SKIP, HUB),
    "domainbert --version": How(RUN),
    "domainbert --install-completion": How(RUN, home=True),
    "domainbert validate <name>": How(MENTION, PROSE),
    "domainbert run <name>": How(MENTION, PROSE),
    # docs/own-domain.md
    "cd contracts-project": How(MENTION, "the folder the guide's next commands run in: the suite builds that "
                                         "project (section 1) and runs them there"),
    "domainbert validate contracts": How(RUN, where="project"),
    "domainbert plan contracts": How(SLOW, "plan times a few training steps on this machine", where="project"),
    "domainbert run contracts": How(LONG, "the whole contracts pipeline", where="project"),
    'domainbert run contracts pretrain.budget_tokens=1000000 "finetune.only_tasks=[clause-type]"': How(
        LONG, "the whole contracts pipeline at five times the template's budget", where="project"
    ),
    "domainbert report contracts": How(SKIP, "a finished `domainbert run contracts` (LONG above)"),
    # docs/cluster.md
    "prefect server start --host 127.0.0.1 --port 4200 &": How(SKIP, SERVER),
    "prefect server start --host 127.0.0.1 --port 4200": How(SKIP, SERVER),
    "prefect server start --host 127.0.0.1 --port 4311 &": How(SKIP, SERVER),
    "export PREFECT_API_URL=http://127.0.0.1:4200/api": How(MENTION, SETS),
    "export PREFECT_API_URL=http://127.0.0.1:4311/api": How(MENTION, SETS),
    "export PREFECT_HOME=$HOME/.prefect-domainbert": How(MENTION, SETS),
    "sudo apt-get install -y postgresql": How(SKIP, "root and the system's package manager"),
    "sudo -u postgres createuser --pwprompt prefect": How(SKIP, "root and a PostgreSQL server"),
    "sudo -u postgres createdb --owner prefect prefect": How(SKIP, "root and a PostgreSQL server"),
    'export PREFECT_API_DATABASE_CONNECTION_URL="postgresql+asyncpg://prefect:PASSWORD@127.0.0.1:5432/prefect"': How(
        MENTION, SETS
    ),
    'export PREFECT_SERVER_API_AUTH_STRING="admin:CHOOSE-A-PASSPHRASE"': How(MENTION, SETS),
    "export PREFECT_API_URL=https://SERVER/api": How(MENTION, SETS),
    'export PREFECT_API_AUTH_STRING="admin:CHOOSE-A-PASSPHRASE"': How(MENTION, SETS),
    "export PREFECT_API_URL=https://SERVER/api PREFECT_API_AUTH_STRING=... DOMAINBERT_HOME=/path/to/domainbert": How(
        MENTION, SETS
    ),
    "export DOMAINBERT_HOME=$PWD": How(MENTION, SETS),
    "prefect work-pool create domainbert-cpu --type process": How(SKIP, SERVER),
    "prefect work-pool create domainbert-gpu --type process": How(SKIP, SERVER),
    "prefect work-pool create domainbert-cpu --type docker": How(SKIP, "a Prefect server and prefect-docker"),
    "prefect work-pool set-concurrency-limit domainbert-gpu 4": How(SKIP, SERVER),
    "prefect gcl create domainbert-gpu --limit 2": How(SKIP, SERVER),
    "prefect --no-prompt deploy --all": How(SKIP, SERVER),
    "prefect worker start --pool domainbert-cpu": How(SKIP, SERVER),
    "prefect worker start --pool domainbert-gpu --limit 1": How(SKIP, "a GPU node and " + SERVER),
    "prefect deployment run domain-pipeline/domain-pipeline --param domain=science --param "
    "overrides='[\"pretrain.max_steps=20\"]' --param out=runs/science --watch": How(SKIP, SERVER),
    "prefect deployment run domain-pipeline/domain-pipeline-cluster --param domain=science --param "
    "overrides='[\"pretrain.launch.launcher=deepspeed\", \"pretrain.launch.num_processes=4\"]'": How(
        SKIP, "GPU workers (DeepSpeed on 4 GPUs) and " + SERVER
    ),
    "prefect deployment run compare-domains/compare-domains --param domains='[\"science\", \"economics\"]'": How(
        SKIP, SERVER
    ),
    "sbatch --nodes=2 --gres=gpu:8 deploy/slurm/pretrain.sbatch science continued runs/science full": How(
        SKIP, SLURM
    ),
    "sbatch --nodes=2 --gres=gpu:8 deploy/slurm/pretrain.sbatch science continued runs/science full "
    "pretrain.deepspeed.enabled=true pretrain.deepspeed.zero_stage=2": How(SKIP, SLURM),
    'python -m deepspeed.launcher.runner --hostfile hostfile --no_ssh --node_rank "$SLURM_NODEID" --master_addr '
    "node0 --master_port 29500 --module domainbert.pretrain.worker --config "
    "runs/science/pretrain/continued/run_config.json --arm continued --run-dir runs/science --fingerprint "
    '"$(cat runs/science/pretrain/continued/fingerprint.txt)"': How(
        SKIP, "a Slurm allocation of several nodes, one launcher on each, and the config the template writes; "
        "tests/system/pretrain/test_pretrain_two_nodes.py runs this line on two network namespaces (root)"
    ),
    "prefect server start": How(MENTION, PROSE),
    "prefect deployment run": How(MENTION, PROSE),
    "domainbert run DOMAIN": How(MENTION, PROSE),
    "domainbert run": How(MENTION, PROSE),
    "domainbert": How(MENTION, PROSE),
    # examples/README.md
    ".venv/bin/python examples/run_science.py": How(
        LONG, "make demo's design, its fine-tuning runs one at a time; tests/system/flows/test_flows_example_script.py runs "
        "the script at tiny sizes"
    ),
    ".venv/bin/python examples/run_science.py --help": How(RUN, expect=(r"^usage: run_science\.py .*--out",)),
}


def _strip_comment(line: str) -> str:
    """The line without its shell comment (a ``#`` after a space, outside quotes)."""
    quote = None
    for i, ch in enumerate(line):
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands_of(text: str) -> list[str]:
    """The commands a Markdown document shows: ```bash lines, then inline spans that start like a command."""
    found = []
    for lang, body in FENCE.findall(text):
        if lang.strip() != "bash":
            continue
        pending = ""
        for raw in body.splitlines():
            line = _strip_comment(raw)
            if line.endswith("\\"):  # a continuation: one command over several lines
                pending += line[:-1].strip() + " "
                continue
            if line := (pending + line.strip()).strip():
                found.append(line)
            pending = ""
    for span in re.findall(r"`([^`]+)`", FENCE.sub("", text)):
        span = " ".join(span.split())  # a span wrapped over two lines of prose
        if any(span == p or span.startswith(p + " ") for p in PREFIXES) or span.startswith(SCRIPTS):
            found.append(span)
    return list(dict.fromkeys(found))


def documented() -> dict[str, str]:
    """Every documented command -> the first doc that shows it."""
    found: dict[str, str] = {}
    for doc in DOCS:
        for command in commands_of((REPO / doc).read_text(encoding="utf-8")):
            found.setdefault(command, doc)
    return found


def test_every_documented_command_is_in_the_table():
    """A command a doc gains (or changes) has to say here how it is run or why it cannot be."""
    shown = documented()
    missing = [f"{doc}: {command}" for command, doc in shown.items() if command not in COMMANDS]
    stale = [command for command in COMMANDS if command not in shown]
    assert not missing, "documented commands the table does not list:\n" + "\n".join(missing)
    assert not stale, "the table lists commands no doc shows any more:\n" + "\n".join(stale)
    for command, how in COMMANDS.items():
        assert how.kind in (RUN, SLOW, CI_FIRST, LONG, SKIP, MENTION), command
        assert how.kind == RUN or how.reason, f"{command}: {how.kind} without a reason"
        assert all(COMMANDS[b].kind in (RUN, SLOW) for b in how.before), command  # each is tested on its own


def test_what_ci_runs_before_the_suite_is_what_the_table_skips_there():
    """Under CI the ``CI_FIRST`` commands are not run again: ``.ci/run`` must run each, and fail on it, before
    ``make test`` (``make typecheck`` through ``make lint``'s prerequisites)."""
    steps = [line.strip() for line in (REPO / ".ci/run").read_text().splitlines() if line.strip().startswith("make ")]
    assert steps[-1] == "make test", steps
    before = {step.split(" ||")[0] for step in steps[:-1] if step.endswith("|| exit 1")}
    [lint_rule] = [line for line in (REPO / "Makefile").read_text().splitlines() if line.startswith("lint:")]
    before |= {f"make {target}" for target in lint_rule.split(":", 1)[1].split()} if "make lint" in before else set()
    assert {c for c, how in COMMANDS.items() if how.kind == CI_FIRST} <= before, before


def test_commands_are_read_as_a_shell_reads_them():
    text = "```bash\nmake demo   # a comment\nprefect x \\\n    --y 'a # b'\n```\nRun `domainbert plan\nscience`."
    assert commands_of(text) == ["make demo", "prefect x --y 'a # b'", "domainbert plan science"]


def _checkout(root: Path) -> Path:
    """A fresh copy of the checkout's files (tracked and new), its corpora linked, ``.venv`` the suite's own."""
    listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, text=True, check=True).stdout.splitlines()
    for name in listed:
        source, copy = REPO / name, root / name
        if name.startswith("corpora/") or not (source.is_file() or source.is_symlink()):
            continue  # the corpora are linked below; a file deleted but not yet committed is gone
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():  # src/domainbert/flows -> ../../flows
            copy.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, copy)
    (root / "corpora").symlink_to(REPO / "corpora", target_is_directory=True)
    venv, here = Path(sys.prefix), root / ".venv"  # the environment `make setup` made, as `make` finds it
    here.mkdir()
    for entry in venv.iterdir():
        if entry.name != ".installed":
            (here / entry.name).symlink_to(entry)
    (here / ".installed").touch()  # newer than pyproject.toml and constraints.txt: `make` does not set up again
    return root


def _where(how: How, tmp_path: Path) -> Path:
    if how.where == "project":
        own_domain_project(tmp_path / "contracts-project")
        return tmp_path / "contracts-project"
    return _checkout(tmp_path / "checkout")


def _run(command: str, cwd: Path, timeout: float, home: Path | None = None) -> tuple[int, float, str]:
    """Run a command line under bash as a user would, in ``cwd``: (exit code, seconds, output).

    The line is not bash's last command, so bash forks it and stays its parent, as a user's shell does: a
    command that asks which shell started it (``--install-completion``) finds bash, not whatever started the
    suite (bash would otherwise exec a lone command in its own place).
    """
    env = {k: v for k, v in os.environ.items() if k not in ("DOMAINBERT_HOME", "PREFECT_API_URL")}
    if home is not None:  # the shell start-up files it edits are the test's, never the user's
        home.mkdir(exist_ok=True)
        env["HOME"] = str(home)
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"  # `domainbert`, `python`
    t0 = time.perf_counter()
    proc = subprocess.run(["bash", "-c", f"{command}\nexit $?"], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, time.perf_counter() - t0, proc.stdout + proc.stderr


def _param(command: str, how: How) -> object:
    marks = {SLOW: [pytest.mark.slow], CI_FIRST: [pytest.mark.slow], LONG: [pytest.mark.slow, pytest.mark.timeout(4 * 3600)]}.get(how.kind, [])
    return pytest.param(command, how, marks=marks, id=command[:60])


@pytest.mark.parametrize(("command", "how"), [_param(c, h) for c, h in COMMANDS.items()])
def test_documented_command(command: str, how: How, tmp_path: Path, record_property) -> None:
    record_property("documented_command", {"command": command, "kind": how.kind, "reason": how.reason})
    if how.kind in (SKIP, MENTION):
        pytest.skip(f"{how.kind}: {how.reason}")
    if how.kind == CI_FIRST and os.environ.get("CI"):
        pytest.skip(f"{how.kind}: .ci/run ran it on this checkout before the suite ({how.reason})")
    if how.kind == LONG and not os.environ.get(LONG_ENV):
        pytest.skip(f"long: {how.reason} (set {LONG_ENV}=1 to run it)")
    cwd = _where(how, tmp_path)
    for earlier in how.before:
        code, _, output = _run(earlier, cwd, timeout=600)
        assert code == 0, f"{earlier} (run before it) exited {code}:\n{output[-3000:]}"
    line = command
    for path, under_tmp in how.replace:
        line = line.replace(path, str(tmp_path / under_tmp))
    code, seconds, output = _run(line, cwd, 4 * 3600 if how.kind == LONG else 840, tmp_path / "home" if how.home else None)
    record_property("documented_command", {"command": command, "kind": how.kind, "reason": how.reason,
                                           "exit": code, "seconds": round(seconds, 1)})
    assert code == 0, f"exit {code}:\n{output[-3000:]}"
    assert "Traceback" not in output, output[-3000:]
    for pattern in how.expect:
        assert re.search(pattern, output, re.M), f"no line matches {pattern!r}:\n{output[-3000:]}"
    if how.home:
        assert any((tmp_path / "home").iterdir()), "it wrote nothing to the home it was given"


# --- prefect.yaml's deployments --------------------------------------------------------------------------------

def _deployments() -> list[dict]:
    import yaml

    return yaml.safe_load((REPO / "prefect.yaml").read_text(encoding="utf-8"))["deployments"]


def _flow(entrypoint: str):
    """The flow ``prefect deploy`` loads for ``path/file.py:function`` (from the project's root), import errors
    raised (not Prefect's placeholder flow)."""
    from prefect.flows import load_flow_from_entrypoint

    return load_flow_from_entrypoint(entrypoint, use_placeholder_flow=False)


@pytest.mark.parametrize("deployment", _deployments(), ids=lambda d: d["name"])
def test_every_deployment_is_a_flow_that_takes_the_parameters_it_passes(deployment: dict, monkeypatch) -> None:
    import inspect

    from prefect import Flow

    from domainbert.config.domain import DEFAULT_PROFILE, load_domain

    path, _, function = deployment["entrypoint"].partition(":")
    assert (REPO / path).is_file() and function, deployment["entrypoint"]
    monkeypatch.chdir(REPO)  # where `prefect deploy` runs, and where a worker's pull step puts it
    flow = _flow(deployment["entrypoint"])
    assert isinstance(flow, Flow) and flow.fn.__name__ == function, flow
    params = deployment.get("parameters") or {}
    assert set(params) <= set(inspect.signature(flow.fn).parameters), (sorted(params), flow.fn)
    flow.validate_parameters(params)  # as a run of the deployment validates them: RunSpec, ExecutionOptions
    spec = params.get("spec", {})
    profile = params.get("profile", spec.get("profile", DEFAULT_PROFILE))
    domains = params.get("domains", [params.get("domain", spec.get("domain"))])
    assert all(domains), params
    for domain in domains:  # each domain it names loads with its profile (no data is read)
        load_domain(domain, profile=profile)


def test_every_deployment_a_run_names_is_in_prefect_yaml(monkeypatch) -> None:
    """``prefect deployment run FLOW/DEPLOYMENT`` in the docs and prefect.yaml's own comments, and the pretraining
    deployment a pipeline deployment sends its stage to (``execution.pretrain_deployment``), each name a deployment
    of prefect.yaml by its flow's name."""
    monkeypatch.chdir(REPO)
    defined = {f"{_flow(d['entrypoint']).name}/{d['name']}" for d in _deployments()}
    yaml_text = (REPO / "prefect.yaml").read_text(encoding="utf-8")
    shown = [*documented(), *re.findall(r"^#\s+(prefect deployment run \S+.*)$", yaml_text, re.M)]
    runs = {c.split()[3] for c in shown if c.startswith("prefect deployment run ") and len(c.split()) > 3}
    sent = {
        (d.get("parameters") or {}).get("execution", {}).get("pretrain_deployment") for d in _deployments()
    } - {None}
    assert runs and sent, (runs, sent)
    assert runs | sent <= defined, sorted((runs | sent) - defined)
