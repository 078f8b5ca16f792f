"""Scoring what the agent said: the answer of ``done(answer=...)`` and the reason of ``fail(reason=...)``.

Every comparison is deterministic (no LLM judge) and returns a :class:`Verdict` whose evidence shows both
sides: what was read from the answer and what was expected. Agents wrap answers in prose, so the readers
are forgiving about form (``<answer>`` tags, thousands separators, units, bullets, date formats) and strict
about content (the number, the items, the day).

A clause uses them on ``probe.episode``::

    def _total(probe, truth):
        return check_number(probe.episode.answer, truth["total"], abs_tol=0.005)
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

from weavegym.core.trajectory import EpisodeEnd
from weavegym.evaluators.scoring import Verdict

_ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.IGNORECASE | re.DOTALL)
_SHOWN = 200  # characters of the answer quoted in evidence


def extract_answer(text: str) -> str:
    """The last ``<answer>…</answer>`` if there is one, else the whole text; stripped."""
    tagged = _ANSWER_TAG.findall(text or "")
    return (tagged[-1] if tagged else text or "").strip()


def _shown(text: str) -> str:
    return repr(text if len(text) <= _SHOWN else text[:_SHOWN] + "…")


# ---- numbers and units ------------------------------------------------------------------------------------

# unit -> (dimension, factor to the dimension's base unit)
UNITS: dict[str, tuple[str, float]] = {
    "b": ("bytes", 1), "byte": ("bytes", 1), "bytes": ("bytes", 1),
    "kb": ("bytes", 1e3), "mb": ("bytes", 1e6), "gb": ("bytes", 1e9), "tb": ("bytes", 1e12),
    "kib": ("bytes", 2**10), "mib": ("bytes", 2**20), "gib": ("bytes", 2**30), "tib": ("bytes", 2**40),
    "ms": ("seconds", 1e-3), "s": ("seconds", 1), "sec": ("seconds", 1), "secs": ("seconds", 1),
    "second": ("seconds", 1), "seconds": ("seconds", 1), "min": ("seconds", 60), "mins": ("seconds", 60),
    "minute": ("seconds", 60), "minutes": ("seconds", 60), "h": ("seconds", 3600), "hr": ("seconds", 3600),
    "hour": ("seconds", 3600), "hours": ("seconds", 3600),
    "%": ("percent", 1), "percent": ("percent", 1),
    "$": ("usd", 1), "usd": ("usd", 1), "€": ("eur", 1), "eur": ("eur", 1), "£": ("gbp", 1), "gbp": ("gbp", 1),
}
_SYMBOLS = {"$": "usd", "€": "eur", "£": "gbp"}
_MINUS = "-\u2212\u2013"
# A number: optional sign, digits with optional thousands groups (comma, space, thin space, apostrophe),
# optional decimals and exponent. A currency symbol may stand before it, a unit after it.
_QUANTITY = re.compile(
    r"(?P<pre>[$€£])?\s*(?P<num>[" + _MINUS + r"+]?(?:\d{1,3}(?:[,'\u00a0\u202f ]\d{3})+|\d+)(?:\.\d+)?"
    r"(?:[eE][" + _MINUS + r"+]?\d+)?)\s*(?P<unit>%|[A-Za-z€£$]+)?")


def parse_quantity(text: str) -> tuple[float, str] | None:
    """The first number in ``text`` and its unit ("" when none is given): ``"1,234.5 MiB"`` -> (1234.5, "mib")."""
    match = _QUANTITY.search(extract_answer(text))
    if match is None:
        return None
    raw = match["num"]
    for minus in _MINUS[1:]:
        raw = raw.replace(minus, "-")
    value = float(re.sub(r"[,'\u00a0\u202f ]", "", raw))
    unit = (match["pre"] or match["unit"] or "").lower()
    unit = _SYMBOLS.get(unit, unit)
    return value, unit if unit in UNITS else ""


def check_number(answer: str, expected: float, *, rel_tol: float = 0.0, abs_tol: float = 0.0,
                 unit: str = "") -> Verdict:
    """The answer's number equals ``expected`` (in ``unit``) within the tolerances.

    An answer in another unit of the same kind is converted (``1.5 KiB`` for 1536 bytes); a unit of another
    kind fails; an answer without a unit is read in ``unit``.
    """
    found = parse_quantity(answer)
    want = f"{_figure(expected)}{' ' + unit if unit else ''}"
    if found is None:
        return Verdict.failed(f"no number in the answer {_shown(answer)}; expected {want}")
    value, said = found
    if said and unit:
        have_dim, have_factor = UNITS[said]
        want_dim, want_factor = UNITS[unit.lower()]
        if have_dim != want_dim:
            return Verdict.failed(f"the answer {_shown(answer)} is in {said}, not a unit of {want_dim}; "
                                  f"expected {want}")
        value = value * have_factor / want_factor
    ok = math.isclose(value, expected, rel_tol=rel_tol, abs_tol=abs_tol)
    tolerance = f" (tolerance: {rel_tol:g} relative, {abs_tol:g} absolute)" if rel_tol or abs_tol else ""
    return Verdict.check(ok, f"the answer {_shown(answer)} reads as {_figure(value)}{' ' + unit if unit else ''}; "
                             f"expected {want}{tolerance}")


def _figure(value: float) -> str:
    """Every significant digit a float carries (``:g`` keeps six, so 11578.78 would show as 11578.8)."""
    return f"{value:.15g}"


# ---- text and lists ---------------------------------------------------------------------------------------

_EDGE_PUNCT = " \t\n\"'`.,;:!?()[]{}«»“”‘’"


def normalize_text(text: str) -> str:
    """Compatibility-normalised, case-folded, whitespace collapsed, quotes and end punctuation stripped."""
    folded = unicodedata.normalize("NFKC", text).casefold()
    return " ".join(folded.split()).strip(_EDGE_PUNCT)


def check_text(answer: str, accepted: str | Iterable[str]) -> Verdict:
    """The answer, normalised, equals one of the accepted spellings."""
    options = [accepted] if isinstance(accepted, str) else list(accepted)
    said = normalize_text(extract_answer(answer))
    ok = said in {normalize_text(o) for o in options}
    return Verdict.check(ok, f"the answer reads {said!r}; accepted: {', '.join(map(repr, options))}")


_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")
_SEPARATORS = re.compile(r"\n|;|,|\band\b", re.IGNORECASE)


def split_items(text: str) -> list[str]:
    """A list answer's items: one per line, or separated by commas, semicolons or "and"; bullets dropped."""
    body = extract_answer(text)
    lines = [_BULLET.sub("", line) for line in body.splitlines()]
    items = [part for line in lines for part in _SEPARATORS.split(line)]
    return [normalize_text(i) for i in items if normalize_text(i)]


def check_items(answer: str, expected: Sequence[str], *, ordered: bool = False) -> Verdict:
    """The answer lists exactly ``expected`` (as a multiset, or in order with ``ordered``).

    Some right items and nothing else wrong is partial credit; evidence names the missing and the extra.
    """
    said = split_items(answer)
    want = [normalize_text(e) for e in expected]
    if ordered:
        if said == want:
            return Verdict.satisfied(f"the answer lists {said} in the expected order")
        if sorted(said) == sorted(want):
            return Verdict.partial(f"the answer lists the right items {said} in the wrong order; expected {want}")
    missing = list((Counter(want) - Counter(said)).elements())
    extra = list((Counter(said) - Counter(want)).elements())
    if not missing and not extra:
        return Verdict.satisfied(f"the answer lists {sorted(said)}, as expected")
    evidence = f"the answer lists {said}; missing {missing}, not expected {extra}"
    return Verdict.partial(evidence) if len(missing) < len(want) and not extra else Verdict.failed(evidence)


# ---- dates ------------------------------------------------------------------------------------------------

_MONTHS = {name: i for i in range(1, 13) for name in (dt.date(2000, i, 1).strftime("%B").lower(),
                                                       dt.date(2000, i, 1).strftime("%b").lower())}
_ISO = re.compile(r"\b(\d{4})-(\d{1,2})-(\d{1,2})\b")
_DAY_MONTH = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)?\s+([A-Za-z]{3,9})\.?,?\s+(\d{4})\b")
_MONTH_DAY = re.compile(r"\b([A-Za-z]{3,9})\.?\s+(\d{1,2})(?:st|nd|rd|th)?,?\s+(\d{4})\b")
_NUMERIC = re.compile(r"\b(\d{1,2})[/.](\d{1,2})[/.](\d{4})\b")


def parse_date(text: str) -> dt.date | None:
    """An unambiguous date: ISO ``2026-12-02``, ``2 December 2026``, ``Dec 2, 2026``, or ``25/12/2026`` where
    the day is above 12 (``03/04/2026`` could be either, so it is not read)."""
    body = extract_answer(text)
    candidates: list[tuple[int, int, int]] = []
    if m := _ISO.search(body):
        candidates.append((int(m[1]), int(m[2]), int(m[3])))
    if (m := _DAY_MONTH.search(body)) and m[2].lower() in _MONTHS:
        candidates.append((int(m[3]), _MONTHS[m[2].lower()], int(m[1])))
    if (m := _MONTH_DAY.search(body)) and m[1].lower() in _MONTHS:
        candidates.append((int(m[3]), _MONTHS[m[1].lower()], int(m[2])))
    if m := _NUMERIC.search(body):
        first, second, year = int(m[1]), int(m[2]), int(m[3])
        if first > 12 >= second:
            candidates.append((year, second, first))
        elif second > 12 >= first or first == second:
            candidates.append((year, first, second))
    for year, month, day in candidates:
        try:
            return dt.date(year, month, day)
        except ValueError:
            continue
    return None


def check_date(answer: str, expected: dt.date) -> Verdict:
    said = parse_date(answer)
    if said is None:
        return Verdict.failed(f"no unambiguous date in the answer {_shown(answer)}; expected {expected.isoformat()}")
    return Verdict.check(said == expected, f"the answer {_shown(answer)} reads as {said.isoformat()}; "
                                           f"expected {expected.isoformat()}")


# ---- abstention -------------------------------------------------------------------------------------------


MAX_NAMED_CANDIDATES = 3  # more than this many candidates named in one reason is a list, not a diagnosis
_HEX_ID = re.compile(r"[0-9a-f]{7,64}")
_WORD = re.compile(r"[\w.-]+")  # a name's characters: letters, digits, "_", and "." and "-" inside it
_DOTS = re.compile(r"\.{2,}")  # a range or an ellipsis between two names ("v1.4..v1.6", "a...b")


def name_tokens(text: str) -> list[str]:
    """The whole names in ``text``, as the abstention rule reads them: one rule for causes and candidates.

    The text is compatibility-normalised and case-folded, and invisible format characters (zero-width
    spaces and joiners, soft hyphens) are dropped, so it reads as it shows. A token is a run of letters,
    digits, ``_``, ``.`` and ``-`` (so ``nightly-03.tar.gz`` is one, and ``a_b_c`` is one that names none of
    ``a``, ``b``, ``c``, and ``nightly-03.tar.gz.bak`` does not name ``nightly-03.tar.gz``); anything else
    separates tokens (spaces, punctuation, quotes, backticks, ``/``), as does a run of two or more dots; a
    token's leading and trailing dots and hyphens are the sentence's, not the name's. A lookalike letter from
    another script is a letter like any other: it makes another token, which names nothing.
    """
    folded = unicodedata.normalize("NFKC", text or "").casefold()
    visible = "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")
    parts = (part.strip(".-") for run in _WORD.findall(visible) for part in _DOTS.split(run))
    return [part for part in parts if part]


def _refers(token: str, name: str) -> bool:
    """The token is the name, or both are hexadecimal ids of seven or more digits, one abbreviating the other
    (git's short commit ids)."""
    return token == name or bool(_HEX_ID.fullmatch(token) and _HEX_ID.fullmatch(name)
                                 and (name.startswith(token) or token.startswith(name)))


def _names(tokens: Sequence[str], name: str) -> bool:
    """``tokens`` (of a reason) hold ``name``'s tokens as whole tokens, in a row."""
    want = name_tokens(name)
    if not want:
        return False
    return any(all(_refers(tokens[i + k], w) for k, w in enumerate(want))
               for i in range(len(tokens) - len(want) + 1))


def named_candidates(reason: str, candidates: Iterable[str]) -> list[str]:
    """The candidates a reason names, each as a whole token (``v1.1`` is not named by ``v1.10``, nor ``a`` by
    ``a_b_c``; see name_tokens).

    A hexadecimal candidate (a commit id) is also named by an abbreviation of seven or more characters, as
    git prints them.
    """
    tokens = name_tokens(reason)
    named = []
    for candidate in dict.fromkeys(normalize_text(c) for c in candidates):
        if candidate and _names(tokens, candidate):
            named.append(candidate)
    return named


def named_causes(reason: str, causes: Iterable[str], candidates: Iterable[str] = ()) -> list[str]:
    """The causes a reason names, by the rule that counts the candidates it names (named_candidates).

    A cause that stands for candidates (a commit's short id for the commit) is named only when one of them
    is, so that a token cannot name the cause without counting as the candidate it stands for.
    """
    pool = [normalize_text(c) for c in candidates]
    named = []
    for cause in dict.fromkeys(normalize_text(c) for c in causes):
        if not cause:
            continue
        stands_for = [c for c in pool if c and _same_name(cause, c)]
        if named_candidates(reason, stands_for or [cause]):
            named.append(cause)
    return named


def _same_name(cause: str, candidate: str) -> bool:
    mine, theirs = name_tokens(cause), name_tokens(candidate)
    return len(mine) == len(theirs) > 0 and all(_refers(a, b) for a, b in zip(mine, theirs, strict=True))


def named_limit(causes: Iterable[str], candidates: Iterable[str], max_named: int = MAX_NAMED_CANDIDATES) -> int:
    """How many candidates a right reason may name: ``max_named``, or the cause's own names plus one if more
    (a cut made of a closed road, a bridge and the bridge's road is three names before any remark)."""
    return max(max_named, len(named_candidates(" ".join(causes), candidates)) + 1)


def check_abstention(episode: EpisodeEnd, *, feasible: bool, causes: Iterable[str] = (),
                     candidates: Iterable[str] = (), max_named: int = MAX_NAMED_CANDIDATES) -> Verdict:
    """On an infeasible variant, the agent must ``fail`` and name a cause; on a feasible one, not fail.

    ``causes`` are the names a right reason contains (any one, as whole tokens: named_causes), e.g. the
    name of the backup that does not exist. ``candidates`` are every name of that kind the agent could have
    blamed (every batch, every release): a reason that names more than ``max_named`` of them (or the cause's
    own names plus one, if more; see named_limit) has listed them rather than found the one, so it counts as
    naming no cause. Causes and candidates are read by one rule (name_tokens), so no spelling of a list can
    name the cause without counting as the list it is.
    """
    causes = list(causes)
    names = [normalize_text(c) for c in causes]
    if feasible:
        return Verdict.check(episode.kind != "fail", f"the task was feasible and the agent ended with "
                                                     f"{episode.kind or 'no action'}"
                                                     + (f" (reason {_shown(episode.reason)})"
                                                        if episode.reason else ""))
    if episode.kind != "fail":
        return Verdict.failed(f"the task was infeasible, but the agent ended with {episode.kind or 'no action'}")
    pool = list(candidates)
    named = named_causes(episode.reason, causes, pool)
    listed, limit = named_candidates(episode.reason, pool), named_limit(causes, pool, max_named)
    if named and len(listed) > limit:
        return Verdict.partial(f"the agent gave up, but its reason {_shown(episode.reason)} names {len(listed)} of "
                               f"the {len(pool)} candidates ({', '.join(listed)}): a list of them all is not a "
                               f"diagnosis (at most {limit})")
    if named or not names:
        return Verdict.satisfied(f"the agent gave up with the reason {_shown(episode.reason)}"
                                 + (f", naming {named[0]!r}" if named else ""))
    return Verdict.partial(f"the agent gave up, but its reason {_shown(episode.reason)} names none of "
                           f"{names}")
