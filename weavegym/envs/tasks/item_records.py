"""For tasks whose GUI app keeps a root-only record of numbered items (rounds, puzzles, problems, fields,
alerts) and whose clauses judge every item: one reader of that record and one per-item verdict.

The apps append one JSON object per line as the agent works; the checker reads the file through the probe
after the episode. The last line of an item wins (a round recorded twice counts as recorded the second time).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from weavegym.evaluators import Probe, Verdict


def numbered_records(probe: Probe, path: str, key: str,
                     accept: Callable[[dict[str, Any]], bool] | None = None) -> dict[int, dict[str, Any]]:
    """{number: the item's last record} from the JSON lines at ``path``.

    Lines that are not JSON objects with an integer ``key`` are skipped rather than fatal (a torn last line
    from an app killed mid-write must not hide the items before it); ``accept`` drops records such as
    refusals.
    """
    found: dict[int, dict[str, Any]] = {}
    for line in (probe.read_bytes(path) or b"").decode("utf-8", errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get(key), int) and (accept is None or accept(record)):
            found[record[key]] = record
    return found


def per_item_verdict(problems: list[str], what: str, noun: str = "") -> Verdict:
    """One verdict over items judged one by one: each entry of ``problems`` is '' for a right item, else what
    is wrong with it. All right: satisfied; some: partial; none, or no items at all: failed."""
    wrong = [p for p in problems if p]
    if not problems:
        return Verdict.failed("nothing to check")
    if not wrong:
        return Verdict.satisfied(f"all {len(problems)}{' ' + noun if noun else ''}: {what}")
    evidence = "; ".join(wrong)
    return Verdict.partial(evidence) if len(wrong) < len(problems) else Verdict.failed(evidence)
