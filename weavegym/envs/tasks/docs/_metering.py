"""The metering side of Weave-Docs-4 (no TASK here): the supply agreement's terms and the half-hourly meter
readings the shell gets, the signed amendment the viewer shows, and the bill over them.

``bill``, ``findings`` and ``_terms`` are self-contained (standard library only, imports inside) on purpose:
the oracle's python step runs their own source in the guest, and setup's truth comes from the very same
functions on the very same texts, so the two cannot drift apart (Weave-Games-4 does the same with its
standings). Money is integer tenths of a micro-euro (1e-7 EUR: Wh times a rate in 1e-4 EUR/kWh) and energy
is integer Wh, so the truth has no rounding of its own.
"""

from __future__ import annotations

import calendar
import datetime as dt
import inspect
import itertools
import textwrap
from typing import Any

import numpy as np

from weavegym.core.errors import TaskError

E7 = 10_000_000  # money units per euro
YEAR = 2026
READINGS_FROM, READINGS_TO = dt.date(YEAR, 5, 1), dt.date(YEAR, 11, 20)
HEADER = "meter,interval_start,kwh"
CUSTOMERS = ("Northwind Foods Ltd", "Alder Bakeries Ltd", "Kestrel Logistics plc", "Brightwater Dairies Ltd",
             "Harbour Cold Stores Ltd", "Ridgeway Print Works Ltd")
SUPPLIERS = ("Helio Energy Supply plc", "Meridian Power Ltd", "Greenfield Utilities plc", "Volta Commercial Ltd")
KINDS = ("total", "cap", "sites")


def kind_of(seed: int) -> str:
    """The seed's question: consecutive seeds cycle through the kinds, and so do seeds three apart (0, 3, 6)."""
    return KINDS[(seed + seed // 3) % len(KINDS)]


# -- the bill: self-contained, shipped to the guest as the oracle's program ---------------------------------


def _terms(contract: str) -> dict[str, str]:
    """contract.txt's ``key: value`` lines (``#`` starts a comment)."""
    terms = {}
    for line in contract.splitlines():
        line = line.split("#", 1)[0]
        if ":" in line:
            key, value = line.split(":", 1)
            terms[key.strip()] = value.strip()
    return terms


def bill(contract: str, readings: dict[str, str], amendment: dict[str, Any] | None) -> dict[str, Any]:
    """The period's charges: per site [peak Wh, off-peak Wh, standing, energy] and per day the total.

    ``readings`` maps a readings file's name (``YYYY-MM-DD.csv``) to its text; ``amendment`` is what the signed
    amendment says ({"effective": ISO date, "peak", "offpeak", "standing": rates in 1e-4 EUR}) or None. Days
    before the effective date are billed at contract.txt's rates, the effective date and later at the amended
    ones. An interval is peak when it starts on a weekday at an hour in [from, to) of ``peak_hours``.
    """
    import datetime
    import re

    terms = _terms(contract)

    def tenk(text: str) -> int:
        return round(float(text) * 10000)

    sites = terms["sites"].split()
    start, end = (datetime.date.fromisoformat(terms[k]) for k in ("period_start", "period_end"))
    hours = re.fullmatch(r"(\d\d):00-(\d\d):00 Mon-Fri", terms["peak_hours"])
    assert hours is not None, terms["peak_hours"]
    peak_from, peak_to = int(hours[1]), int(hours[2])
    schedule_a = {"peak": tenk(terms["peak_eur_per_kwh"]), "offpeak": tenk(terms["offpeak_eur_per_kwh"]),
                  "standing": tenk(terms["standing_eur_per_site_day"])}
    effective = datetime.date.fromisoformat(amendment["effective"]) if amendment else None
    per_site = {site: [0, 0, 0, 0] for site in sites}
    days = []
    day = start
    while day <= end:
        rates = amendment if amendment and effective and day >= effective else schedule_a
        weekday, total = day.weekday() < 5, 0
        for row in readings.get(f"{day.isoformat()}.csv", "").splitlines()[1:]:
            meter, stamp, kwh = row.strip().split(",")
            if meter not in per_site:
                continue
            wh = round(float(kwh) * 1000)
            peak = weekday and peak_from <= int(stamp[11:13]) < peak_to
            cost = wh * rates["peak" if peak else "offpeak"]
            per_site[meter][0 if peak else 1] += wh
            per_site[meter][3] += cost
            total += cost
        for charges in per_site.values():
            charges[2] += rates["standing"] * 1000
            total += rates["standing"] * 1000
        days.append((day.isoformat(), total))
        day += datetime.timedelta(days=1)
    return {"sites": per_site, "days": days, "cap": tenk(terms["cap_eur"]) * 1000,
            "review": tenk(terms["review_eur_per_site"]) * 1000}


def findings(result: dict[str, Any]) -> dict[str, Any]:
    """What the questions ask: the period's total, the day the running total first passes the cap ("" when it
    never does), and the sites whose own charges pass the review level (sorted)."""
    total, running, cap_date = 0, 0, ""
    for iso, amount in result["days"]:
        total += amount
        running += amount
        if not cap_date and running > result["cap"]:
            cap_date = iso
    over = sorted(site for site, c in result["sites"].items() if c[2] + c[3] > result["review"])
    return {"total": total, "cap_date": cap_date, "over": over}


def program(amendment: dict[str, Any] | None, folder: str, out: str) -> str:
    """The oracle's python step: bill the readings under the amendment it read, write the CSV, print the lines
    it parses (ROW per site, TOTAL, CAPDATE, OVER)."""
    source = "\n".join(textwrap.dedent(inspect.getsource(f)) for f in (_terms, bill, findings))
    main = f"""
import glob, os
with open({folder + "/contract.txt"!r}) as text:
    contract = text.read()
readings = {{}}
for path in glob.glob({folder + "/readings/*.csv"!r}):
    with open(path) as text:
        readings[os.path.basename(path)] = text.read()
result = bill(contract, readings, {amendment!r})
found = findings(result)
lines = []
for site, (peak, offpeak, standing, energy) in sorted(result["sites"].items()):
    lines.append(f"{{site}},{{peak / 1000:.3f}},{{offpeak / 1000:.3f}},{{standing / 1e7:.2f}},{{energy / 1e7:.2f}},"
                 f"{{(standing + energy) / 1e7:.2f}}")
with open({out!r}, "w") as sheet:
    sheet.write("site,peak_kwh,offpeak_kwh,standing_eur,energy_eur,total_eur\\n" + "".join(l + "\\n" for l in lines))
print("".join("ROW " + l + "\\n" for l in lines), end="")
print(f"TOTAL {{found['total'] / 1e7:.2f}}")
print(f"CAPDATE {{found['cap_date'] or 'none'}}")
print("OVER " + ";".join(found["over"]))
"""
    return f"from __future__ import annotations\n{source}\n{main}"


# -- generation -----------------------------------------------------------------------------------------------


def _days(first: dt.date, last: dt.date) -> list[dt.date]:
    return [first + dt.timedelta(days=i) for i in range((last - first).days + 1)]


def readings(rng: np.random.Generator, meters: list[str]) -> dict[str, str]:
    """One CSV per day of READINGS_FROM..READINGS_TO: every meter's 48 half-hour readings (kWh, 3 decimals),
    meters in a shuffled order; each meter has its own base load, working hours and weekend level."""
    days = _days(READINGS_FROM, READINGS_TO)
    slots = np.arange(48) / 2.0
    values: dict[str, np.ndarray] = {}
    for meter in meters:
        base, busy = rng.uniform(0.4, 4.0), rng.uniform(0.5, 12.0)
        opens, closes, weekend = rng.uniform(5.0, 9.5), rng.uniform(15.5, 21.0), rng.uniform(0.15, 0.6)
        shape = base + busy * ((slots >= opens) & (slots < closes))
        level = np.array([1.0 if d.weekday() < 5 else weekend for d in days])[:, None]
        kw = (base + (shape - base) * level) * rng.lognormal(0.0, 0.18, size=(len(days), 48))
        values[meter] = np.round(kw * 0.5, 3)
    files = {}
    for index, day in enumerate(days):
        rows = [HEADER]
        for meter in (meters[int(i)] for i in rng.permutation(len(meters))):
            rows += [f"{meter},{day.isoformat()} {s // 2:02d}:{30 * (s % 2):02d},{values[meter][index, s]:.3f}"
                     for s in range(48)]
        files[f"{day.isoformat()}.csv"] = "\n".join(rows) + "\n"
    return files


def contract_text(world: dict[str, Any], cap_eur: int, review_eur: int) -> str:
    rates = world["schedule_a"]
    return (
        f"# Electricity supply agreement {world['contract']} between {world['customer']} (customer) and\n"
        f"# {world['supplier']} (supplier): Schedule A, the terms as signed. Signed amendments to it are kept\n"
        "# as scans, not in this file.\n"
        f"contract: {world['contract']}\n"
        f"sites: {' '.join(world['sites'])}\n"
        f"period_start: {world['start']}\n"
        f"period_end: {world['end']}\n"
        f"peak_hours: {world['peak_hours'][0]:02d}:00-{world['peak_hours'][1]:02d}:00 Mon-Fri\n"
        f"peak_eur_per_kwh: {rates['peak'] / 10000:.4f}\n"
        f"offpeak_eur_per_kwh: {rates['offpeak'] / 10000:.4f}\n"
        f"standing_eur_per_site_day: {rates['standing'] / 10000:.4f}\n"
        f"cap_eur: {cap_eur}\n"
        f"review_eur_per_site: {review_eur}\n"
        "# Billing: a half-hour interval of readings/<date>.csv is peak when it starts on a weekday (Mon-Fri)\n"
        "# at or after the first peak_hours time and before the second, off-peak otherwise. Every site pays\n"
        "# the standing charge for every day of the period. cap_eur is the period's spend cap (all sites,\n"
        "# standing charges included); a site whose own charges for the period exceed review_eur_per_site\n"
        "# is reviewed. Meters not listed under sites belong to other agreements.\n")


def _changed(rng: np.random.Generator, rate: int) -> int:
    """A new rate 5-22 % above or below the old one (never about the same: the amendment must matter)."""
    factor = rng.uniform(0.05, 0.22) * (1 if rng.random() < 0.6 else -1)
    return round(float(rate * (1 + factor)))


def _meter_ids(rng: np.random.Generator, count: int) -> list[str]:
    return [f"MTR-{int(n)}" for n in rng.choice(np.arange(10000, 100000), size=count, replace=False)]


def _cap(rng: np.random.Generator, amended: dict[str, Any], plain: dict[str, Any], effective: str) -> int | None:
    """A whole-euro cap the running total passes on a day after the effective date, with a euro to spare
    either side, and on another day when the amendment is left out; None when there is none."""
    run_a = np.cumsum([a for _d, a in amended["days"]])
    run_p = np.cumsum([a for _d, a in plain["days"]])
    dates = [d for d, _a in amended["days"]]
    options = []
    for j in range(1, len(dates) - 4):
        if dates[j] <= effective:
            continue
        cap = int((run_a[j - 1] + run_a[j]) // 2 // E7)
        if not run_a[j - 1] + E7 < cap * E7 < run_a[j] - E7:
            continue
        passed = next((dates[i] for i, r in enumerate(run_p) if r > cap * E7), "")
        if passed != dates[j]:
            options.append(cap)
    return int(options[int(rng.integers(len(options)))]) if options else None


def _review(rng: np.random.Generator, amended: dict[str, Any], plain: dict[str, Any]) -> int | None:
    """A whole-euro review level that some but not all sites pass, a different set of them without the
    amendment, two euros or more from every site's charges either way; None when there is none."""
    totals_a = {s: c[2] + c[3] for s, c in amended["sites"].items()}
    totals_p = {s: c[2] + c[3] for s, c in plain["sites"].items()}
    values = sorted([*totals_a.values(), *totals_p.values()])
    options = []
    for low, high in itertools.pairwise(values):
        level = int((low + high) // 2 // E7)
        if not low + 2 * E7 < level * E7 < high - 2 * E7:
            continue
        over_a = {s for s, t in totals_a.items() if t > level * E7}
        over_p = {s for s, t in totals_p.items() if t > level * E7}
        if over_a and len(over_a) < len(totals_a) and over_a != over_p:
            options.append(level)
    return int(options[int(rng.integers(len(options)))]) if options else None


def draw_world(rng: np.random.Generator) -> dict[str, Any] | None:
    """One candidate agreement, amendment and year of readings, or None when the amendment would not change
    the answer to every kind of question (then setup draws again)."""
    month = int(rng.integers(6, 9))
    start = dt.date(YEAR, month, 1)
    end = dt.date(YEAR, month + 2, calendar.monthrange(YEAR, month + 2)[1])
    meters = _meter_ids(rng, int(rng.integers(6, 10)))
    sites = sorted(meters[:int(rng.integers(4, 7))])
    schedule_a = {"peak": int(rng.integers(1700, 2700)), "offpeak": int(rng.integers(900, 1500)),
                  "standing": int(rng.integers(9000, 24000))}
    effective = start + dt.timedelta(days=int(rng.integers(15, 70)))
    amendment = {"effective": effective.isoformat(), **{k: _changed(rng, v) for k, v in schedule_a.items()}}
    world = {"contract": f"ESA-{int(rng.integers(10000, 100000))}",
             "customer": CUSTOMERS[int(rng.integers(len(CUSTOMERS)))],
             "supplier": SUPPLIERS[int(rng.integers(len(SUPPLIERS)))], "sites": sites,
             "start": start.isoformat(), "end": end.isoformat(),
             "peak_hours": (int(rng.integers(6, 9)), int(rng.integers(18, 22))), "schedule_a": schedule_a,
             "amendment": amendment, "readings": readings(rng, meters)}
    draft = contract_text(world, 0, 0)
    amended = bill(draft, world["readings"], amendment)
    plain = bill(draft, world["readings"], None)
    cap, review = _cap(rng, amended, plain, amendment["effective"]), _review(rng, amended, plain)
    if cap is None or review is None:
        return None
    if abs(findings(amended)["total"] - findings(plain)["total"]) < 5 * E7:
        return None
    world["contract_txt"] = contract_text(world, cap, review)
    return world


def make_world(rng: np.random.Generator) -> dict[str, Any]:
    for _attempt in range(50):
        world = draw_world(rng)
        if world is not None:
            return world
    raise TaskError("no metering world whose answers all depend on the amendment in 50 draws")


def expected(world: dict[str, Any], amendment: dict[str, Any] | None) -> dict[str, Any]:
    """The answers and the per-site table (euros and kWh as floats) under an amendment, or without one."""
    result = bill(world["contract_txt"], world["readings"], amendment)
    found = findings(result)
    table = {site: [peak / 1000, offpeak / 1000, standing / E7, energy / E7, (standing + energy) / E7]
             for site, (peak, offpeak, standing, energy) in result["sites"].items()}
    return {"total": found["total"] / E7, "cap_date": found["cap_date"], "over": found["over"], "table": table}
