"""The `weavegym` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Desktop VMs behind the Gymnasium API.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (ratios within one run, medians).")
app.add_typer(bench_app, name="bench")
err = Console(stderr=True)

DEFAULT_CACHE = Path.home() / ".cache" / "weavegym"


@app.command()
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    cache_dir: Path = typer.Option(DEFAULT_CACHE, help="Where images and probe results are cached."),
) -> None:
    """Check this host: KVM (really booted), QEMU, libvirt, Xvfb, debootstrap, disk space."""
    from weavegym.envs.doctor import checks_to_json, render_checks, run_checks

    checks = run_checks(cache_dir)
    if as_json:
        print(checks_to_json(checks))
    else:
        render_checks(checks, Console())
    if any(c.required and not c.ok for c in checks):
        raise typer.Exit(1)


@bench_app.command("agent")
def bench_agent(
    iterations: int = typer.Option(200, min=5, help="Timed calls per case."),
    width: int = typer.Option(1280, min=64),
    height: int = typer.Option(720, min=64),
) -> None:
    """Round trips of screenshot, input and `exec true` against an agent on a private Xvfb; prints JSON."""
    from weavegym.envs.bench_agent import AgentBenchConfig, run_agent_bench

    columns = (TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=not err.is_terminal) as bar:

        def progress(name: str, total: int):
            task = bar.add_task(name, total=total)
            return lambda: bar.advance(task)

        result = run_agent_bench(AgentBenchConfig(iterations=iterations, width=width, height=height), progress)
    print(json.dumps(result, indent=2))


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
