"""Weave-Data-8's bench: what a seed decides, the one copy of the fit and of the verdict rule, the windows' geometry
and the readers of their pixels (the task module's setup, checker and oracle and the tests share them).

A sensor's calibration run is 6-10 pairs of a reference reading (in the bench's unit) and the sensor's raw reading
(in mV); one pair of each run is a bad reading, clearly off the line of the others. The calibration is the
least-squares line ``value = gain * raw + offset`` through the other pairs, with ``value`` the reference converted
to the instrument's own unit (``bench_to_unit``, a factor in the instruments database). ``fit_run`` and
``calibration_verdict`` are self-contained: the oracle's shell step runs their own source in the guest, so the
truth setup computes and what a shell computes cannot drift apart.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from weavegym.envs.tasks import pixel_font

SENSORS = 3
PAIRS = (6, 10)  # pairs per run, low and high (inclusive)
VERDICTS = ("PASS", "ADJUST", "FAIL")
# kind, tag prefix, the bench's unit (as drawn), the instrument's unit, bench_to_unit, the bench's range, models
KINDS = (
    ("TEMPERATURE", "TT", "DEGC", "degC", 1.0, (0.0, 150.0), ("PT100-A", "PT100-B", "TC-K2")),
    ("PRESSURE", "PT", "KPA", "bar", 0.01, (0.0, 1000.0), ("PX-310", "PX-420", "DPT-9")),
    ("FLOW", "FT", "L/MIN", "m3/h", 0.06, (0.0, 250.0), ("MAG-50", "VTX-25")),
    ("LEVEL", "LT", "MM", "m", 0.001, (0.0, 3000.0), ("RAD-80", "US-12")),
    ("HUMIDITY", "MT", "%RH", "fraction", 0.01, (0.0, 100.0), ("HC2-S", "HMP-7")),
)
GAIN_TOL_PCT = (0.5, 1.0, 1.5, 2.0)  # a model's gain tolerance, percent
OFFSET_TOL_SHARE = (0.004, 0.006, 0.008)  # a model's offset tolerance, as a share of its unit's span
# How exactly the LIMS (and the checker) take the coefficients: gain relative, offset as a share of the span.
GAIN_REL_TOL, OFFSET_SPAN_TOL = 2e-4, 2e-4
LOCATIONS = ("BOILER HOUSE", "LINE 2", "TANK FARM", "COLD STORE", "PUMP ROOM", "LAB 1", "DRYER", "MIXER BAY")

SCHEMA = (
    "CREATE TABLE models (model TEXT PRIMARY KEY, maker TEXT NOT NULL, gain_tol_pct REAL NOT NULL, "
    "offset_tol REAL NOT NULL);\n"
    "CREATE TABLE instruments (tag TEXT PRIMARY KEY, kind TEXT NOT NULL, model TEXT NOT NULL REFERENCES models, "
    "location TEXT NOT NULL, unit TEXT NOT NULL, bench_unit TEXT NOT NULL, bench_to_unit REAL NOT NULL);\n"
    "CREATE TABLE calibrations (id INTEGER PRIMARY KEY, tag TEXT NOT NULL, cal_date TEXT NOT NULL, gain REAL NOT NULL, "
    "offset REAL NOT NULL, verdict TEXT NOT NULL, certificate TEXT NOT NULL);"
)


# ---- the fit and the rule (self-contained: the guest runs their source) ----------------------------------------

def fit_run(pairs: list[tuple[float, float]], factor: float) -> tuple[float, float, int]:
    """(gain, offset, index of the bad pair) of a run's (reference, raw) pairs: the least-squares line of
    value = factor * reference over raw, the pair farthest off it left out, and the line fitted again."""
    def line(points: list[tuple[float, float]]) -> tuple[float, float]:
        n = len(points)
        mx = sum(raw for _ref, raw in points) / n
        my = sum(factor * ref for ref, _raw in points) / n
        sxx = sum((raw - mx) ** 2 for _ref, raw in points)
        sxy = sum((raw - mx) * (factor * ref - my) for ref, raw in points)
        return sxy / sxx, my - sxy / sxx * mx

    gain, offset = line(pairs)
    worst = max(range(len(pairs)), key=lambda i: abs(factor * pairs[i][0] - (gain * pairs[i][1] + offset)))
    gain, offset = line([p for i, p in enumerate(pairs) if i != worst])
    return gain, offset, worst


def calibration_verdict(gain: float, offset: float, prev_gain: float, prev_offset: float, gain_tol_pct: float,
                        offset_tol: float) -> str:
    """PASS while both drifts from the previous calibration are within the model's tolerance, FAIL when either is
    beyond three times it, else ADJUST."""
    drift = max(abs(gain - prev_gain) / abs(prev_gain) * 100.0 / gain_tol_pct, abs(offset - prev_offset) / offset_tol)
    return "PASS" if drift <= 1.0 else "ADJUST" if drift <= 3.0 else "FAIL"


def drift_ratio(sensor: dict[str, Any]) -> float:
    """The larger of the two drifts in tolerances (the number calibration_verdict compares)."""
    return max(abs(sensor["gain"] - sensor["prev_gain"]) / abs(sensor["prev_gain"]) * 100.0 / sensor["gain_tol_pct"],
               abs(sensor["offset"] - sensor["prev_offset"]) / sensor["offset_tol"])


def coefficients_match(gain: float, offset: float, sensor: dict[str, Any]) -> tuple[bool, bool]:
    """Whether a gain and an offset are the run's (within the LIMS's rounding tolerance)."""
    ok_gain = math.isfinite(gain) and abs(gain - sensor["gain"]) <= GAIN_REL_TOL * abs(sensor["gain"])
    ok_offset = math.isfinite(offset) and abs(offset - sensor["offset"]) <= OFFSET_SPAN_TOL * sensor["span"]
    return ok_gain, ok_offset


# ---- the seed's bench ----------------------------------------------------------------------------------------

def _sig(value: float, digits: int = 6) -> float:
    return float(f"{value:.{digits}g}")


def _run(rng: np.random.Generator, kind: tuple[Any, ...]) -> dict[str, Any] | None:
    """One run's pairs (as drawn: strings with two decimals) and its fit; None when the draw is not clear enough
    (the farthest pair of the full fit is not the bad one, or leaving it in would still pass the LIMS)."""
    _name, _prefix, _bench, _unit, factor, (lo, hi), _models = kind
    count = int(rng.integers(PAIRS[0], PAIRS[1] + 1))
    raw0, raw_span = float(rng.uniform(40, 120)), float(rng.uniform(600, 900))
    refs = np.linspace(lo + (hi - lo) * 0.03, hi * 0.97, count) + rng.normal(0, (hi - lo) * 0.01, count)
    refs = np.clip(refs, lo + 0.01, hi)
    bend = float(rng.uniform(0.97, 1.03))  # this sensor's true gain relative to nominal
    raws = raw0 + (refs - lo) / (hi - lo) * raw_span * bend + rng.normal(0, raw_span * 0.0006, count)
    bad = int(rng.integers(1, count - 1))
    raws[bad] += float(rng.choice([-1, 1])) * float(rng.uniform(0.06, 0.12)) * raw_span
    shown = [(f"{r:.2f}", f"{w:.2f}") for r, w in zip(refs, raws, strict=True)]
    pairs = [(float(r), float(w)) for r, w in shown]
    gain, offset, worst = fit_run(pairs, factor)
    if worst != bad:
        return None
    span = factor * (hi - lo)
    n = len(pairs)
    mx, my = sum(w for _r, w in pairs) / n, sum(factor * r for r, _w in pairs) / n
    sxy = sum((w - mx) * (factor * r - my) for r, w in pairs)
    all_gain = sxy / sum((w - mx) ** 2 for _r, w in pairs)
    all_offset = my - all_gain * mx
    if (abs(all_gain - gain) <= 20 * GAIN_REL_TOL * abs(gain)
            and abs(all_offset - offset) <= 20 * OFFSET_SPAN_TOL * span):
        return None  # the bad pair must matter: a fit that keeps it is refused
    return {"pairs": [list(p) for p in shown], "gain": gain, "offset": offset, "bad": bad, "span": span}


def _previous(rng: np.random.Generator, sensor: dict[str, Any], verdict: str) -> None:
    """The previous calibration's coefficients, drifted so that the rule gives ``verdict`` with a margin."""
    lows, highs = {"PASS": (0.1, 0.7), "ADJUST": (1.3, 2.6), "FAIL": (3.6, 6.0)}[verdict], (0.1, 0.7)
    while True:
        leading = float(rng.uniform(*lows))
        other = float(rng.uniform(*highs)) if verdict == "PASS" else float(rng.uniform(0.1, min(lows[0], 2.6)))
        gain_r, off_r = (leading, other) if rng.random() < 0.5 else (other, leading)
        prev_gain = _sig(sensor["gain"] / (1 + float(rng.choice([-1, 1])) * gain_r * sensor["gain_tol_pct"] / 100))
        prev_offset = _sig(sensor["offset"] - float(rng.choice([-1, 1])) * off_r * sensor["offset_tol"])
        probe = {**sensor, "prev_gain": prev_gain, "prev_offset": prev_offset}
        ratio = drift_ratio(probe)
        if min(abs(ratio - 1.0), abs(ratio - 3.0)) >= 0.2 and calibration_verdict(
                sensor["gain"], sensor["offset"], prev_gain, prev_offset, sensor["gain_tol_pct"],
                sensor["offset_tol"]) == verdict:
            sensor["prev_gain"], sensor["prev_offset"] = prev_gain, prev_offset
            return


def _date(rng: np.random.Generator, year: int) -> str:
    return f"{year}-{int(rng.integers(1, 13)):02d}-{int(rng.integers(1, 29)):02d}"


def _code(rng: np.random.Generator) -> str:
    return "".join(CODE_ALPHABET[int(rng.integers(len(CODE_ALPHABET)))] for _ in range(6))


CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def bench(rng: np.random.Generator) -> dict[str, Any]:
    """Everything a seed decides: the three sensors in run order (tag, kind, units, pairs, fit, tolerances, the
    previous calibration, the verdict) and the instruments database's rows (the sensors among many others)."""
    kinds = [KINDS[int(i)] for i in rng.permutation(len(KINDS))[:SENSORS]]
    verdicts = [VERDICTS[int(i)] for i in rng.permutation(len(VERDICTS))]
    models: dict[str, tuple[str, str, float, float]] = {}
    for kind in KINDS:
        span = kind[4] * (kind[5][1] - kind[5][0])
        for model in kind[6]:
            tol = float(GAIN_TOL_PCT[int(rng.integers(len(GAIN_TOL_PCT)))])
            share = float(OFFSET_TOL_SHARE[int(rng.integers(len(OFFSET_TOL_SHARE)))])
            models[model] = (model, ("VAISALA", "ENDRESS", "WIKA", "ABB", "KELLER")[int(rng.integers(5))], tol,
                             _sig(share * span, 3))
    tags: set[str] = set()
    instruments, calibrations, sensors = [], [], []
    for index in range(40):
        kind = kinds[index] if index < SENSORS else KINDS[int(rng.integers(len(KINDS)))]
        while True:
            tag = f"{kind[1]}-{int(rng.integers(100, 1000))}"
            if tag not in tags:
                tags.add(tag)
                break
        model = kind[6][int(rng.integers(len(kind[6])))]
        instruments.append((tag, kind[0], model, LOCATIONS[int(rng.integers(len(LOCATIONS)))], kind[3], kind[2],
                            kind[4]))
        if index < SENSORS:
            while True:
                run = _run(rng, kind)
                if run is not None:
                    break
            sensor = {"tag": tag, "kind": kind[0], "bench_unit": kind[2], "unit": kind[3], "factor": kind[4],
                      "model": model, "gain_tol_pct": models[model][2], "offset_tol": models[model][3], **run}
            _previous(rng, sensor, verdicts[index])
            sensor["verdict"] = verdicts[index]
            sensors.append(sensor)
            last_gain, last_offset = sensor["prev_gain"], sensor["prev_offset"]
        else:
            nominal = kind[4] * (kind[5][1] - kind[5][0]) / 750.0
            last_gain, last_offset = _sig(nominal * float(rng.uniform(0.97, 1.03))), _sig(
                -nominal * float(rng.uniform(40, 120)))
        # Older calibrations first: the previous one is the latest date, not the highest id.
        history = int(rng.integers(2, 5))
        years = sorted(int(y) for y in rng.choice(np.arange(2019, 2026), history, replace=False))
        rows = []
        for number, year in enumerate(years):
            latest = number == history - 1
            gain = last_gain if latest else _sig(last_gain * float(rng.uniform(0.96, 1.04)))
            offset = last_offset if latest else _sig(last_offset + float(rng.normal(0, abs(last_offset) * 0.05 + 1e-3)))
            rows.append((tag, _date(rng, year), gain, offset, ("PASS", "ADJUST")[int(rng.integers(2))], _code(rng)))
        calibrations += [rows[int(i)] for i in rng.permutation(len(rows))]
    instruments = [instruments[int(i)] for i in rng.permutation(len(instruments))]
    calibrations = [(i + 1, *row) for i, row in enumerate(calibrations[int(j)] for j in rng.permutation(
        len(calibrations)))]
    return {"sensors": sensors, "rows": {"models": sorted(models.values()), "instruments": instruments,
                                         "calibrations": calibrations}}


# ---- the windows' geometry (pixels inside each window; not secret) -------------------------------------------

SCALE, TITLE_SCALE, STEP = 2, 3, 24
HEADING_AT = (16, 12)
SCOPE_TITLE, SCOPE_HEADING = "Bench Scope", "BENCH SCOPE"
LIMS_TITLE, LIMS_HEADING = "LIMS Calibration Entry", "LIMS CALIBRATION ENTRY"
SCOPE_AT, SCOPE_SIZE = (0, 40), (700, 560)
LIMS_AT, LIMS_SIZE = (724, 40), (550, 440)
# the Bench Scope
SCOPE_PROMPT, SCOPE_PROMPT_AT = "PREVIOUS CERTIFICATE:", (16, 46)
SCOPE_ENTRY, SCOPE_SHOW = (280, 38, 150, 30), (440, 38, 170, 30)
SCOPE_STATUS = (16, 80)  # the status line's text
RUN_TITLE_AT, RUN_UNITS_AT, TABLE_AT = (16, 112), (16, 140), (16, 176)  # the table's header; rows one STEP apart
TABLE_CHARS = 22
PLOT = (340, 206, 684, 520)  # the scatter plot's axes box x0, y0, x1, y1
# the LIMS form
LIMS_SENSOR_AT = (16, 44)  # "SENSOR N OF 3" at TITLE_SCALE
FIELDS = ("GAIN:", "OFFSET:", "VERDICT:")
FIELD_LABEL_X, FIELD_Y0, FIELD_STEP = 16, 92, 42
FIELD_BOX = (150, 250, 30)  # an entry's x, width, height (its y: the label's y - 7)
ISSUE = (150, 214, 220, 32)
LIMS_STATUS = (16, 262)
RESULTS_AT = (16, 300)  # "SENSOR N: VERDICT  CERT XXXXXX", one STEP apart
RESULT_CHARS = 32
TAG = re.compile(r"^[A-Z]{2}-\d{3}$")


def field_box(index: int) -> tuple[int, int, int, int]:
    y = FIELD_Y0 + index * FIELD_STEP
    return FIELD_BOX[0], y - 7, FIELD_BOX[1], FIELD_BOX[2]


def scope_layout() -> dict[str, Any]:
    return {"title": SCOPE_TITLE, "heading": SCOPE_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "title_scale": TITLE_SCALE, "step": STEP, "size": list(SCOPE_SIZE), "at": list(SCOPE_AT),
            "prompt": SCOPE_PROMPT, "prompt_at": list(SCOPE_PROMPT_AT), "entry": list(SCOPE_ENTRY),
            "show": list(SCOPE_SHOW), "status_at": list(SCOPE_STATUS), "run_title_at": list(RUN_TITLE_AT),
            "run_units_at": list(RUN_UNITS_AT), "table_at": list(TABLE_AT), "plot": list(PLOT)}


def lims_layout() -> dict[str, Any]:
    return {"title": LIMS_TITLE, "heading": LIMS_HEADING, "heading_at": list(HEADING_AT), "scale": SCALE,
            "title_scale": TITLE_SCALE, "step": STEP, "size": list(LIMS_SIZE), "at": list(LIMS_AT),
            "sensor_at": list(LIMS_SENSOR_AT), "fields": list(FIELDS),
            "field_labels": [[FIELD_LABEL_X, FIELD_Y0 + i * FIELD_STEP] for i in range(len(FIELDS))],
            "field_boxes": [list(field_box(i)) for i in range(len(FIELDS))], "issue": list(ISSUE),
            "status_at": list(LIMS_STATUS), "results_at": list(RESULTS_AT)}


def table_line(number: int, ref: str, raw: str) -> str:
    return f"P{number:<3}{ref:>8}  {raw:>8}"


def centre(at: Sequence[int], box: Sequence[int]) -> tuple[int, int]:
    return at[0] + box[0] + box[2] // 2, at[1] + box[1] + box[3] // 2


# ---- reading the windows (the oracle's eyes; setup's readiness check) ----------------------------------------

def origin(image: np.ndarray, near: Sequence[int], heading: str, reach: int = 40) -> tuple[int, int] | None:
    """A window's top-left, found where its dot-matrix heading reads back near ``near``; None until drawn."""
    return pixel_font.find_drawn(image, heading, near, HEADING_AT, SCALE, reach=reach)


def read_run(image: np.ndarray, at: Sequence[int], number: int) -> dict[str, Any] | None:
    """Run ``number`` as the Bench Scope at ``at`` shows it ({tag, kind, bench_unit, pairs}); None until it shows
    whole (every announced pair readable)."""
    title = pixel_font.read_text(image, at[0] + RUN_TITLE_AT[0], at[1] + RUN_TITLE_AT[1], SCALE, 44)
    found = re.fullmatch(rf"RUN {number} OF {SENSORS}  SENSOR ([A-Z]{{2}}-\d{{3}})  (\d+) PAIRS", title)
    units = re.fullmatch(r"([A-Z]+)  REF IN (\S+)  RAW IN MV", pixel_font.read_text(
        image, at[0] + RUN_UNITS_AT[0], at[1] + RUN_UNITS_AT[1], SCALE, 44))
    if found is None or units is None:
        return None
    pairs = []
    for index in range(int(found.group(2))):
        line = pixel_font.read_text(image, at[0] + TABLE_AT[0], at[1] + TABLE_AT[1] + (index + 1) * STEP, SCALE,
                                    TABLE_CHARS)
        row = re.fullmatch(rf"P{index + 1} +(\d+\.\d\d) +(\d+\.\d\d)", line)
        if row is None:
            return None
        pairs.append([row.group(1), row.group(2)])
    return {"tag": found.group(1), "kind": units.group(1), "bench_unit": units.group(2), "pairs": pairs}


def read_status(image: np.ndarray, at: Sequence[int], where: Sequence[int], red: bool = False) -> str:
    ink = (0xB0, 0, 0) if red else pixel_font.INK
    return pixel_font.read_text(image, at[0] + where[0], at[1] + where[1], SCALE, 44, ink=ink)


def read_certificate(image: np.ndarray, at: Sequence[int], number: int) -> tuple[str, str] | None:
    """(verdict, certificate) of the LIMS's result line for sensor ``number``, or None while it shows none."""
    text = pixel_font.read_text(image, at[0] + RESULTS_AT[0], at[1] + RESULTS_AT[1] + (number - 1) * STEP, SCALE,
                                RESULT_CHARS)
    found = re.fullmatch(rf"SENSOR {number}: (PASS|ADJUST|FAIL)  CERT ([A-Z2-9]{{6}})", text)
    return None if found is None else (found.group(1), found.group(2))


def lims_sensor(image: np.ndarray, at: Sequence[int]) -> int | None:
    """The sensor number the LIMS form asks for ("SENSOR 2 OF 3"), or None (all certified, or not drawn)."""
    found = re.fullmatch(rf"SENSOR (\d) OF {SENSORS}", pixel_font.read_text(
        image, at[0] + LIMS_SENSOR_AT[0], at[1] + LIMS_SENSOR_AT[1], TITLE_SCALE, 13))
    return None if found is None else int(found.group(1))
