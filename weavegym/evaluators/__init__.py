"""Post-episode checkers: state probes through the guest agent plus trajectory rules.

- ``probes`` (``Probe``): read-only views of the final guest state, parsed on the host.
- ``scoring`` (``Clause``, ``Verdict``, ``score_clauses``): partial-credit scoring with critical caps.
- ``trajectory_rules``: shortcut detection over the recorded frames and CLI code.
- ``evaluation`` (``evaluate``, ``Evaluation``): clauses and rules combined into the episode's score.
"""

from weavegym.evaluators.evaluation import Evaluation, evaluate
from weavegym.evaluators.probes import MISSING, ROOT_SECTION, ListeningSocket, Probe, ProcessInfo, resolve_pointer
from weavegym.evaluators.scoring import Clause, ClauseResult, Outcome, Verdict, score_clauses
from weavegym.evaluators.trajectory_rules import (
    ForbiddenPattern,
    ForbiddenPatterns,
    GuiArtifactViaCli,
    ImageFromCapturedFrame,
    ReportedMetric,
    Rule,
    RuleContext,
    ShortcutFlag,
    TrajectoryRule,
    evaluate_rules,
)

__all__ = [
    "MISSING", "ROOT_SECTION", "Clause", "ClauseResult", "Evaluation", "ForbiddenPattern", "ForbiddenPatterns",
    "GuiArtifactViaCli", "ImageFromCapturedFrame", "ListeningSocket", "Outcome", "Probe", "ProcessInfo",
    "ReportedMetric", "Rule", "RuleContext", "ShortcutFlag", "TrajectoryRule", "Verdict", "evaluate",
    "evaluate_rules", "resolve_pointer", "score_clauses",
]
