"""The ``domainbert`` command: one subcommand per stage, ``run`` for the whole pipeline, ``compare`` for the
cross-domain page over finished runs.

Every subcommand takes a domain (a name from ``domains/`` or a path to a YAML file), optional
``dotted.key=value`` overrides, ``--profile`` (``offline`` by default) and ``--out`` (``runs/<domain>/``).
User errors (``DomainbertError``) print one line on stderr and exit with status 2, without a traceback;
Ctrl-C, SIGTERM and SIGUSR1 stop any command with status 130/143/138 and one line naming the command that
continues the run (``run_cli``, ``domainbert.core.signals``).
"""

from __future__ import annotations

import dataclasses
import gc
import glob
import logging
import os
import shlex
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from domainbert import __version__
from domainbert.config.domain import (
    DEFAULT_PROFILE,
    DomainConfig,
    load_domain,
    recorded_invocation,
    save_resolved_config,
)
from domainbert.core import signals
from domainbert.core.errors import ConfigError, DomainbertError, os_error_line
from domainbert.core.paths import RunLayout, available_domains, default_run_dir, resolve_domain_file
from domainbert.core.runlock import run_lock

app = typer.Typer(
    no_args_is_help=True, pretty_exceptions_enable=False, help="Domain-adaptive pretraining for BERT-style encoders."
)


def _complete_domain(incomplete: str) -> list[str]:
    return [name for name in available_domains() if name.startswith(incomplete)]


def _complete_profile(ctx: typer.Context, incomplete: str) -> list[str]:
    """The profiles the domain on the command line defines (offline and full when it cannot be read)."""
    import yaml

    from domainbert.core.paths import resolve_domain_file

    names = ["full", "offline"]
    try:
        data = yaml.safe_load(resolve_domain_file(str(ctx.params.get("domain") or "")).read_text(encoding="utf-8"))
        names = sorted((data or {}).get("profiles") or names)
    except Exception:  # noqa: BLE001 - completion must never fail
        pass
    return [name for name in names if name.startswith(incomplete)]


DomainArg = Annotated[
    str, typer.Argument(help="Domain name (e.g. science) or path to a domain YAML.", autocompletion=_complete_domain)
]
OverridesArg = Annotated[list[str] | None, typer.Argument(help="Overrides such as pretrain.max_steps=50.")]
ProfileOpt = Annotated[
    str,
    typer.Option(
        "--profile",
        "-p",
        autocompletion=_complete_profile,
        help="A profile the domain YAML defines under profiles: (offline: the "
        "shipped samples; full: the real data); checked against the file.",
    ),
]
OutOpt = Annotated[Path | None, typer.Option("--out", "-o", help="Run directory (default runs/<domain>/).")]


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"domainbert {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool, typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            help="Show transformers' loading reports and progress bars, Dask's INFO lines and DeepSpeed's "
            "no-GPU warning (expected, so hidden by default).",
        ),
    ] = False,
) -> None:
    """Domain-adaptive pretraining for BERT-style encoders."""
    if verbose:
        from domainbert.core.logs import VERBOSE_ENV, show_debug

        os.environ[VERBOSE_ENV] = "1"  # the command's other processes (Dask workers, launchers) inherit it
        show_debug()
    else:
        from domainbert.core.models import quiet_libraries

        quiet_libraries()
        # Prefect's Dask runner announces a dashboard the run's cluster is started without (dashboard_address None)
        logging.getLogger("prefect.task_runner.dask").setLevel(logging.WARNING)


def _setup(
    domain: str,
    overrides: list[str] | None,
    profile: str,
    out: Path | None,
    create: bool = True,
    writes: bool = True,
) -> tuple[DomainConfig, RunLayout]:
    """The config and the run's folders; the folder is created (``create``) and checked to be writable
    (unless the command ``writes`` nothing there: ``plan`` reads an archived, read-only run as it is)."""
    cfg = load_domain(domain, overrides or [], profile=profile)
    # Which file a name resolved to (./domains/ first, then DOMAINBERT_HOME, then the installed checkout).
    logging.getLogger("domainbert").info("domain file: %s (profile %s)", resolve_domain_file(domain), profile)
    layout = RunLayout((out or default_run_dir(cfg.name)).resolve())
    if cfg.finetune.lr_grid:  # the learning rates the run's searches chose, where they are done
        from domainbert.finetune import recipe

        cfg = recipe.applied(cfg, layout)
    if not writes:
        return cfg, layout
    if not create and not layout.root.exists():
        return cfg, layout  # a command that only reads a run refuses a missing folder itself, leaving no trace
    try:
        layout.root.mkdir(parents=True, exist_ok=True)
        probe = layout.root / f".write-test-{os.getpid()}"
        probe.touch()
        probe.unlink()
    except OSError as exc:  # a file, a read-only folder or file system, no space
        raise ConfigError(
            f"cannot write to the run folder: {exc.strerror or exc}", file=layout.root, field="--out"
        ) from None
    return cfg, layout


@contextmanager
def _stage(
    command: str, domain: str, overrides: list[str] | None, profile: str, out: Path | None
) -> Iterator[tuple[DomainConfig, RunLayout]]:
    """``_setup``, then the run folder's lock, and only under it the record of the profile and overrides the
    stage runs with (as ``run`` does): a command refused by the lock leaves the run it was refused from as it
    was, ``config.resolved.json`` included."""
    cfg, layout = _setup(domain, overrides, profile, out)
    with run_lock(layout.root, f"domainbert {command} {domain}"):
        save_resolved_config(layout.root, domain, profile, list(overrides or []), cfg)
        yield cfg, layout


@app.command()
def validate(
    domains: Annotated[list[str] | None, typer.Argument(help="Domains to check (default: all).")] = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
) -> None:
    """Validate domain YAMLs (all of domains/ by default), their local corpus sources and task files.

    Each local corpus file is read on a sample by the corpus stage's reader: an empty file, one that is not
    UTF-8 or not in its format is an error naming the file and line.

    Every task is read as fine-tuning will read it (formats, splits, label sets, tag scheme), so a wrong
    label set is found before the corpus, vocabulary and pretraining stages run. Each problem is one line;
    any problem exits with status 2.
    """
    problems = 0
    for name in domains or available_domains():
        try:
            cfg = load_domain(name, profile=profile)
        except DomainbertError as exc:
            typer.echo(f"error: {exc}", err=True)
            problems += 1
            continue
        found = _check_inputs(cfg)
        for line in found:
            typer.echo(f"error: {line}", err=True)
        problems += len(found)
        for line in _flags(cfg, default_run_dir(cfg.name) / "corpus"):
            typer.echo(f"warning: {line}", err=True)
        if not found:
            typer.echo(
                f"ok  {cfg.name} ({profile}): {len(cfg.corpus.sources)} source(s), "
                f"arms {', '.join(cfg.pretrain.arms)}, tasks {', '.join(t.name for t in cfg.finetune.tasks)} "
                f"[{resolve_domain_file(name)}]"
            )
    if problems:
        raise typer.Exit(2)


def _flags(cfg: DomainConfig, corpus_dir: Path) -> list[str]:
    """Settings far from the literature's, a budget far from one pass over the corpus (before it exists, over
    the most its source files can hold), tasks whose splits share examples (``services.flags``): warnings."""
    from domainbert.corpus.source_check import source_tokens_at_most
    from domainbert.services.flags import all_flags

    return all_flags(cfg, corpus_dir, source_tokens_at_most(cfg.corpus.sources))


def _check_inputs(cfg: DomainConfig) -> list[str]:
    """One line per problem of the local corpus sources and the tasks (Hugging Face ones need the network)."""
    from domainbert.corpus.filters import build_pipeline
    from domainbert.corpus.source_check import check_local_source
    from domainbert.services.tasks import load_task

    found = []
    try:  # each filter's options against its component's typed options, as the corpus stage will build them
        build_pipeline(cfg.corpus.filters)
    except DomainbertError as exc:
        found.append(str(exc))
    for source in cfg.corpus.sources:
        if source.type == "local":
            try:
                check_local_source(source)  # matched, not empty, UTF-8 and in its format on a sample
            except DomainbertError as exc:
                found.append(str(exc))
    files = [(f"vocab.references[{r.name}]", r.path) for r in cfg.vocab.references if r.path]
    files += [("vocab.control_corpus", p) for p in cfg.vocab.control_corpus]
    files += [("pretrain.general_eval_corpus", p) for p in cfg.pretrain.general_eval_corpus]
    for field, path in files:
        if not glob.glob(str(path)):
            found.append(f"{path}: {field}: not found")
    if cfg.pretrain.base_warmup.enabled != "off" and not any("not found" in line for line in found):
        from domainbert.pretrain.base_warmup import warmup_corpus

        try:
            warmup_corpus(cfg)  # general text left for the warm-up once the forgetting set is set aside
        except DomainbertError as exc:
            found.append(str(exc))
    for task in cfg.finetune.tasks:
        if task.format == "hf":
            continue
        try:
            load_task(task)
        except DomainbertError as exc:
            found.append(f"task {task.name!r}: {exc}")
    return found


@app.command()
def corpus(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Build the cleaned, deduplicated, decontaminated and sharded corpus."""
    from domainbert.corpus.build import build_corpus

    with _stage("corpus", domain, overrides, profile, out) as (cfg, layout):
        build_corpus(cfg, layout)
    typer.echo(f"corpus: {layout.corpus}")


@app.command()
def vocab(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Train the domain tokenizer, measure its fit with the reference vocabularies, build the extended model."""
    from domainbert.vocab.stage import run_vocab

    with _stage("vocab", domain, overrides, profile, out) as (cfg, layout):
        run_vocab(cfg, layout)
    typer.echo(f"vocab: {layout.vocab}")


@app.command()
def pretrain(
    domain: DomainArg,
    overrides: OverridesArg = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
    out: OutOpt = None,
    arm: Annotated[
        list[str] | None, typer.Option("--arm", help="Arm(s) to train (default: all in the config).")
    ] = None,
) -> None:
    """Masked-LM pretraining of each arm (continued, extended, scratch) on an equal token budget."""
    from domainbert.pretrain.stage import pretrain_arm

    with _stage("pretrain", domain, overrides, profile, out) as (cfg, layout):
        for name in arm or cfg.pretrain.arms:
            pretrain_arm(cfg, name, layout)
            typer.echo(f"pretrain {name}: {layout.pretrained_model(name)}")


@app.command()
def finetune(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Fine-tune every model on every task over the configured seeds."""
    from domainbert.finetune.matrix import finetune_all

    with _stage("finetune", domain, overrides, profile, out) as (cfg, layout):
        finetune_all(cfg, layout)
    typer.echo(f"finetune: {layout.root / 'finetune'}")


@app.command()
def report(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Render the comparison report from a run's artifacts (no retraining): the configuration the run was made
    with (its profile and overrides, from ``config.resolved.json``), with any overrides given here on top. A
    report using fewer results than the one in ``report/`` is written beside it, never over it."""
    recorded = recorded_invocation(out or default_run_dir(load_domain(domain, [], profile=profile).name))
    if recorded is not None and recorded != (DEFAULT_PROFILE, []):
        given = list(overrides or [])
        profile = recorded[0] if profile == DEFAULT_PROFILE else profile
        overrides = [*recorded[1], *given]  # later overrides win: the ones given here
        on_top = f", with {given} on top" if given else ""
        typer.echo(
            f"report: as the run was made: profile {recorded[0]}, overrides {recorded[1] or 'none'}{on_top}", err=True
        )
    cfg, layout = _setup(domain, overrides, profile, out, create=False)
    from domainbert.report.compare import render_report, require_run_outputs

    require_run_outputs(cfg, layout)
    with run_lock(layout.root, f"domainbert report {domain}"):
        path = render_report(cfg, layout)
    _echo_answer(path)


def _echo_answer(path: str | Path) -> None:
    """The report's answer (headline table, verdict, power) in plain text, then where the page is."""
    from domainbert.report.compare import read_answer

    answer = read_answer(Path(path))
    if answer:
        typer.echo("\n" + answer.rstrip())
    typer.echo(f"report: {path}")


@app.command()
def compare(
    runs: Annotated[
        list[str],
        typer.Argument(help="Finished runs as DOMAIN=RUN_DIR, or run folders (the domain is the folder name)."),
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder of the cross-domain page.")] = Path(
        "runs/cross-domain"
    ),
) -> None:
    """Render the cross-domain page over finished runs (no training; each run must have its report inputs)."""
    from domainbert.report.cross_domain import render_cross_domain

    folders: dict[str, Path] = {}
    for item in runs:
        name, _, folder = item.rpartition("=") if "=" in item else ("", "", item)
        path = Path(folder).resolve()
        if not path.is_dir():
            raise ConfigError(f"no run folder {folder!r}", field="runs")
        key = name or path.name
        if key in folders:
            raise ConfigError(f"two runs are named {key!r}: name them DOMAIN=RUN_DIR", field="runs")
        folders[key] = path
    if len(folders) < 2:
        raise ConfigError("give at least two runs to compare", field="runs")
    typer.echo(f"cross-domain report: {render_cross_domain(folders, out.resolve())}")


@app.command()
def run(
    domain: DomainArg,
    overrides: OverridesArg = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
    out: OutOpt = None,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=0,
            help="Local Dask worker processes for corpus shards and fine-tuning runs (0: in-process).",
        ),
    ] = 0,
) -> None:
    """Run the whole pipeline for a domain through Prefect (embedded local API unless PREFECT_API_URL is set)."""
    cfg, layout = _setup(domain, overrides, profile, out)
    from domainbert.flows.cancelling import stops_recorded_in_the_engine
    from domainbert.flows.options import ExecutionOptions
    from domainbert.flows.pipeline import domain_pipeline
    from domainbert.flows.server import api_for_the_run

    # Signals are recorded in Prefect's engine code and raised in the flow bodies' and stage tasks' starts
    # (``flows.cancelling``), while the temporary server starts at once (``flows.server``); the server dies
    # with this command even on SIGKILL.
    with run_lock(layout.root, f"domainbert run {domain}"), signals.graceful_stop():
        with api_for_the_run(), stops_recorded_in_the_engine():
            path = domain_pipeline(
                domain=str(domain),
                overrides=list(overrides or []),
                profile=profile,
                out=str(layout.root),
                execution=ExecutionOptions(dask_local_workers=workers),
            )
        signals.check("as the run finished")  # recorded after the last stage: every output is complete
    _echo_answer(path)


@app.command()
def plan(
    domain: DomainArg,
    overrides: OverridesArg = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
    out: OutOpt = None,
    estimate: Annotated[bool, typer.Option(help="Estimate durations (--no-estimate: sizes only).")] = True,
    calibrate: Annotated[
        bool,
        typer.Option(help="Time a few steps on this machine, now (cached per shape); --no-calibrate: instant guess."),
    ] = True,
    workers: Annotated[int, typer.Option(min=1, help="Fine-tuning processes the run will use.")] = 1,
    verify: Annotated[
        bool, typer.Option("--verify", help="Hash every recorded file, weights and shards too (else sizes).")
    ] = False,
    detect: Annotated[
        float | None,
        typer.Option(
            "--detect",
            min=0.01,
            help="Points: find the fewest seeds x pretraining replicates that detect this difference with 80% power "
            "at the report's family-wise level, and what they cost here.",
        ),
    ] = None,
) -> None:
    """Show what `domainbert run` would do: stages to run or skip (and why), steps, tokens and FLOPs per arm,
    fine-tuning runs, and an estimated time on this machine. Runs nothing."""
    cfg, layout = _setup(domain, overrides, profile, out, writes=False)
    if verify:
        from domainbert.core.artifacts import verify_everything

        verify_everything()
    from domainbert.run_plan import estimate as estimate_time
    from domainbert.run_plan import render, stage_plans

    plans = stage_plans(cfg, layout)
    timed = estimate_time(cfg, plans, workers, calibrate) if estimate else None
    typer.echo(render(plans, timed.seconds if timed else None, timed))
    from domainbert.report.design import design_power

    for task_power in design_power(cfg, layout):
        typer.echo(task_power.line())
    if detect is not None:
        from domainbert.report.design import detect_lines
        from domainbert.run_plan import design_costs

        costs = design_costs(cfg, workers, calibrate) if estimate else None
        for line in detect_lines(cfg, layout, detect / 100, costs):
            typer.echo(line)
    if estimate and timed is None:
        typer.echo(f"no time estimate: the base model {cfg.base_model.name_or_path} is not reachable from here")
    for line in _flags(cfg, layout.corpus):
        typer.echo(f"warning: {line}")


@app.command()
def push(
    domain: DomainArg,
    repo: Annotated[str, typer.Option("--repo", help="Hub repository id, e.g. 'my-org/science-bert'.")],
    arm: Annotated[
        str | None, typer.Option("--arm", help="The arm to push (continued, extended, scratch, ...) or 'corpus'.")
    ] = None,
    finetuned: Annotated[
        str | None,
        typer.Option(
            "--finetuned",
            help="A fine-tuned model to push, as MODEL/TASK (e.g. continued/science-subject): its best seed.",
        ),
    ] = None,
    base_repo: Annotated[
        str | None,
        typer.Option(
            "--base-repo",
            help="With --finetuned: the Hub id its start was pushed as (an arm, the warmed-up base), named in the "
            "card as base_model.",
        ),
    ] = None,
    overrides: OverridesArg = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
    out: OutOpt = None,
    private: Annotated[bool, typer.Option(help="Create the repository private.")] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Print the repo type, every file and the card; send nothing.")
    ] = False,
) -> None:
    """Upload a finished arm (its card with the run's fine-tuning scores), a fine-tuned model (the seed best on
    validation) or the corpus to the Hugging Face Hub.

    The token is read from the HF_TOKEN environment variable only."""
    if (arm is None) == (finetuned is None):
        raise DomainbertError("push takes one of --arm ARM (or corpus) and --finetuned MODEL/TASK", field="--arm")
    if finetuned is not None and finetuned.count("/") != 1:
        raise DomainbertError(f"--finetuned takes MODEL/TASK, not {finetuned!r}", field="--finetuned")
    cfg, layout = _setup(domain, overrides, profile, out)
    from domainbert.hub import push_folder, push_plan

    plan = push_plan(cfg, layout, finetuned or arm or "")
    if base_repo is not None:
        if finetuned is None:
            raise DomainbertError("--base-repo goes with --finetuned MODEL/TASK", field="--base-repo")
        from domainbert.services.cards import with_base_model

        plan = dataclasses.replace(plan, card=with_base_model(plan.card, base_repo))
    elif finetuned is not None and "\nbase_model:" not in plan.card.split("\n---", 1)[0]:
        model = finetuned.partition("/")[0]
        first = (
            f"push it first (domainbert push --arm {model} --repo ORG/NAME) and " if model in cfg.pretrain.arms else ""
        )
        typer.echo(
            f"note: the card names no base_model ({model} has no Hub id): {first}give the repo it was pushed as "
            "with --base-repo, so that the Hub places this model under it"
        )
    paths = push_folder(plan.folder, repo, plan.card, repo_type=plan.repo_type, private=private, dry_run=dry_run)
    verb = "would upload" if dry_run else "uploaded"
    typer.echo(f"{verb} {len(paths)} files to {repo} (repo type {plan.repo_type}):")
    for path in paths:
        typer.echo(f"  {path}")
    if dry_run:
        typer.echo(f"--- README.md (the card uploaded) ---\n{plan.card.rstrip()}\n--- end of card ---")


def main() -> None:
    from domainbert.core import logs

    logs.configure(os.environ.get("DOMAINBERT_LOG_LEVEL", "INFO"))
    logging.getLogger("httpx").setLevel(logging.WARNING)  # else every Prefect API request is logged
    code = run_cli(None)
    # The interpreter's last garbage collection walks every object the run left (models, Prefect's clients):
    # seconds on a busy machine, after a stop too. Nothing left needs a finalizer run by it.
    gc.freeze()
    sys.exit(code)


def run_cli(argv: list[str] | None) -> int:
    """Run the CLI on ``argv`` (None: ``sys.argv``) and return the exit status; user errors print one line.

    Exit status: 0 done; 2 a user error (``DomainbertError``: config, data, model folder, run folder locked) or
    an OS error (a full disk, a permission: one line naming the path);
    128 + the signal number after a stop by Ctrl-C (130), SIGTERM (143) or SIGUSR1 (138): one INFO line names
    the command to rerun to continue.
    """
    command = shlex.join(["domainbert", *(sys.argv[1:] if argv is None else argv)])
    try:
        with signals.stoppable():
            app(args=argv, prog_name="domainbert")  # click exits through SystemExit, usage errors included
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except signals.StopRequested as exc:
        return _stopped(command, exc.signum, exc.where)
    except DomainbertError as exc:
        typer.echo(f"error: {exc}", err=True)
        return 2
    except OSError as exc:  # a full disk, a permission: the machine's state, not a bug (unless a stop caused it)
        if not signals.stop_requested():
            typer.echo(f"error: {os_error_line(exc)}", err=True)
            return 2
        return _stopped(command)
    except BaseException:
        # A stop can surface as another exception: a flow ends Cancelled through Prefect's Abort, Prefect's
        # engine raises its own on SIGTERM.
        if signals.stop_requested():
            return _stopped(command)
        raise
    return 0


def _stopped(command: str, signum: int | None = None, where: str = "") -> int:
    """One INFO line: what stopped, where, and the command that continues the run."""
    signum = signum or signals.requested_signal() or signal.SIGTERM
    at = f" {where}" if where and "second signal" not in where else ""
    line = f"stopped by {signal.Signals(signum).name}{at}; to continue, rerun: {command}"
    root = logging.getLogger()
    if root.handlers and root.isEnabledFor(logging.INFO):
        # Through the root's handlers alone: Prefect's API handler on "domainbert" has no flow run to log to.
        root.handle(root.makeRecord("domainbert", logging.INFO, __file__, 0, "%s", (line,), None))
    else:  # no logging set up (run_cli called from Python): the line still shows
        typer.echo(f"INFO {line}", err=True)
    return signals.exit_code(signum)


if __name__ == "__main__":
    main()
