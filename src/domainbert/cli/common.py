"""What every ``domainbert`` subcommand shares: the Typer app and its global options (``--version``,
``--verbose``), the arguments a stage command takes (domain, overrides, ``--profile``, ``--out``) with their
shell completion, and a stage's set-up: the config, the run folder checked to be writable, the run's lock and
the record of what it runs with.

The subcommands themselves are ``commands.py``'s; exit statuses and stops are the package's (``run_cli``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from domainbert import __version__
from domainbert.config.domain import DomainConfig, load_domain, save_resolved_config
from domainbert.core.errors import ConfigError
from domainbert.core.paths import RunLayout, available_domains, default_run_dir, resolve_domain_file
from domainbert.core.runlock import run_lock

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Domain-adaptive pretraining for BERT-style encoders.",
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


def set_up(
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
    if cfg.finetune.lr_grid or cfg.finetune.early_stopping == "reference":  # the recipe its searches chose
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
def stage(
    command: str, domain: str, overrides: list[str] | None, profile: str, out: Path | None
) -> Iterator[tuple[DomainConfig, RunLayout]]:
    """``set_up``, then the run folder's lock, and only under it the record of the profile and overrides the
    stage runs with (as ``run`` does): a command refused by the lock leaves the run it was refused from as it
    was, ``config.resolved.json`` included."""
    cfg, layout = set_up(domain, overrides, profile, out)
    with run_lock(layout.root, f"domainbert {command} {domain}"):
        save_resolved_config(layout.root, domain, profile, list(overrides or []), cfg)
        yield cfg, layout


def flags(cfg: DomainConfig, corpus_dir: Path) -> list[str]:
    """Settings far from the literature's, a budget far from one pass over the corpus (before it exists, over
    the most its source files can hold), tasks whose splits share examples (``config_flags``): warnings."""
    from domainbert.config_flags import all_flags
    from domainbert.corpus.source_check import source_tokens_at_most

    return all_flags(cfg, corpus_dir, source_tokens_at_most(cfg.corpus.sources))


def echo_answer(path: str | Path) -> None:
    """The report's answer (headline table, verdict, power) in plain text, then where the page is."""
    from domainbert.report.compare import read_answer

    answer = read_answer(Path(path))
    if answer:
        typer.echo("\n" + answer.rstrip())
    typer.echo(f"report: {path}")
