"""Post-episode checkers: state probes through the guest agent plus trajectory rules.

- ``probes`` (``Probe``): read-only views of the final guest state, parsed on the host.
- ``scoring`` (``Clause``, ``Verdict``, ``score_clauses``): partial-credit scoring with critical caps.
- ``trajectory_rules``: shortcut detection over the recorded frames and CLI code.
- ``evaluation`` (``evaluate``, ``Evaluation``): clauses and rules combined into the episode's score.
- ``image_hash``: frame fingerprints shared with ``envs.trajectory``.

Names are re-exported lazily: ``envs.trajectory`` imports ``image_hash`` from
this package, and eager imports here would make that import circular.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Probe": "probes",
    "ProcessInfo": "probes",
    "ListeningSocket": "probes",
    "MISSING": "probes",
    "ROOT_SECTION": "probes",
    "resolve_pointer": "probes",
    "Outcome": "scoring",
    "Verdict": "scoring",
    "Clause": "scoring",
    "ClauseResult": "scoring",
    "score_clauses": "scoring",
    "ShortcutFlag": "trajectory_rules",
    "RuleContext": "trajectory_rules",
    "Rule": "trajectory_rules",
    "TrajectoryRule": "trajectory_rules",
    "ImageFromCapturedFrame": "trajectory_rules",
    "GuiArtifactViaCli": "trajectory_rules",
    "ForbiddenPattern": "trajectory_rules",
    "ForbiddenPatterns": "trajectory_rules",
    "ReportedMetric": "trajectory_rules",
    "evaluate_rules": "trajectory_rules",
    "Evaluation": "evaluation",
    "evaluate": "evaluation",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
