"""The shop repository of Weave-DevOps-8, generated from a seed (no TASK here).

``plan_history`` decides everything on the host: a small Python package ``shop`` of six modules, each one
function with a bug at an edge (a threshold, a rounding, a floor), a ``main`` branch of 30-45 commits and a
``release-N`` branch cut from it partway with two release commits of its own. After the cut, ``main`` fixes
three of the bugs (the tickets the Release Board shows) and two others (decoys no ticket asks for), among helper
commits, docstring polish and test additions that touch the same modules. Subjects never say which commit fixes
what ("fees: review follow-up"), so the agent finds a ticket's fix by running the ticket's call at main's commits.

Every module is rendered whole from a small state, so a fix's diff is exactly its one line, and the lines other
commits change (the module docstring at the top, helpers appended at the end) stay at least two lines away from
it: each fix cherry-picks cleanly onto the release branch. ``fast_import_stream`` turns the plan into a
`git fast-import` stream with fixed dates, so the hashes are a function of the seed alone.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

SHOPS = ("corner", "harbour", "garden", "market", "lantern", "orchard")
AUTHORS = ("Dana Ortiz <dana@dev.example>", "Sam Keller <sam@dev.example>", "Priya Natarajan <priya@dev.example>",
           "Lee Huang <lee@dev.example>", "Mina Sato <mina@dev.example>", "Tom Becker <tom@dev.example>")
DESK_NAME, DESK_EMAIL = "Release Desk", "desk@{shop}.example"


@dataclass(frozen=True)
class Kind:
    """One module's function: its buggy and fixed expression, and how a ticket's call breaks it."""

    module: str
    function: str
    args: str  # the signature's parameters
    title: str
    buggy: str
    fixed: str
    constants: tuple[str, ...]  # names, in order


KINDS: dict[str, Kind] = {k.module: k for k in (
    Kind("fees", "shipping_cents", "weight_kg: int", "Shipping fees",
         "BASE_CENTS + (HEAVY_CENTS if weight_kg > HEAVY_KG else 0)",
         "BASE_CENTS + (HEAVY_CENTS if weight_kg >= HEAVY_KG else 0)", ("BASE_CENTS", "HEAVY_KG", "HEAVY_CENTS")),
    Kind("tax", "tax_cents", "amount_cents: int", "Sales tax",
         "amount_cents * RATE_PERCENT // 100", "(amount_cents * RATE_PERCENT + 50) // 100", ("RATE_PERCENT",)),
    Kind("stock", "reorder_qty", "on_hand: int, target: int", "Stock reordering",
         "target - on_hand", "max(0, target - on_hand)", ()),
    Kind("paging", "page_count", "items: int", "Catalogue paging",
         "items // PER_PAGE", "-(-items // PER_PAGE)", ("PER_PAGE",)),
    Kind("loyalty", "points", "cents: int", "Loyalty points",
         "cents // 100 * POINTS_PER_EURO", "cents * POINTS_PER_EURO // 100", ("POINTS_PER_EURO",)),
    Kind("weeks", "week_of", "day: int", "Sales weeks",
         "day // 7 + 1", "(day - 1) // 7 + 1", ()),
)}
MODULES = tuple(KINDS)
FIX_SUBJECTS = ("{m}: review follow-up", "{m}: handle the edge", "{m}: correct the arithmetic",
                "{m}: tidy the calculation", "{m}: adjust for the report", "{m}: small correction")
POLISH = (" Amounts are in cents.", " Used by the checkout.", " Keep it free of imports.", " See the README.",
          " Reviewed each release.")
WORDS = ("label", "summary", "line", "caption", "badge", "preview", "digest", "note")
DOC_LINES = ("Run the tests before every release.", "Amounts are integers in cents.",
             "Each area is one module under shop/.", "Releases are branches cut from main.",
             "Backports are cherry-picks onto the release branch.", "Ask in #shop before changing a rate.")


def draw_constants(rng: np.random.Generator, module: str) -> dict[str, int]:
    if module == "fees":
        return {"BASE_CENTS": int(rng.integers(3, 9)) * 50, "HEAVY_KG": int(rng.integers(5, 25)),
                "HEAVY_CENTS": int(rng.integers(2, 12)) * 50}
    if module == "tax":
        return {"RATE_PERCENT": int(rng.choice([7, 9, 13, 17, 19, 21, 23]))}
    if module == "paging":
        return {"PER_PAGE": int(rng.choice([12, 15, 20, 24, 25, 30, 40, 50]))}
    if module == "loyalty":
        return {"POINTS_PER_EURO": int(rng.integers(2, 10))}
    return {}


def call_value(module: str, constants: dict[str, int], fixed: bool, args: tuple[int, ...]) -> int:
    """The function's result, computed from the same expression the module holds (evaluated on the host)."""
    kind = KINDS[module]
    names = [p.split(":")[0].strip() for p in kind.args.split(",")]
    scope = {**constants, **dict(zip(names, args, strict=True))}
    return int(eval(kind.fixed if fixed else kind.buggy, {"__builtins__": {"max": max}}, scope))


def ticket_args(rng: np.random.Generator, module: str, constants: dict[str, int]) -> tuple[int, ...]:
    """A call that hits the bug: the fixed function's result differs from the buggy one's."""
    for _ in range(200):
        if module == "fees":
            args: tuple[int, ...] = (constants["HEAVY_KG"],)
        elif module == "tax":
            args = (int(rng.integers(100, 9000)),)
        elif module == "stock":
            target = int(rng.integers(10, 80))
            args = (target + int(rng.integers(1, 20)), target)
        elif module == "paging":
            args = (constants["PER_PAGE"] * int(rng.integers(1, 9)) + int(rng.integers(1, constants["PER_PAGE"])),)
        elif module == "loyalty":
            args = (int(rng.integers(1, 90)) * 100 + int(rng.integers(30, 100)),)
        else:
            args = (7 * int(rng.integers(1, 50)),)
        if call_value(module, constants, False, args) != call_value(module, constants, True, args):
            return args
    raise AssertionError(f"no call hits the {module} bug")


def safe_cases(module: str, constants: dict[str, int]) -> list[tuple[tuple[int, ...], int]]:
    """Calls the buggy and the fixed function answer alike: the test suite's cases, green on both sides."""
    if module == "fees":
        h = constants["HEAVY_KG"]
        candidates: list[tuple[int, ...]] = [(h - 1,), (h + 1,), (1,)]
    elif module == "tax":
        candidates = [(100,), (1000,), (200,)]
    elif module == "stock":
        candidates = [(3, 20), (0, 12), (9, 10)]
    elif module == "paging":
        candidates = [(constants["PER_PAGE"],), (constants["PER_PAGE"] * 3,), (0,)]
    elif module == "loyalty":
        candidates = [(500,), (1200,), (0,)]
    else:
        candidates = [(1,), (8,), (20,)]
    cases = []
    for args in candidates:
        before, after = call_value(module, constants, False, args), call_value(module, constants, True, args)
        if before == after:
            cases.append((args, after))
    return cases


@dataclass
class ModuleState:
    module: str
    constants: dict[str, int]
    fixed: bool = False
    polish: str = ""
    helpers: list[str] = field(default_factory=list)


def module_text(state: ModuleState) -> str:
    kind = KINDS[state.module]
    text = f'"""{kind.title} for the shop.{state.polish}"""\n'
    if state.constants:
        text += "\n" + "".join(f"{name} = {state.constants[name]}\n" for name in kind.constants)
    text += (f"\n\ndef {kind.function}({kind.args}) -> int:\n"
             f'    """{kind.title}: an integer result."""\n'
             f"    result = {kind.fixed if state.fixed else kind.buggy}\n"
             "    assert isinstance(result, int)\n"
             "    return result\n")
    for name in state.helpers:
        text += (f"\n\ndef {name}(value: int) -> str:\n"
                 f'    """The value as a short {name.split("_")[0]} for the logs."""\n'
                 f'    return f"{state.module}: {{value}}"\n')
    return text


def tests_text(cases: list[tuple[str, tuple[int, ...], int]]) -> str:
    text = ('"""The shop\'s test suite: python3 -m unittest (from the repository\'s top folder)."""\n\n'
            "import unittest\n\n")
    text += "".join(f"from shop.{m} import {KINDS[m].function}\n" for m in MODULES)
    text += "\n\nclass ShopTest(unittest.TestCase):\n"
    for number, (module, args, want) in enumerate(cases, 1):
        call = f"{KINDS[module].function}({', '.join(map(str, args))})"
        text += f"    def test_{module}_{number}(self) -> None:\n        self.assertEqual({call}, {want})\n\n"
    return text + '\nif __name__ == "__main__":\n    unittest.main()\n'


@dataclass
class Commit:
    subject: str
    author: str
    when: int
    files: dict[str, str]
    branch: str = "main"
    parent: int | None = None  # the commit this one follows when it is not the previous one on its branch


@dataclass
class History:
    shop: str
    release: str  # the branch name, release-N
    version: str
    commits: list[Commit]
    cut: int  # the main commit the release branch starts from
    release_tip: int  # the release branch's last commit
    tickets: list[dict[str, Any]]  # in board order: id, module, function, args, gives, wants, fix (commit index)
    decoys: dict[str, int]  # module -> the commit index of a fix no ticket asks for
    constants: dict[str, dict[str, int]]


def _date(when: int) -> str:
    return datetime.fromtimestamp(when, UTC).strftime("%Y-%m-%d")


def plan_history(rng: np.random.Generator) -> History:
    shop = SHOPS[int(rng.integers(len(SHOPS)))]
    order = [str(m) for m in rng.permutation(MODULES)]
    ticketed, decoyed = order[:3], order[3:5]
    constants = {m: draw_constants(rng, m) for m in MODULES}
    states = {m: ModuleState(m, constants[m]) for m in MODULES}
    cases: list[tuple[str, tuple[int, ...], int]] = []
    for m in MODULES:
        cases += [(m, args, want) for args, want in safe_cases(m, constants[m])[:2]]
    minor = int(rng.integers(2, 9))
    version = f"3.{minor}.0"
    release = f"release-3.{minor}"
    when = int(datetime(2026, int(rng.integers(2, 9)), int(rng.integers(1, 28)), 9, tzinfo=UTC).timestamp())
    docs: list[str] = []

    def tick() -> tuple[str, int]:
        nonlocal when
        when += int(rng.integers(2, 30)) * 3600 + int(rng.integers(0, 3600))
        return AUTHORS[int(rng.integers(len(AUTHORS)))], when

    def readme() -> str:
        return f"# {shop} shop\n\nThe {shop} shop's pricing code.\n\n" + "".join(f"- {d}\n" for d in docs)

    shown_cases = cases[:len(MODULES)]
    initial = {"README.md": readme(), "VERSION": "3.0.0\n", ".gitignore": "__pycache__/\n", "shop/__init__.py": "",
               "tests/__init__.py": "", "tests/test_shop.py": tests_text(shown_cases),
               **{f"shop/{m}.py": module_text(states[m]) for m in MODULES}}
    author, at = tick()
    commits = [Commit(f"Initial {shop} shop", AUTHORS[0], at, initial)]

    def noise(after_cut: bool) -> tuple[str, dict[str, str]]:
        kinds = ["helper", "docs", "tests"] + (["polish"] if after_cut else [])
        kind = kinds[int(rng.integers(len(kinds)))]
        if kind == "tests" and len(shown_cases) >= len(cases):
            kind = "helper"
        m = str(rng.choice(MODULES))
        state = states[m]
        if kind == "helper":
            name = f"{WORDS[int(rng.integers(len(WORDS)))]}_{len(state.helpers) + 1}"
            state.helpers.append(name)
            return f"{m}: add {name}()", {f"shop/{m}.py": module_text(state)}
        if kind == "polish":
            state.polish = str(rng.choice([p for p in POLISH if p != state.polish]))
            return f"{m}: polish the docstring", {f"shop/{m}.py": module_text(state)}
        if kind == "tests":
            shown_cases.append(cases[len(shown_cases)])
            return "tests: more cases", {"tests/test_shop.py": tests_text(shown_cases)}
        docs.append(DOC_LINES[int(rng.integers(len(DOC_LINES)))])
        return "docs: README notes", {"README.md": readme()}

    for _ in range(int(rng.integers(8, 14))):
        subject, files = noise(False)
        author, at = tick()
        commits.append(Commit(subject, author, at, files))
    cut = len(commits) - 1
    # After the cut: the fixes (three ticketed, two decoys) spread among 14-24 ordinary commits on main.
    plain = int(rng.integers(14, 25))
    slots = sorted(int(i) for i in rng.choice(plain, size=5, replace=False))
    fixes = [*ticketed, *decoyed]
    fix_order = [fixes[i] for i in rng.permutation(5)]
    fixed_at: dict[str, int] = {}
    release_commits = [("Release " + version, {"VERSION": f"{version}\n"}),
                       ("release: changelog", {"CHANGELOG.md": f"# Changelog\n\n## {version}\n- cut from main\n"})]
    for i in range(plain):
        if i == 1:  # the release branch's own commits, in the middle of main's after the cut
            parent = cut
            for subject, files in release_commits:
                author, at = tick()
                commits.append(Commit(subject, author, at, files, branch=release, parent=parent))
                parent = None
        while slots and slots[0] == i:
            slots.pop(0)
            m = fix_order.pop(0)
            states[m].fixed = True
            subject = FIX_SUBJECTS[int(rng.integers(len(FIX_SUBJECTS)))].format(m=m)
            author, at = tick()
            fixed_at[m] = len(commits)
            commits.append(Commit(subject, author, at, {f"shop/{m}.py": module_text(states[m])}))
        subject, files = noise(True)
        author, at = tick()
        commits.append(Commit(subject, author, at, files))
    release_tip = max(i for i, c in enumerate(commits) if c.branch == release)
    numbers = [int(n) for n in rng.choice(np.arange(1000, 10000), size=3, replace=False)]
    tickets = []
    for number, m in zip(numbers, ticketed, strict=True):
        args = ticket_args(rng, m, constants[m])
        tickets.append({"id": f"RB-{number}", "module": m, "function": KINDS[m].function, "args": list(args),
                        "gives": call_value(m, constants[m], False, args),
                        "wants": call_value(m, constants[m], True, args), "fix": fixed_at[m]})
    return History(shop, release, version, commits, cut, release_tip, tickets, {m: fixed_at[m] for m in decoyed},
                   constants)


def fast_import_stream(history: History) -> bytes:
    """The history as `git fast-import` input: commit i is mark i+1; each branch's commits follow one another."""
    out = bytearray()

    def data(text: str) -> None:
        raw = text.encode()
        out.extend(f"data {len(raw)}\n".encode() + raw + b"\n")

    for i, commit in enumerate(history.commits):
        who = f"{commit.author} {commit.when} +0000"
        out.extend(f"commit refs/heads/{commit.branch}\nmark :{i + 1}\nauthor {who}\ncommitter {who}\n".encode())
        data(commit.subject + "\n")
        if commit.parent is not None:
            out.extend(f"from :{commit.parent + 1}\n".encode())
        for path, text in sorted(commit.files.items()):
            out.extend(f"M 100644 inline {path}\n".encode())
            data(text)
    return bytes(out)


def call_text(ticket: dict[str, Any]) -> str:
    return f"{ticket['function']}({', '.join(str(a) for a in ticket['args'])})"


def build_spec(history: History, repo: str, stream: str) -> str:
    """The JSON the guest's build script reads (fixtures/build_backport_repo.py)."""
    return json.dumps({"repo": repo, "stream": stream, "release": history.release,
                       "fix_marks": [t["fix"] + 1 for t in history.tickets],
                       "calls": [[t["module"], call_text(t), t["wants"]] for t in history.tickets],
                       "name": DESK_NAME, "email": DESK_EMAIL.format(shop=history.shop)})
