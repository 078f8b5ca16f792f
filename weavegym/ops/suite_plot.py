"""The suite's validation as one picture (an SVG beside TASKS.md): how far every adversary stayed from passing.

TASKS.md holds the numbers; a reader checking whether the scores can be trusted wants to see at a glance
which tasks have an adversary close to the pass threshold, which had a violation, and what each task costs in
time. The SVG is written by hand (no plotting library in the product's dependencies) and works from the same
:class:`~weavegym.ops.suite_report.TaskStats` as TASKS.md, so it can be redrawn from a committed TASKS.md too.
Every marker carries a ``<title>``: a browser shows the exact figure on hover.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

from weavegym.envs.task import Task
from weavegym.ops.suite_report import TaskStats, flake_rate


@dataclass(frozen=True)
class PlotLayout:
    """Sizes in pixels; the defaults fit 60 tasks in a page a README can show."""

    row: int = 16
    label: int = 150  # the task ids
    scores: int = 330  # the 0..1 score axis
    gap: int = 40
    times: int = 260  # oracle and first-reset seconds
    top: int = 90  # title and legend
    bottom: int = 34  # axis labels

    @property
    def scores_x(self) -> int:
        return self.label

    @property
    def times_x(self) -> int:
        return self.label + self.scores + self.gap

    @property
    def width(self) -> int:
        return self.times_x + self.times + 130  # room for the steps label after the longest bar


# Adversary -> (fill colour, marker shape). Others (the hybrids, the quitter, an infeasible seed's runs) are grey dots.
# Each kind sits a little higher or lower in its row, so that markers on the same score stay visible.
MARKERS: Mapping[str, tuple[str, str]] = {
    "cli-only": ("#d9822b", "square"),
    "gui-only": ("#2b6cb0", "triangle"),
    "forger": ("#8e44ad", "diamond"),
}
OTHER_MARKER = ("#888888", "circle")
OFFSETS: Mapping[str, float] = {"cli-only": -4.0, "gui-only": 0.0, "forger": 4.0}
ORACLE_COLOUR = "#2f855a"
VIOLATION_COLOUR = "#c53030"


def _marker(shape: str, x: float, y: float, colour: str, tip: str) -> str:
    r = 3.5
    if shape == "square":
        body = f'<rect x="{x - r:.1f}" y="{y - r:.1f}" width="{2 * r}" height="{2 * r}"'
    elif shape == "triangle":
        body = f'<polygon points="{x:.1f},{y - r:.1f} {x + r:.1f},{y + r:.1f} {x - r:.1f},{y + r:.1f}"'
    elif shape == "diamond":
        body = f'<polygon points="{x:.1f},{y - r:.1f} {x + r:.1f},{y:.1f} {x:.1f},{y + r:.1f} {x - r:.1f},{y:.1f}"'
    else:
        body = f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{r}"'
    return f'{body} fill="{colour}" fill-opacity="0.85"><title>{escape(tip)}</title></{body.split()[0][1:]}>'


def _nice_ceiling(value: float) -> float:
    """The axis end: the first of 1, 2, 5 × 10^k at or above ``value``."""
    step = 1.0
    while step * 10 <= value:
        step *= 10
    for factor in (1, 2, 5, 10):
        if value <= factor * step:
            return factor * step
    return 10 * step


def suite_svg(tasks: Sequence[Task], stats: Mapping[str, TaskStats], *, subtitle: str = "",
              layout: PlotLayout = PlotLayout()) -> str:
    """The picture: a row per task, its adversaries' highest scores against its threshold, and its times.

    A task without figures keeps its row, marked "not measured", so a missing task is seen, not hidden.
    """
    measured = {t.id: stats[t.id] for t in tasks if t.id in stats}
    bad, total = flake_rate(measured)
    height = layout.top + layout.row * len(tasks) + layout.bottom + 6 * len({t.domain for t in tasks})
    longest = max((max(s.oracle_s or 0, s.first_reset_s or 0) for s in measured.values()), default=0.0)
    time_end = _nice_ceiling(max(longest, 1.0))
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{layout.width}" height="{height}" '
        f'viewBox="0 0 {layout.width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{layout.width}" height="{height}" fill="white"/>',
        f'<text x="8" y="18" font-size="14" font-weight="bold">weavegym suite: {len(measured)} of {len(tasks)} '
        f'tasks validated, {bad} of {total} task runs with a violation</text>',
        f'<text x="8" y="34" fill="#555">{escape(subtitle)}</text>',
    ]
    out += _legend()
    rows: list[str] = []
    y = layout.top
    domain = None
    for task in tasks:
        if task.domain != domain:
            if domain is not None:
                y += 6
                rows.append(f'<line x1="4" x2="{layout.width - 4}" y1="{y - 3}" y2="{y - 3}" stroke="#ddd"/>')
            domain = task.domain
        rows += _task_row(task, measured.get(task.id), y, layout, time_end)
        y += layout.row
    out += _axes(layout, layout.top, y, time_end)  # first: SVG paints in order, the grid goes under the markers
    out += rows
    out.append("</svg>")
    return "\n".join(out) + "\n"


def _legend() -> list[str]:
    """Two lines: the markers, then the threshold and the time bars."""
    y = 56
    items = [("oracle, every run 1.0", ORACLE_COLOUR, "circle"), *((name, *MARKERS[name]) for name in MARKERS),
             ("hybrids, quitter, fabricator, infeasible-seed runs", *OTHER_MARKER)]
    out, x = [], 8.0
    for name, colour, shape in items:
        out.append(_marker(shape, x + 5, y - 4, colour, name))
        out.append(f'<text x="{x + 14:.0f}" y="{y}">{escape(name)}</text>')
        x += 24 + 6.2 * len(name)
    x, y = 8.0, y + 18
    out.append(f'<line x1="{x + 4:.0f}" x2="{x + 4:.0f}" y1="{y - 10}" y2="{y + 2}" stroke="{VIOLATION_COLOUR}" '
               f'stroke-width="2"/><text x="{x + 10:.0f}" y="{y}">pass threshold</text>')
    x += 110
    out.append(f'<rect x="{x:.0f}" y="{y - 9}" width="14" height="5" fill="#4a5568"/>'
               f'<rect x="{x:.0f}" y="{y - 3}" width="14" height="3" fill="#a0aec0"/>'
               f'<text x="{x + 18:.0f}" y="{y}">oracle s / first reset s</text>')
    return out


def _task_row(task: Task, s: TaskStats | None, y: int, layout: PlotLayout, time_end: float) -> list[str]:
    middle = y + layout.row / 2
    violated = s is not None and s.clean < s.runs
    colour = VIOLATION_COLOUR if violated else "#222"
    runs = "not measured" if s is None else f"{s.clean}/{s.runs} clean" + (
        f", {s.retried} retried after an env error" if s.retried else "")
    out = [f'<text x="8" y="{middle + 4:.1f}" fill="{colour}">{escape(task.id.removeprefix("Weave-"))}'
           f'<title>{escape(f"{task.id}: {task.title} ({runs})")}</title></text>',
           f'<text x="{layout.label - 8}" y="{middle + 4:.1f}" text-anchor="end" fill="{colour}" '
           f'font-size="9">{escape(runs if s is None else f"{s.clean}/{s.runs}")}</text>']
    x0, span = layout.scores_x, layout.scores
    threshold_x = x0 + span * task.pass_threshold
    out.append(f'<line x1="{threshold_x:.1f}" x2="{threshold_x:.1f}" y1="{y + 1}" y2="{y + layout.row - 1}" '
               f'stroke="{VIOLATION_COLOUR}" stroke-width="2"><title>{escape(task.id)}: pass threshold '
               f'{task.pass_threshold:g}</title></line>')
    if s is None:
        return out
    if not violated:
        out.append(_marker("circle", x0 + span, middle, ORACLE_COLOUR, f"{task.id} oracle: 1.00 in {s.runs} run(s)"))
    for run, (runs_n, highest, reasons) in s.adversaries.items():
        colour_, shape = MARKERS.get(run, OTHER_MARKER)
        tip = (f"{task.id} {run}: highest {highest:.2f} over {runs_n} run(s), threshold {task.pass_threshold:g}; "
               f"stopped by {reasons}")
        x = x0 + span * min(max(highest, 0.0), 1.0)
        out.append(_marker(shape, x, middle + OFFSETS.get(run.split("/")[0], 0.0), colour_, tip))
    tx, tspan = layout.times_x, layout.times
    for value, bar_y, bar_h, fill, what in ((s.oracle_s, y + 2, 6, "#4a5568", "oracle"),
                                            (s.first_reset_s, y + 9, 4, "#a0aec0", "first reset")):
        if value is not None:
            out.append(f'<rect x="{tx}" y="{bar_y}" width="{tspan * value / time_end:.1f}" height="{bar_h}" '
                       f'fill="{fill}"><title>{escape(f"{task.id} {what}: {value:.1f} s")}</title></rect>')
    if s.oracle_steps is not None:
        width = tspan * max(s.oracle_s or 0, s.first_reset_s or 0) / time_end
        switches = "" if s.oracle_switches is None else f", {s.oracle_switches} switches"
        out.append(f'<text x="{tx + width + 4:.1f}" y="{middle + 3:.1f}" font-size="9" fill="#555">'
                   f'{s.oracle_steps} steps{switches}</text>')
    return out


def _axes(layout: PlotLayout, top: int, bottom: int, time_end: float) -> list[str]:
    return [*_axis(layout.scores_x, layout.scores, 1.0, top, bottom,
                   "highest score of each adversary over the task's runs"),
            *_axis(layout.times_x, layout.times, time_end, top, bottom, "seconds (median over the task's runs)")]


def _axis(x0: float, span: float, end: float, top: int, bottom: int, title: str) -> list[str]:
    """Five grid lines from 0 to ``end`` over ``span`` pixels, their values, and the axis title under them."""
    out = []
    for k in range(5):
        x = x0 + span * k / 4
        out.append(f'<line x1="{x:.1f}" x2="{x:.1f}" y1="{top}" y2="{bottom}" stroke="#eee"/>')
        out.append(f'<text x="{x:.1f}" y="{bottom + 12}" text-anchor="middle">{end * k / 4:g}</text>')
    out.append(f'<text x="{x0 + span / 2}" y="{bottom + 26}" text-anchor="middle">{escape(title)}</text>')
    return out
