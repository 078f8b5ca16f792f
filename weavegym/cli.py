"""The `weavegym` command line."""

from __future__ import annotations

import json
import os
import signal
import statistics
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from weavegym.core.errors import WeaveGymError
from weavegym.core.paths import default_cache_dir

if TYPE_CHECKING:
    from collections.abc import Callable
    from concurrent.futures import ProcessPoolExecutor
    from multiprocessing.process import BaseProcess

    from weavegym.ops.validation_resume import PlannedRun

app = typer.Typer(add_completion=False, no_args_is_help=True, help="Desktop VMs behind the Gymnasium API.")
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks (ratios within one run, medians).")
app.add_typer(bench_app, name="bench")
image_app = typer.Typer(no_args_is_help=True, help="Guest images: build (cached by recipe hash), list, rm.")
app.add_typer(image_app, name="image")
err = Console(stderr=True)


@dataclass
class _Options:
    debug: bool = False  # --debug: let a WeaveGymError's full traceback through instead of one line


_options = _Options()


def _print_version(value: bool) -> None:
    if value:
        from weavegym.core.version import __version__

        print(f"weavegym {__version__}")
        raise typer.Exit()


@app.callback()
def _root(version: bool = typer.Option(False, "--version", is_eager=True, callback=_print_version,
                                       help="Print the version and exit."),
          debug: bool = typer.Option(False, "--debug", help="Show full tracebacks of weavegym's own errors.")) -> None:
    """Desktop VMs behind the Gymnasium API."""
    _options.debug = debug

DEFAULT_CACHE = default_cache_dir()


@app.command()
def doctor(
    as_json: bool = typer.Option(False, "--json", help="Print the checks as JSON."),
    cache_dir: Path = typer.Option(DEFAULT_CACHE, help="Where images and probe results are cached."),
    refresh: bool = typer.Option(False, help="Probe KVM again instead of using the cached verdict."),
) -> None:
    """Check this host: KVM (really booted), QEMU, libvirt, Xvfb, debootstrap, disk space."""
    from weavegym.ops.doctor import all_required_ok, checks_to_json, render_checks, run_checks

    checks = run_checks(cache_dir, refresh=refresh)
    if as_json:
        print(checks_to_json(checks))
    else:
        render_checks(checks, Console())
    if not all_required_ok(checks):
        raise typer.Exit(1)


@app.command()
def gc(
    cache_dir: Path = typer.Option(DEFAULT_CACHE, help="The cache whose run records to inspect."),
    uri: list[str] = typer.Option([], help="libvirt URIs to scan (default: the local one)."),
    dry_run: bool = typer.Option(False, help="Only report what would be removed."),
) -> None:
    """Remove VMs, overlays and locks left behind by weavegym processes that died."""
    import os

    from weavegym.ops.gc import collect

    uris = uri or ["qemu:///system" if os.geteuid() == 0 else "qemu:///session"]
    report = collect(cache_dir, uris, dry_run=dry_run)
    verb = "would remove" if dry_run else "removed"
    err.print(f"{verb}: {len(report.domains_destroyed)} domains, {len(report.run_dirs_removed)} run dirs "
              f"(overlays), {len(report.locks_removed)} stale locks; {len(report.live)} live VMs and "
              f"{len(report.others)} VMs of other owners left alone; {len(report.states_removed)} prepared "
              "states of removed images")
    for line in report.errors:
        err.print(f"[yellow]{line}[/yellow]")
    print(json.dumps(report.__dict__, indent=2))


@bench_app.command("agent")
def bench_agent(
    iterations: int = typer.Option(200, min=5, help="Timed calls per case."),
    width: int = typer.Option(1280, min=64),
    height: int = typer.Option(720, min=64),
) -> None:
    """Round trips of screenshot, input and `exec true` against an agent on a private Xvfb; prints JSON."""
    from weavegym.ops.bench_agent import AgentBenchConfig, run_agent_bench

    columns = (TextColumn("{task.description:<28}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err, transient=not err.is_terminal) as bar:

        def progress(name: str, total: int):
            task = bar.add_task(name, total=total)
            return lambda: bar.advance(task)

        result = run_agent_bench(AgentBenchConfig(iterations=iterations, width=width, height=height), progress)
    print(json.dumps(result, indent=2))


@bench_app.command("vm")
def bench_vm(
    resets: int = typer.Option(10, min=3, help="Fast-path resets to time."),
    libvirt_resets: int = typer.Option(3, min=1, help="libvirt revertToSnapshot resets to time (~10 s each)."),
    memory_mib: int = typer.Option(2048, min=512),
    accel: str = typer.Option("auto", help="auto (probe KVM), kvm or tcg."),
) -> None:
    """Cold boot, snapshot save, and reset p50/p95 both ways (in-process loadvm vs libvirt revert); JSON."""
    from weavegym.machine.backends.libvirt_vm import LibvirtConfig
    from weavegym.ops.bench_vm import VMBenchConfig, run_vm_bench

    config = VMBenchConfig(resets=resets, libvirt_resets=libvirt_resets,
                           vm=LibvirtConfig(memory_mib=memory_mib, accel=accel))
    with err.status("starting") as status:
        result = run_vm_bench(config, progress=lambda msg: status.update(msg))
    print(json.dumps(result, indent=2))


@bench_app.command("scale")
def bench_scale(
    task_id: str = typer.Option("Weave-Productivity-1", "--task", help="Task every env runs."),
    sizes: str = typer.Option("1,2,4", help="Comma-separated numbers of envs."),
    steps: int = typer.Option(20, min=3, help="Vector steps timed per size."),
    prepared_states: bool = typer.Option(False, help="Envs start from the host's prepared states."),
) -> None:
    """Env-steps per second of gym.make_vec(async) for several sizes, with QEMU RSS and CPU per env; JSON."""
    from weavegym.ops.bench_scale import ScaleBenchConfig, run_scale_bench

    config = ScaleBenchConfig(task_id, tuple(int(s) for s in sizes.split(",")), steps, prepared_states)
    with err.status("starting") as status:
        result = run_scale_bench(config, progress=lambda m: status.update(m))
    print(json.dumps(result, indent=2))


@app.command()
def tasks(
    pattern: str = typer.Argument("Weave-*", help="Shell-style id pattern."),
    tasks_md: Path | None = typer.Option(None, "--tasks-md", help="Write the TASKS.md table instead of listing."),
    from_json: list[Path] = typer.Option([], "--from-json", help="`validate --json` record folders or files to take "
                                         "figures from."),
    measured_with: str = typer.Option("`weavegym validate`", help="TASKS.md: how the figures were measured."),
    keep: Path | None = typer.Option(None, "--keep", help="An earlier TASKS.md whose figures stay for the tasks "
                                     "that the --from-json files do not cover."),
    plot: Path | None = typer.Option(None, "--plot", help="Draw the same figures as an SVG: each task's adversaries "
                                     "against its pass threshold, and its times."),
    plot_note: str = typer.Option("", help="--plot: a line under the title, e.g. the run the figures come from."),
) -> None:
    """List the registered tasks: id, profile, steps, clauses and why both channels are needed."""
    from rich.table import Table

    from weavegym.envs.tasks import draft_tasks, match_tasks

    if tasks_md is not None or plot is not None:
        from weavegym.ops.record_store import read_reports
        from weavegym.ops.suite_plot import suite_svg
        from weavegym.ops.suite_report import stats_from_markdown, suite_stats, tasks_markdown

        missing = [str(path) for path in from_json if not path.exists()]
        if missing:
            err.print(f"no such --from-json record: {', '.join(missing)}", markup=False, highlight=False)
            raise typer.Exit(2)
        reports = [r for path in from_json for r in read_reports(path)]
        kept = stats_from_markdown(keep.read_text()) if keep is not None else None
        selected = match_tasks(pattern)
        if tasks_md is not None:
            tasks_md.write_text(tasks_markdown(selected, reports, command=measured_with, kept=kept))
            err.print(f"wrote {tasks_md} from {len(reports)} validation report(s)")
        if plot is not None:
            plot.write_text(suite_svg(selected, suite_stats(reports, kept), subtitle=plot_note))
            err.print(f"wrote {plot} from {len(reports)} validation report(s)" + (f" and {keep}" if keep else ""))
        return
    table = Table("id", "title", "profile", "max steps", "clauses", "why GUI and CLI")
    for task in match_tasks(pattern):
        table.add_row(task.id, task.title, task.profile, str(task.max_steps), str(len(task.clauses)),
                      task.channels.why_both)
    console = _wide_console()
    console.print(table)
    drafts = draft_tasks()
    if drafts:  # named so that nobody mistakes them for missing, and nobody scores on them
        console.print(f"{len(drafts)} draft(s), not in the suite until validated (name the id to validate one):")
        for task in drafts:
            console.print(f"  {task.id}: {task.title} ({task.draft})", markup=False)


def _wide_console() -> Console:
    """Tables go to stdout; when that is a file or pipe (CI logs), do not squeeze them into 80 columns."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


@app.command()
def validate(
    pattern: str = typer.Argument("Weave-*", help="Shell-style id patterns, comma-separated, e.g. "
                                  "'Weave-DevOps-*,Weave-Web-1'."),
    seeds: list[int] = typer.Option([0], "--seed", min=0, help="Task seed; repeat the option to validate every task on "
                                    "each seed (e.g. --seed 0 --seed 3 --seed 6: three variants of every task)."),
    profile: str | None = typer.Option(None, help="Only tasks that run on this image profile (base or full)."),
    repeat: int = typer.Option(1, min=1, help="Validate every task this many times per seed; reports the flake "
                               "rate."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the results (with evaluations) to a "
                                         "record folder (a folder, or a new path without a suffix: a file per "
                                         "task, clean runs' evaluations trimmed, e.g. the suite's record/) or to "
                                         "one file (whole reports). Other tasks' runs already there stay; this "
                                         "run's tasks get this run's runs."),
    tasks_md: Path | None = typer.Option(None, "--tasks-md", help="Also write the TASKS.md table of these tasks."),
    plot: Path | None = typer.Option(None, "--plot", help="Also draw the figures as an SVG (adversaries against "
                                     "the pass threshold, times), as `weavegym tasks --plot` does."),
    workers: int = typer.Option(1, min=1, help="Tasks validated at once, one VM and one process each (a 2-core "
                                "host gains from 2, not more)."),
    prepared_states: bool = typer.Option(False, help="Envs restore the host's prepared states (no boot per task)."),
    record: Path | None = typer.Option(None, help="Write every run's episode (frames, steps, evaluation) under "
                                       "this folder (a folder per seed when there are several), as `weavegym run "
                                       "--out` does: `weavegym report` shows them."),
    retry_errors: int = typer.Option(1, min=0, help="Run a task again, up to this many times, when its run ended in "
                                     "an env error (a VM or the agent lost, a worker died) rather than with scores; "
                                     "the report keeps the errors it replaced."),
    resume: bool = typer.Option(False, help="Keep the finished task runs the --json record holds for these seeds and "
                                "this code, and run only the rest (a suite run cut short goes on where it stopped; "
                                "runs made by other code, or that ended in an env error, run again; the code is "
                                "compared per task: the task's own modules and everything outside the suite)."),
    plan_only: bool = typer.Option(False, "--plan", help="Only list the task runs this command would run (with "
                                   "--resume: those the --json record does not keep, and why) and about how long "
                                   "they take, from its earlier runs of the same tasks; boots and writes nothing."),
) -> None:
    """Per task: the oracle must score 1.0, doing nothing 0, and the cli-only, gui-only and forger adversaries
    and the hybrid backdoor, linker and swapper must each stay below the pass threshold (tasks with infeasible
    variants: on a seed of each kind, with the quitter and the fabricator too)."""
    from weavegym.envs.tasks import all_tasks, draft_tasks, get_task, match_tasks
    from weavegym.ops.record_store import is_folder, read_reports, write_reports
    from weavegym.ops.suite_report import flake_rate, task_stats, tasks_markdown
    from weavegym.ops.validation import run_count
    from weavegym.ops.validation_resume import (
        Carried,
        Job,
        carry_over,
        code_digest,
        in_job_order,
        in_suite_order,
        of_other_tasks,
        plan_runs,
        stamp_unless_changed,
        task_module,
    )
    from weavegym.vm_images.recipe import ImageRecipe

    selected = [t for t in match_tasks(pattern) if profile is None or t.profile == profile]
    if not selected:
        err.print(f"[red]no task matches {pattern!r}" + (f" with profile {profile!r}" if profile else "") + "[/red]")
        raise typer.Exit(2)
    if resume and json_out is None:
        err.print("[red]--resume needs --json: the record that holds the runs to keep[/red]")
        raise typer.Exit(2)
    if json_out is not None and not plan_only and not is_folder(json_out):
        json_out.parent.mkdir(parents=True, exist_ok=True)  # a record folder is made with its first file
    seeds = list(dict.fromkeys(seeds))  # each once, in the order given
    # Task by task, each on every seed and repeat: a run cut short leaves whole rows of TASKS.md, not a third of each.
    jobs = [(seed, k, task.id) for task in selected for k in range(repeat) for seed in seeds]
    codes = {task.id: code_digest(task_module(task)) for task in selected}
    # The image each task's VMs boot (the env's default distro): its name carries a digest of the recipe, the
    # guest agent and the gRPC it pins, so a report says which guest made its scores, even across sittings.
    images = {profile: ImageRecipe(profile).name for profile in {task.profile for task in selected}}
    saved = read_reports(json_out) if json_out is not None else []  # anything else there: refused, kept
    carried = carry_over(saved, jobs, codes) if resume else Carried({})
    others = of_other_tasks(saved, codes)  # kept in the record as they are
    if resume and json_out is not None:
        err.print(carried.summary(json_out))
    if plan_only:
        _print_plan(plan_runs(jobs, saved, carried, resume=resume), len(carried.kept), workers,
                    title=f"weavegym validate {pattern}: the plan")
        return
    if others:
        err.print(f"{json_out}: the {len(others)} run(s) of {len({r.get('task_id') for r in others})} other task(s) "
                  "it holds stay as they are", markup=False, highlight=False)
    suite_ids = [t.id for t in (*all_tasks(), *draft_tasks())]

    def write(reports: list[dict[str, object]]) -> None:
        """This run's reports in the jobs' order, among the other tasks' in the suite's order (a single file
        holds them all; a record folder rewrites only the files of this run's tasks whose runs changed)."""
        assert json_out is not None
        write_reports(json_out, in_suite_order([*others, *reports], suite_ids), tasks=codes)

    finished: dict[Job, dict[str, object]] = dict(carried.kept)
    # Jobs run again after an env error (in this run, or in the run --resume goes on from): those errors, oldest first.
    earlier_errors: dict[Job, list[str]] = dict(carried.errors)
    walls: list[float] = []  # wall time of each job this run finished

    def save(job: Job, report: dict[str, object]) -> None:
        """Keep the report; the file is rewritten as runs finish, so a long suite run keeps what it measured.

        A report whose task's code changed on disk while the run went on is stamped as no code's."""
        report = {**report, "image": images[get_task(job[2]).profile]}
        if job in earlier_errors:
            report = {**report, "earlier_errors": earlier_errors[job]}
        finished[job], changed = stamp_unless_changed(report, job[0], task_module(get_task(job[2])), codes[job[2]])
        if changed:
            err.print(f"[yellow]{job[2]}: its code changed during the run; its report will not be resumed[/yellow]")
        if not report.get("error") and "wall_s" in report:  # a run lost early says nothing of how long runs take
            walls.append(float(str(report["wall_s"])))
        progress = f"{len(finished)}/{len(jobs)}" + _time_left(walls, len(jobs) - len(finished), workers)
        err.print(_finished_line(job, finished[job], progress), markup=False, highlight=False)
        if json_out is not None:
            write(in_job_order(jobs, finished))

    todo = [job for job in jobs if job not in finished]

    def record_to(seed: int) -> Path | None:
        """Episodes of several seeds go to a folder each: a report lists one run of a task per episode number."""
        return None if record is None else record if len(seeds) == 1 else record / f"seed{seed}"

    columns = (TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err) as bar:
        planned = sum(run_count(get_task(task_id)) for _s, _k, task_id in jobs)
        overall = bar.add_task("runs", total=planned)
        bar.update(overall, advance=sum(run_count(get_task(task_id)) for _s, _k, task_id in carried.kept))
        batch = todo
        for attempt in range(retry_errors + 1):
            if attempt:  # an env error says nothing of the task's scores: give it another VM
                for job in batch:
                    earlier_errors[job] = [*earlier_errors.get(job, []), str(finished[job]["error"])]
                err.print(f"{len(batch)} task run(s) ended in an env error; running them again "
                          f"({attempt} of {retry_errors}): {', '.join(f'{t} seed {sd}' for sd, _k, t in batch)}")
                planned += sum(run_count(get_task(task_id)) for _s, _k, task_id in batch)
                bar.update(overall, total=planned)
            if workers == 1:
                _validate_serially(batch, bar, overall, save, prepared_states, record_to)
            elif batch:
                _validate_in_parallel(batch, workers, bar, overall, save, prepared_states, record_to)
            batch = [job for job in batch if finished[job].get("error")]
            if not batch:
                break
    reports = in_job_order(jobs, finished)
    if json_out is not None:  # also when nothing was left to run: this run's tasks then hold this run's jobs only
        write(reports)
    if record is not None:
        where = [record_to(seed) for seed in seeds]
        err.print(f"episodes: {', '.join(map(str, where))} (`weavegym report {where[0]}`)")
    _print_validation(reports, title=f"weavegym validate {pattern} (seed {', '.join(map(str, seeds))})")
    stats = task_stats(reports)
    failed, total = flake_rate(stats)
    if repeat > 1 or len(seeds) > 1:
        flaky = [s.task_id for s in stats.values() if s.flaky]
        err.print(f"{failed} of {total} task runs had a violation; flaky (mixed results): {', '.join(flaky) or 'none'}")
    command = f"weavegym validate '{pattern}'" + (f" --profile {profile}" if profile else "") + \
        "".join(f" --seed {seed}" for seed in seeds) + f" --repeat {repeat}" + \
        (" --prepared-states" if prepared_states else "")
    if tasks_md is not None:
        tasks_md.write_text(tasks_markdown(selected, reports, command=f"`{command}`"))
    if plot is not None:
        from weavegym.ops.suite_plot import suite_svg

        plot.write_text(suite_svg(selected, stats, subtitle=command))
    if failed:
        errors = sum(1 for report in reports if report.get("error"))
        err.print(f"[red]{failed} of {total} task run(s) violate the suite's rules[/red]" +
                  (f" ({errors} of them ended in an env error, not with scores: run again with --resume to retry "
                   "them)" if errors else ""))
        raise typer.Exit(1)


def _time_left(walls: list[float], left: int, workers: int) -> str:
    """About how long the jobs left take, from the mean job so far (a sum of jobs: the median, on a few quick tasks,
    said 1 h 14 min where about 5 h were left); a suite run is hours long."""
    if not walls or not left:
        return ""
    return f", {_about(statistics.fmean(walls) * left / workers / 60)} left"


def _about(minutes: float) -> str:
    whole = round(minutes)
    if whole >= 60:
        return f"about {whole // 60} h {whole % 60:02d} min"
    return f"about {whole} min" if whole else "under a minute"


def _print_plan(planned: list[PlannedRun], kept: int, workers: int, title: str) -> None:
    """``validate --plan``: a row per task and reason, then the total, so the cost of a change to the suite's
    record (which tasks its digest makes run again) is known before hours of VM time are spent on it."""
    from rich.table import Table

    from weavegym.ops.validation_resume import planned_minutes

    rows: dict[tuple[str, str], list[PlannedRun]] = {}
    for run in planned:
        rows.setdefault((run.job[2], run.why), []).append(run)
    if rows:
        table = Table("task", "seeds", "runs", "why they run", "min a run (earlier)", title=title)
        for (task_id, why), runs in rows.items():
            table.add_row(task_id, ", ".join(dict.fromkeys(str(run.job[0]) for run in runs)), str(len(runs)), why,
                          "-" if runs[0].minutes is None else f"{runs[0].minutes:.1f}")
        _wide_console().print(table)
    minutes, untimed = planned_minutes(planned, workers)
    line = f"{len(planned)} task run(s) to run, {kept} kept"
    if planned and untimed == len(planned):
        line += ": no earlier run of these tasks to time them by"
    elif planned:
        line += f": {_about(minutes)} with {workers} worker(s), from the record's earlier runs of the same tasks"
        line += f" ({untimed} with none to go by)" if untimed else ""
    _wide_console().print(line, markup=False, highlight=False)


def _finished_line(job: tuple[int, int, str], report: Mapping[str, Any], progress: str) -> str:
    """One line per finished task run, above the bar: a suite run's log (nohup, CI) shows its progress too, where
    rich draws no bar."""
    seed, k, task_id = job
    violations = list(report.get("violations") or [])
    if report.get("error"):
        verdict = f"env error: {report['error']}"
    else:
        verdict = "clean" if not violations else f"{len(violations)} violation(s): {'; '.join(violations)}"
        if "wall_s" in report:  # the whole job: the VM's start or restore and its close too
            verdict += f" ({float(report['wall_s']) / 60:.1f} min)"
    line = f"{time.strftime('%H:%M:%S')} [{progress}] {task_id} seed {seed} #{k + 1}: {verdict}"
    return line if len(line) <= 200 else line[:199] + "…"


def _validate_serially(jobs: list[tuple[int, int, str]], bar: Progress, overall: TaskID,
                       save: Callable[[tuple[int, int, str], dict[str, object]], None], prepared_states: bool,
                       record_to: Callable[[int], Path | None]) -> None:
    """One task after the other in this process; the bar advances with every run, ``save`` gets each report."""
    from dataclasses import asdict

    from weavegym.envs.tasks import get_task
    from weavegym.ops.validation import validate_task

    for seed, k, task_id in jobs:
        bar.update(overall, description=f"{task_id} (boot, setup) seed {seed} #{k + 1}")

        def advance(run: str, result: object, task_id: str = task_id) -> None:
            bar.update(overall, advance=1, description=f"{task_id} {run} done")

        started = time.monotonic()
        report = validate_task(get_task(task_id), seed=seed, on_run=advance, prepared_states=prepared_states,
                               record=record_to(seed), repeat=k)
        save((seed, k, task_id), asdict(report) | {"violations": report.violations(), "repeat": k,
                                                   "wall_s": round(time.monotonic() - started, 1)})


def _validate_in_parallel(jobs: list[tuple[int, int, str]], workers: int, bar: Progress, overall: TaskID,
                          save: Callable[[tuple[int, int, str], dict[str, object]], None], prepared_states: bool,
                          record_to: Callable[[int], Path | None]) -> None:
    """Tasks over ``workers`` spawned processes (one VM each); the bar advances as tasks finish.

    ``save`` gets each report as its task finishes; it keeps the serial order (the jobs' order), so the JSON and
    TASKS.md do not depend on the number of workers.
    """
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from weavegym.envs.tasks import get_task
    from weavegym.ops.validation import run_count

    spawn = mp.get_context("spawn")  # a fresh interpreter per worker: no inherited gRPC or libvirt state
    pool = ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=spawn, initializer=_unwind_on_sigterm,
                               initargs=(os.getpid(),))
    try:
        futures = {pool.submit(_validate_job, task_id, seed, k, prepared_states, record_to(seed)): i
                   for i, (seed, k, task_id) in enumerate(jobs)}
        bar.update(overall, description=f"{len(jobs)} task runs on {min(workers, len(jobs))} workers")
        for future in as_completed(futures):
            i = futures[future]
            seed, k, task_id = jobs[i]
            try:
                report = future.result()
            except Exception as exc:  # the worker process itself died (OOM kill, segfault): that task's error
                report = {"task_id": task_id, "pass_threshold": get_task(task_id).pass_threshold, "results": {},
                          "repeat": k, "seed": seed,
                          "error": f"worker failed: {type(exc).__name__}: {exc}",
                          "violations": [f"error: worker failed: {type(exc).__name__}: {exc}"]}
            save((seed, k, task_id), report)
            bar.update(overall, advance=run_count(get_task(task_id)),
                       description=f"{task_id} seed {seed} #{k + 1} done")
    except BaseException:  # Ctrl-C or SIGTERM: stop the workers now, not after their tasks (minutes each)
        _stop_workers(pool, mp.active_children())
        raise
    pool.shutdown()


@app.command()
def prepare(
    pattern: str = typer.Argument("Weave-*", help="Shell-style id patterns, comma-separated."),
    variants: int = typer.Option(8, min=1, help="Prepare task variants 0..N-1 of each task."),
    profile: str | None = typer.Option(None, help="Only tasks that run on this image profile (base or full)."),
    workers: int = typer.Option(1, min=1, help="Tasks prepared at once, one VM and one process each."),
    json_out: Path | None = typer.Option(None, "--json", help="Also write each variant's result."),
) -> None:
    """Set task variants up once on this host, as prepared states that every env with
    ``prepared_states=True`` restores in about a second (missing ones are otherwise built on demand)."""
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    from rich.table import Table

    from weavegym.envs.tasks import match_tasks
    from weavegym.ops.prepare import prepare_by_id, prepare_task

    selected = [t for t in match_tasks(pattern) if profile is None or t.profile == profile]
    if not selected:
        err.print(f"[red]no task matches {pattern!r}" + (f" with profile {profile!r}" if profile else "") + "[/red]")
        raise typer.Exit(2)
    seeds = list(range(variants))
    results: dict[str, list[dict[str, object]]] = {}
    columns = (TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err) as bar:
        overall = bar.add_task("variants", total=len(selected) * variants)
        if workers == 1:
            for task in selected:
                bar.update(overall, description=f"{task.id} (boot or restore)")

                def advance(variant: int, _result: object, task_id: str = task.id) -> None:
                    bar.update(overall, advance=1, description=f"{task_id} variant {variant} ready")

                results[task.id] = prepare_task(task.id, seeds, on_variant=advance)
        else:
            pool = ProcessPoolExecutor(max_workers=min(workers, len(selected)), mp_context=mp.get_context("spawn"),
                                       initializer=_unwind_on_sigterm, initargs=(os.getpid(),))
            try:
                futures = {pool.submit(prepare_by_id, task.id, seeds): task.id for task in selected}
                for future in as_completed(futures):
                    results[futures[future]] = future.result()
                    bar.update(overall, advance=variants, description=f"{futures[future]} ready")
            except BaseException:
                _stop_workers(pool, mp.active_children())
                raise
            pool.shutdown()
    table = Table(title=f"weavegym prepare {pattern} --variants {variants}")
    for column in ("task", "built now", "already there", "median setup s", "total s"):
        table.add_column(column)
    for task in selected:
        rows = results[task.id]
        built = [r for r in rows if r["built"]]
        setups = sorted(float(r["setup_s"]) for r in built)  # type: ignore[arg-type]
        table.add_row(task.id, str(len(built)), str(len(rows) - len(built)),
                      f"{setups[len(setups) // 2]:.1f}" if setups else "-",
                      f"{sum(float(r['seconds']) for r in rows):.1f}")  # type: ignore[arg-type]
    _wide_console().print(table)
    if json_out is not None:
        json_out.write_text(json.dumps([r for task in selected for r in results[task.id]], indent=2))


def _validate_job(task_id: str, seed: int, repeat: int, prepared_states: bool,
                  record: Path | None) -> dict[str, object]:
    """A worker's job. On SIGTERM the job unwinds (its env closes and destroys its VM) and then the worker exits:
    a pool worker that returned the interrupt as the job's result went on to the next job queued for it, booting
    another VM while the parent was stopping."""
    from weavegym.ops.validation import validate_by_id

    started = time.monotonic()
    try:
        report = validate_by_id(task_id, seed, repeat, prepared_states, record)
    except KeyboardInterrupt:
        os._exit(130)
    return report | {"wall_s": round(time.monotonic() - started, 1)}


def _unwind_on_sigterm(parent: int) -> None:
    """A worker's start: SIGTERM unwinds it like Ctrl-C, so its env's close() destroys its VM.

    The kernel sends it that SIGTERM also when ``parent`` dies, even by SIGKILL: without it the workers of a
    killed ``validate`` went on booting VMs and playing episodes for minutes, holding the host's cores.
    """
    signal.signal(signal.SIGTERM, _interrupt)
    _terminate_with_parent(parent)


def _terminate_with_parent(parent: int) -> None:
    import ctypes

    pr_set_pdeathsig = 1  # <linux/prctl.h>
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(pr_set_pdeathsig, int(signal.SIGTERM), 0, 0, 0) != 0:
            return  # not Linux, or refused: the lease watchdog still destroys the VM of a killed worker
    except (OSError, AttributeError):
        return
    if os.getppid() != parent:  # the parent died before the request took effect
        os.kill(os.getpid(), signal.SIGTERM)


def _stop_workers(pool: ProcessPoolExecutor, workers: list[BaseProcess], grace_s: float = 60.0) -> None:
    """Cancel what has not started, ask every running worker to unwind, and kill any still alive at the deadline.

    Each worker closes its env as it unwinds (the VM and its overlay go); one that is killed instead leaves
    its VM to the lease watchdog, which destroys it when its owner dies.
    """
    from weavegym.core.deadline import Deadline

    # A second Ctrl-C or SIGTERM (people press twice) must not cut this short: it once left the parent waiting
    # at exit for the pool while both workers went on with their queued tasks for hours.
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        proc.terminate()
    deadline = Deadline(grace_s)
    for proc in workers:
        proc.join(deadline.remaining())
        if proc.is_alive():
            proc.kill()


def _print_validation(reports: list[dict[str, object]], title: str) -> None:
    from rich.table import Table

    from weavegym.ops.validation import INFEASIBLE, RUNS

    # One column per run that any report has, in RUNS order: the abstention runs only where a task has them.
    present = {run for report in reports for run in report["results"]}  # type: ignore[attr-defined]
    names = [run for run in (*RUNS, "quitter") if run in present or run in RUNS]
    names += [run + INFEASIBLE for run in (*RUNS, "quitter", "fabricator") if run + INFEASIBLE in present]
    table = Table("task", "seed", "#", *names, "verdict", title=title)
    for report in reports:
        results: dict[str, dict[str, object]] = report["results"]  # type: ignore[assignment]
        cells = [f"{results[r]['score']:.2f} ({results[r]['steps']} st, {results[r]['seconds']:.0f} s)"
                 if r in results else "-" for r in names]
        problems: list[str] = report["violations"]  # type: ignore[assignment]
        table.add_row(str(report["task_id"]), str(report.get("seed", "")),
                      str(int(report["repeat"]) + 1), *cells,  # type: ignore[call-overload]
                      "[green]ok[/green]" if not problems else "[red]" + "; ".join(problems) + "[/red]")
    _wide_console().print(table)


@bench_app.command("prepared")
def bench_prepared(
    task_id: str = typer.Option("Weave-DevOps-1", "--task", help="Task whose variants to prepare and restore."),
    variants: int = typer.Option(8, min=2, help="Size of the prepared variant pool."),
    new_envs: int = typer.Option(5, min=1, help="New envs whose first reset is timed."),
    resets: int = typer.Option(12, min=3, help="Timed resets per kind (new seed, same seed)."),
    sizes: str = typer.Option("1,2,4", help="Numbers of live envs whose memory is measured."),
) -> None:
    """Prepared states against a cold boot in the same run: new env, new seed, same seed, PSS; prints JSON."""
    from weavegym.ops.bench_prepared import PreparedBenchConfig, run_prepared_bench

    config = PreparedBenchConfig(task_id, variants, new_envs, resets, tuple(int(s) for s in sizes.split(",")))
    with err.status("starting") as status:
        result = run_prepared_bench(config, progress=lambda m: status.update(m))
    print(json.dumps(result, indent=2))


@bench_app.command("env")
def bench_env(
    task_id: str = typer.Option("Weave-Productivity-1", "--task", help="Task whose env to time."),
    iterations: int = typer.Option(20, min=3, help="Timed calls per step kind."),
    resets: int = typer.Option(10, min=3, help="Timed resets to the cached task snapshot."),
    persistent_shell: bool = typer.Option(True, help="The env's shell steps in the agent's long-lived bash "
                                          "(the env's default) or, with --no-persistent-shell, a bash per step."),
) -> None:
    """Through the Gymnasium env: cached reset, GUI step, shell step, frame grabs, checker; prints JSON."""
    from weavegym.ops.bench_env import EnvBenchConfig, run_env_bench

    config = EnvBenchConfig(task_id, iterations, resets, persistent_shell=persistent_shell)
    with err.status("starting") as status:
        result = run_env_bench(config, progress=lambda m: status.update(m))
    print(json.dumps(result, indent=2))


@app.command()
def run(
    agent: str = typer.Option("oracle", help="random, noop, oracle or llm."),
    tasks: str = typer.Option("Weave-*", help="Shell-style pattern(s) of task ids, comma-separated."),
    workers: int = typer.Option(1, min=1, help="Parallel worker processes, one env (VM) each."),
    out: Path = typer.Option(Path("runs/latest"), help="Output directory (one folder per task and episode)."),
    episodes: int = typer.Option(1, min=1, help="Episodes per task (episode k uses task seed SEED+k)."),
    resume: bool = typer.Option(False, help="Skip episodes that already finished in OUT."),
    seed: int = typer.Option(0, help="Task seed of episode 0."),
    max_steps: int | None = typer.Option(None, min=1, help="Override every task's max_steps."),
    prepared_states: bool = typer.Option(False, help="Envs restore the host's prepared states (no boot per task)."),
    llm_base_url: str | None = typer.Option(None, help="llm agent: OpenAI-compatible base URL (…/v1)."),
    llm_model: str | None = typer.Option(None, help="llm agent: model name."),
) -> None:
    """Run an agent over tasks headless; writes steps, frames, evaluations and results.json."""
    from rich.table import Table

    from weavegym.baselines.runner import RunConfig, plan
    from weavegym.baselines.runner import run as run_all
    from weavegym.envs.tasks import match_tasks

    _require_known_agent(agent)  # here, not inside the workers after the VMs booted
    selected = [t.id for t in match_tasks(tasks)]  # e.g. "Weave-Productivity-1,Weave-DevOps-*"
    if not selected:
        err.print(f"[red]no task matches {tasks!r}[/red]")
        raise typer.Exit(2)
    agent_options = {k: v for k, v in {"base_url": llm_base_url, "model": llm_model}.items() if v is not None}
    env_options: dict[str, object] = {"max_steps": max_steps} if max_steps else {}
    if prepared_states:
        env_options["prepared_states"] = True
    config = RunConfig(agent=agent, tasks=tuple(selected), out=out, episodes=episodes, workers=workers,
                       resume=resume, seed=seed, agent_options=agent_options, env_options=env_options)
    columns = (TextColumn("{task.description:<40}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=err) as bar:
        overall = bar.add_task(f"{agent} on {len(selected)} task(s)", total=len(selected) * episodes)
        bar.update(overall, completed=len(plan(config)[1]))  # finished in an earlier run (--resume)

        def progress(summary: dict, _done: int, _total: int) -> None:
            if summary.get("event") == "vnc":
                err.print(f"watch {summary['task_id']} live at {summary['vnc']}")
                return
            score = "error" if summary["status"] == "error" else f"{summary['score']:.2f}"
            bar.update(overall, advance=1, description=f"{summary['task_id']} ep{summary['episode']}: {score}")

        results = run_all(config, progress)
    table = Table("domain", "episodes", "pass rate", "mean score", "mean steps", "mean wall s", "errors",
                  title=f"weavegym run --agent {agent} ({out})")
    for domain, agg in [*results["by_domain"].items(), ("all", results["overall"])]:
        table.add_row(domain, str(agg["episodes"]), f"{agg['pass_rate']:.0%}", f"{agg['mean_score']:.2f}",
                      f"{agg['mean_steps']:.1f}", f"{agg['mean_wall_s']:.0f}", str(agg["errors"]))
    _wide_console().print(table)
    err.print(f"results: {out / 'results.json'}")
    overall = results["overall"]
    unfinished = overall["episodes"] - overall["finished"]
    if unfinished:  # errored or missing episodes: a script or CI job must not take this run as complete
        err.print(f"[red]{unfinished} of {overall['episodes']} episode(s) did not finish "
                  f"({overall['errors']} errored); see their episode.json under {out}[/red]")
        raise typer.Exit(1)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., help="A directory written by `weavegym run`."),
    export: str | None = typer.Option(None, help="Also export every episode as 'gif' or 'mp4'."),
    fps: float = typer.Option(2.0, min=0.1, help="Frames per second of the export."),
) -> None:
    """Write RUN_DIR/report.html: summary tables and, per episode, a timeline of annotated frames."""
    from weavegym.reporting.export import export_episode
    from weavegym.reporting.report import write_report

    if not run_dir.is_dir():
        err.print(f"[red]{run_dir} is not a directory written by `weavegym run`[/red]")
        raise typer.Exit(2)
    if export not in (None, "gif", "mp4"):
        raise typer.BadParameter("--export must be gif or mp4")
    path = write_report(run_dir)
    print(f"report: {path}")
    if export:
        for episode in sorted(p.parent for p in run_dir.glob("*/ep*/steps.jsonl")):
            print(f"{export}: {export_episode(episode, episode / f'episode.{export}', fps=fps)}")


def _require_known_agent(agent: str) -> None:
    """Exit 2 with the list of agents before anything boots: a typo must not cost a VM boot."""
    from weavegym.baselines.factory import POLICY_NAMES

    if agent not in POLICY_NAMES:
        err.print(f"[red]unknown agent {agent!r}; known agents: {', '.join(POLICY_NAMES)}[/red]")
        raise typer.Exit(2)


@app.command()
def debug(
    task_id: str = typer.Argument(..., help="The task to open, e.g. Weave-DevOps-1."),
    agent: str | None = typer.Option(None, help="Step this agent (random, noop, oracle, llm); none: a human drives."),
    seed: int = typer.Option(0, help="Task seed."),
    prepared_states: bool = typer.Option(False, help="Restore the host's prepared states instead of booting."),
) -> None:
    """Boot one episode, print its VNC address and password, step an agent by hand or let a human drive."""
    from weavegym.envs.tasks import get_task
    from weavegym.reporting.debug import debug_episode

    if agent is not None:
        _require_known_agent(agent)
    get_task(task_id)  # an unknown id is a one-line TaskError (exit 1) before anything boots
    debug_episode(task_id, agent, seed, read_line=sys.stdin.readline, out=sys.stdout,
                  env_options={"prepared_states": True} if prepared_states else None)


def _interrupt(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt


@image_app.command("build")
def image_build(
    profile: str = typer.Option("base", help="base (small, for tests) or full (the apps tasks declare)."),
    distro: str = typer.Option("debian-12", help="debian-12, or ubuntu-24.04 (needs the Ubuntu archive)."),
    cache_dir: Path = typer.Option(DEFAULT_CACHE, help="Cache root; images go to CACHE/images/."),
    force: bool = typer.Option(False, help="Rebuild even if a cached image matches the recipe."),
) -> None:
    """Build the guest image for a profile, or reuse the cached one (keyed by a hash of the recipe)."""
    from weavegym.core.errors import HostSetupError
    from weavegym.vm_images.builder import STEPS, build_image
    from weavegym.vm_images.recipe import ImageRecipe

    try:
        recipe = ImageRecipe(profile=profile, distro=distro)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    columns = (TextColumn("{task.description:<12}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.fields[detail]}", style="dim"))
    with Progress(*columns, console=err) as bar:
        task = bar.add_task("image", total=len(STEPS), detail="")
        seen: list[str] = []

        def progress(step: str, detail: str) -> None:
            if step not in seen:
                seen.append(step)
                bar.update(task, completed=STEPS.index(step) + (1 if step == "finish" else 0),
                           description=step)
            bar.update(task, detail=detail[:60])

        try:  # SIGTERM unwinds like Ctrl-C (see main), so the build removes its work dir
            image = build_image(recipe, cache_dir, progress, force=force)
        except HostSetupError as exc:
            err.print(f"[red]image build failed:[/red] {exc}")
            raise typer.Exit(1) from None
    m = image.manifest
    err.print(f"image {image.name}: {m['disk_bytes'] / 2**20:.0f} MiB qcow2, kernel {m['kernel_version']}, "
              f"built in {m['build_seconds']} s")
    print(image.path)


@image_app.command("list")
def image_list(cache_dir: Path = typer.Option(DEFAULT_CACHE)) -> None:
    """Cached images with their size and age."""
    from rich.table import Table

    from weavegym.vm_images.builder import list_images

    table = Table("name", "profile", "distro", "qcow2 MiB", "build s", "path")
    for image in list_images(cache_dir):
        m = image.manifest
        table.add_row(image.name, m["profile"], m["distro"], f"{m['disk_bytes'] / 2**20:.0f}",
                      str(m["build_seconds"]), str(image.path))
    Console().print(table)


@image_app.command("rm")
def image_rm(name: str, cache_dir: Path = typer.Option(DEFAULT_CACHE)) -> None:
    """Remove a cached image by name (see `weavegym image list`)."""
    from weavegym.core.errors import HostSetupError
    from weavegym.vm_images.builder import remove_image

    try:
        err.print(f"removed {remove_image(name, cache_dir)}")
    except HostSetupError as exc:
        err.print(f"[red]{exc}[/red]")
        raise typer.Exit(1) from None


def main() -> None:
    # `kill`, `timeout` and job schedulers send SIGTERM: unwind like Ctrl-C so every env's close()
    # runs and no VM or overlay is left behind (the default action would skip all finalizers).
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(130)
    except WeaveGymError as exc:
        # A weavegym error says what went wrong and how to fix it; the traceback only buries that line.
        if _options.debug:
            raise
        err.print(f"weavegym: {type(exc).__name__}: {exc}", markup=False, highlight=False, soft_wrap=True)
        err.print("(weavegym --debug ... shows the traceback)", markup=False, highlight=False)
        sys.exit(1)


if __name__ == "__main__":
    main()
