"""The suite's picture (VM-free): markers where the scores are, violations and unmeasured tasks visible."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from validation_reports import validation_report as _report

from weavegym.envs.tasks import all_tasks
from weavegym.ops.suite_plot import ORACLE_COLOUR, VIOLATION_COLOUR, PlotLayout, suite_svg
from weavegym.ops.suite_report import stats_from_markdown, task_stats

REPO = Path(__file__).resolve().parents[1]
SVG = "{http://www.w3.org/2000/svg}"


def _tipped(root: ET.Element) -> dict[str, ET.Element]:
    """Every drawn element that has a hover title, by that title."""
    return {child.text or "": element for element in root.iter() for child in element
            if child.tag == f"{SVG}title"}


def _centre_x(element: ET.Element) -> float:
    if element.tag == f"{SVG}rect":
        return float(element.get("x", 0)) + float(element.get("width", 0)) / 2
    if element.tag == f"{SVG}circle":
        return float(element.get("cx", 0))
    xs = [float(point.split(",")[0]) for point in element.get("points", "").split()]
    return (min(xs) + max(xs)) / 2


def test_markers_sit_at_the_scores_and_the_threshold() -> None:
    tasks = all_tasks()[:2]
    reports = [_report(tasks[0].id, 0, oracle_s=10, reset_s=40, cached=1.0, seed=seed) for seed in (0, 3)]
    reports[1]["results"]["forger"]["score"] = 0.75  # the highest of the two runs is the one drawn
    layout = PlotLayout()
    root = ET.fromstring(suite_svg(tasks, task_stats(reports), layout=layout))
    tipped = _tipped(root)
    score_x = lambda score: layout.scores_x + layout.scores * score  # noqa: E731
    cli = next(e for tip, e in tipped.items() if tip.startswith(f"{tasks[0].id} cli-only: highest 0.25 over 2"))
    assert abs(_centre_x(cli) - score_x(0.25)) < 0.2
    forger = next(e for tip, e in tipped.items() if tip.startswith(f"{tasks[0].id} forger: highest 0.75"))
    assert abs(_centre_x(forger) - score_x(0.75)) < 0.2
    assert "stopped by provenance_gui_1" in next(t for t in tipped if t.startswith(f"{tasks[0].id} forger"))
    oracle = tipped[f"{tasks[0].id} oracle: 1.00 in 2 run(s)"]
    assert oracle.get("fill") == ORACLE_COLOUR and abs(_centre_x(oracle) - score_x(1.0)) < 0.2
    threshold = tipped[f"{tasks[0].id}: pass threshold {tasks[0].pass_threshold:g}"]
    assert abs(float(threshold.get("x1", 0)) - score_x(tasks[0].pass_threshold)) < 0.2
    # The oracle's 10 s bar is a quarter of a 40 s first reset's, on one axis.
    oracle_bar = tipped[f"{tasks[0].id} oracle: 10.0 s"]
    reset_bar = tipped[f"{tasks[0].id} first reset: 40.0 s"]
    assert abs(4 * float(oracle_bar.get("width", 0)) - float(reset_bar.get("width", 0))) < 0.5


def test_a_violation_and_an_unmeasured_task_stand_out() -> None:
    tasks = all_tasks()[:3]
    reports = [_report(tasks[0].id, 0, oracle_s=10, reset_s=40, cached=1.0),
               _report(tasks[1].id, 0, oracle_s=10, reset_s=40, cached=1.0, violations=["oracle scored 0.5"])]
    svg = suite_svg(tasks, task_stats(reports), subtitle="a <run> & its seeds")
    root = ET.fromstring(svg)  # well-formed, with the subtitle escaped
    assert "a &lt;run&gt; &amp; its seeds" in svg
    assert "2 of 3 tasks validated, 1 of 2 task runs with a violation" in svg
    tipped = _tipped(root)
    flawed = tipped[f"{tasks[1].id}: {tasks[1].title} (0/1 clean)"]
    assert flawed.get("fill") == VIOLATION_COLOUR
    assert not any(tip.startswith(f"{tasks[1].id} oracle: 1.00") for tip in tipped), "no oracle 1.0 shown for it"
    assert tipped[f"{tasks[2].id}: {tasks[2].title} (not measured)"] is not None
    assert not any(tip.startswith(f"{tasks[2].id} ") for tip in tipped), "no markers or bars for it"


def test_committed_plot_is_drawn_from_the_committed_tasks_md(tmp_path: Path) -> None:
    """TASKS.svg is redrawn with TASKS.md (`weavegym tasks --plot TASKS.svg --keep TASKS.md`), never apart from it."""
    committed = (REPO / "TASKS.svg").read_text()
    note = ET.fromstring(committed).findall(f"{SVG}text")[1].text or ""
    drawn = tmp_path / "suite.svg"
    subprocess.run([sys.executable, "-c", "from weavegym.cli import main; main()", "tasks", "--plot", str(drawn),
                    "--keep", str(REPO / "TASKS.md"), "--plot-note", note], check=True, timeout=120,
                   capture_output=True)
    assert drawn.read_text() == committed
    assert len(stats_from_markdown((REPO / "TASKS.md").read_text())) == len(all_tasks())
