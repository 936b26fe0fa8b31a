"""The ``domainbert`` subcommands: ``validate``, one command per stage (``corpus``, ``vocab``, ``pretrain``,
``finetune``, ``report``), ``compare`` across domains, ``run`` for the whole pipeline, ``plan`` and ``push``.

Each command reads its arguments and calls its stage; what the stages do lives in their packages, and what the
commands share (the app, the arguments, the set-up of a run folder) in ``common.py``.
"""

from __future__ import annotations

import dataclasses
import glob
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from domainbert.cli.common import DomainArg, OutOpt, OverridesArg, ProfileOpt, app, echo_answer, flags, set_up, stage
from domainbert.config.domain import DEFAULT_PROFILE, DomainConfig, load_domain, recorded_invocation
from domainbert.core import signals
from domainbert.core.errors import ConfigError, DomainbertError
from domainbert.core.paths import available_domains, default_run_dir, resolve_domain_file
from domainbert.core.runlock import run_lock

if TYPE_CHECKING:
    from domainbert.hub import PushPlan


@app.command()
def validate(
    domains: Annotated[
        list[str] | None,
        typer.Argument(help="Domains to check (default: all), and overrides (key=value) applied to each, as `run`'s."),
    ] = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
) -> None:
    """Validate domain YAMLs (all of domains/ by default), their local corpus sources and task files, under the
    overrides given (so that `validate science "pretrain.arms=[continued,scratch]"` checks what `run` would run).

    Each local corpus file is read on a sample by the corpus stage's reader: an empty file, one that is not
    UTF-8 or not in its format is an error naming the file and line; files too small for the domain vocabulary
    (2 words per token) are an error naming the largest size they can hold.

    Every task is read as fine-tuning will read it (formats, splits, label sets, tag scheme), so a wrong
    label set is found before the corpus, vocabulary and pretraining stages run. Each problem is one line;
    any problem exits with status 2.
    """
    problems = 0
    overrides = [d for d in domains or [] if "=" in d]
    names = [d for d in domains or [] if "=" not in d]
    for name in names or available_domains():
        try:
            cfg = load_domain(name, overrides, profile=profile)
        except DomainbertError as exc:
            typer.echo(f"error: {exc}", err=True)
            problems += 1
            continue
        found = _check_inputs(cfg)
        for line in found:
            typer.echo(f"error: {line}", err=True)
        problems += len(found)
        for line in flags(cfg, default_run_dir(cfg.name) / "corpus"):
            typer.echo(f"warning: {line}", err=True)
        if not found:
            typer.echo(
                f"ok  {cfg.name} ({profile}): {len(cfg.corpus.sources)} source(s), "
                f"arms {', '.join(cfg.pretrain.arms)}, tasks {', '.join(t.name for t in cfg.finetune.tasks)} "
                f"[{resolve_domain_file(name)}]"
            )
    if problems:
        raise typer.Exit(2)


def _check_inputs(cfg: DomainConfig) -> list[str]:
    """One line per problem of the local corpus sources and the tasks (Hugging Face ones need the network)."""
    from domainbert.corpus.filters import build_pipeline
    from domainbert.corpus.source_check import check_local_source, vocab_size_problem
    from domainbert.task_data.splits import load_task

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
    if not found and (line := vocab_size_problem(cfg, resolve_domain_file(cfg.name))):
        found.append(line)  # else the vocabulary stage says it, once the corpus is built
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

    with stage("corpus", domain, overrides, profile, out) as (cfg, layout):
        build_corpus(cfg, layout)
    typer.echo(f"corpus: {layout.corpus}")


@app.command()
def vocab(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Train the domain tokenizer, measure its fit with the reference vocabularies, build the extended model."""
    from domainbert.vocab.stage import run_vocab

    with stage("vocab", domain, overrides, profile, out) as (cfg, layout):
        run_vocab(cfg, layout)
    typer.echo(f"vocab: {layout.vocab}")


@app.command()
def pretrain(
    domain: DomainArg,
    overrides: OverridesArg = None,
    profile: ProfileOpt = DEFAULT_PROFILE,
    out: OutOpt = None,
    arm: Annotated[
        list[str] | None,
        typer.Option("--arm", help="Arm(s) to train, <arm>@r<r> for a replicate (default: every arm and replicate)."),
    ] = None,
) -> None:
    """Masked-LM pretraining of each arm of `pretrain.arms` (continued, control, extended, scratch, the
    task-text arms) on its budget, and of each arm's pretraining replicates (`pretrain.replicates`), as
    `domainbert run` trains them."""
    from domainbert.pretrain.stage import pretrain_arm

    with stage("pretrain", domain, overrides, profile, out) as (cfg, layout):
        for name in arm or cfg.pretrain.replicate_names():
            pretrain_arm(cfg, name, layout)
            typer.echo(f"pretrain {name}: {layout.pretrained_model(name)}")


@app.command()
def finetune(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Fine-tune every model on every task over the configured seeds."""
    from domainbert.finetune.matrix import finetune_all

    with stage("finetune", domain, overrides, profile, out) as (cfg, layout):
        finetune_all(cfg, layout)
    typer.echo(f"finetune: {layout.root / 'finetune'}")


@app.command()
def report(
    domain: DomainArg, overrides: OverridesArg = None, profile: ProfileOpt = DEFAULT_PROFILE, out: OutOpt = None
) -> None:
    """Render the comparison report from a run's artifacts (no retraining): the configuration the run was made
    with (its profile and overrides, from `config.resolved.json`), with any overrides given here on top. A
    report using fewer results than the one in `report/` is written beside it, never over it."""
    recorded = recorded_invocation(out or default_run_dir(load_domain(domain, [], profile=profile).name))
    if recorded is not None and recorded != (DEFAULT_PROFILE, []):
        given = list(overrides or [])
        profile = recorded[0] if profile == DEFAULT_PROFILE else profile
        overrides = [*recorded[1], *given]  # later overrides win: the ones given here
        on_top = f", with {given} on top" if given else ""
        typer.echo(
            f"report: as the run was made: profile {recorded[0]}, overrides {recorded[1] or 'none'}{on_top}", err=True
        )
    cfg, layout = set_up(domain, overrides, profile, out, create=False)
    from domainbert.report.compare import render_report, require_run_outputs

    require_run_outputs(cfg, layout)
    with run_lock(layout.root, f"domainbert report {domain}"):
        path = render_report(cfg, layout)
    echo_answer(path)


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
    cfg, layout = set_up(domain, overrides, profile, out)
    from domainbert.finetune.jobs import require_planned_original

    require_planned_original(cfg, layout)  # not after the pretraining its fine-tuning would wait for
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
    echo_answer(path)


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
    workers: Annotated[
        int,
        typer.Option(
            min=0,
            help="Fine-tuning runs at once, as `run --workers` takes it (0, run's default: one at a time, in-process).",
        ),
    ] = 0,
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
    cfg, layout = set_up(domain, overrides, profile, out, writes=False)
    if verify:
        from domainbert.core.artifacts import verify_everything

        verify_everything()
    from domainbert.plan.estimate import estimate as estimate_time
    from domainbert.plan.stage_plans import render, stage_plans

    plans = stage_plans(cfg, layout)
    measured: dict[tuple[str, int], Any] = {}  # fine-tuning probes, timed once for the plan and --detect
    timed = estimate_time(cfg, plans, workers, calibrate, measured) if estimate else None
    typer.echo(render(plans, timed.seconds if timed else None, timed))
    from domainbert.plan.design_power import design_power

    for task_power in design_power(cfg, layout):
        typer.echo(task_power.line())
    if detect is not None:
        from domainbert.plan.design_power import detect_lines
        from domainbert.plan.estimate import design_costs

        costs = design_costs(cfg, workers, calibrate, measured) if estimate else None
        for line in detect_lines(cfg, layout, detect / 100, costs):
            typer.echo(line)
    if estimate and timed is None:
        typer.echo(f"no time estimate: the base model {cfg.base_model.name_or_path} is not reachable from here")
    for line in flags(cfg, layout.corpus):
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
    cfg, layout = set_up(domain, overrides, profile, out)
    from domainbert.hub import push_folder, push_plan

    plan = _with_base_repo(push_plan(cfg, layout, finetuned or arm or ""), cfg, finetuned, base_repo)
    paths = push_folder(plan.folder, repo, plan.card, repo_type=plan.repo_type, private=private, dry_run=dry_run)
    verb = "would upload" if dry_run else "uploaded"
    typer.echo(f"{verb} {len(paths)} files to {repo} (repo type {plan.repo_type}):")
    for path in paths:
        typer.echo(f"  {path}")
    if dry_run:
        typer.echo(f"--- README.md (the card uploaded) ---\n{plan.card.rstrip()}\n--- end of card ---")


def _with_base_repo(plan: PushPlan, cfg: DomainConfig, finetuned: str | None, base_repo: str | None) -> PushPlan:
    """``plan`` with its card naming ``base_repo`` as its base_model (``--base-repo``, with ``--finetuned`` only);
    without one, a fine-tuned model's card that names no base_model is pushed as it is, after a note saying how
    to name one."""
    if base_repo is not None:
        if finetuned is None:
            raise DomainbertError("--base-repo goes with --finetuned MODEL/TASK", field="--base-repo")
        from domainbert.cards.finetuned_and_corpus import with_base_model

        return dataclasses.replace(plan, card=with_base_model(plan.card, base_repo))
    if finetuned is not None and "\nbase_model:" not in plan.card.split("\n---", 1)[0]:
        model = finetuned.partition("/")[0]
        first = (
            f"push it first (domainbert push --arm {model} --repo ORG/NAME) and " if model in cfg.pretrain.arms else ""
        )
        typer.echo(
            f"note: the card names no base_model ({model} has no Hub id): {first}give the repo it was pushed as "
            "with --base-repo, so that the Hub places this model under it"
        )
    return plan
