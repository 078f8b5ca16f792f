"""Weave-Productivity-8 (mailroom) without a VM: seeds and their traps, the oracle's look-ups run by the real
python3, bash, find and sha256sum on the seed's CRM and post room (Thunar's renames and moves done by hand), the
clauses on good and bad final states (unit), the scanner's judgement of typed paths, and the Mailroom Scanner on
a real Xvfb, read and typed into through the real agent (xvfb)."""

from __future__ import annotations

import fnmatch
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.productivity import _mailroom as mr
from weavegym.envs.tasks.productivity import mailroom as mm
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

FIXTURES = Path(mm.__file__).parent / "fixtures"
HOME = mm.HOME


def _plan(seed: int) -> dict[str, Any]:
    return mr.plan(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    p = _plan(seed)
    letters = [{k: x[k] for k in ("number", "sender", "printed_ref", "ref", "department", "client_folder", "manager",
                                  "sha256", "name", "path", "scan")} for x in p["letters"]]
    return {"letters": letters, "first_path": letters[0]["path"], "count": len(letters),
            "expected_dirs": sorted({f"{d}/{f}" for d, f in p["folders"]} |
                                    {f"{x['department']}/{x['client_folder']}" for x in letters}),
            "old_post": {o["path"]: mm._sha(o["data"]) for o in p["old_post"]}}


class TreeProbe(FilesProbe):
    """FilesProbe with the bash glob (one path segment per '*') and owners of the probe the clauses use."""

    def __init__(self, files: Mapping[str, bytes | str], dirs: set[str], owners: Mapping[str, str] | None = None
                 ) -> None:
        super().__init__(files)
        self.dirs, self.owners = dirs, dict(owners or {})

    def glob(self, pattern: str) -> list[str]:
        parts = pattern.split("/")
        return sorted(p for p in set(self.files) | self.dirs
                      if len(p.split("/")) == len(parts)
                      and all(fnmatch.fnmatchcase(a, b) for a, b in zip(p.split("/"), parts, strict=True)))

    def provenance(self, path: str) -> tuple[str, str] | None:
        return ("file", self.owners.get(path, mm.DESKTOP_USER)) if path in self.files else None


# ---- seeds and their traps -----------------------------------------------------------------------------------

def test_seeds_vary_the_post_and_the_crm() -> None:
    plans = [_plan(seed) for seed in range(9)]
    assert len({tuple(x["path"] for x in p["letters"]) for p in plans}) == 9
    assert len({tuple(x["scan"] for x in p["letters"]) for p in plans}) == 9
    assert all(len(p["letters"]) == mr.N_LETTERS for p in plans)
    assert json.dumps(_plan(4), default=str) == json.dumps(_plan(4), default=str)


@pytest.mark.parametrize("seed", range(10))
def test_every_seed_has_the_traps_and_its_letters_fit_the_scanner(seed: int) -> None:
    p = _plan(seed)
    letters = p["letters"]
    assert sum(x["printed_ref"] != x["customer_ref"] for x in letters) == 1  # one misprinted reference
    assert sum(x["ref"] != x["customer_ref"] for x in letters) == 1  # one closed customer with a successor
    misprinted = next(x for x in letters if x["printed_ref"] != x["customer_ref"])
    assert misprinted["printed_ref"][2:].replace("O", "0").replace("I", "1") == misprinted["customer_ref"][2:]
    names = {c["name"] for c in p["customers"]}
    for x in letters:  # every sender has a near namesake with another account
        pair = next(pair for pair in mr.COMPANIES if pair[0].upper() == x["sender"])
        assert pair[1] in names
        assert len(x["lines"]) == 6 and all(len(line) <= mr.LINE_CHARS for line in x["lines"])
        assert all(not pixel_font.unsupported(line) for line in x["lines"])
        assert mr.parse_letter(x["lines"])["date"] == x["date"]
    needed = {(x["department"], x["client_folder"]) for x in letters}
    assert len(set(p["missing"])) >= 2 and needed - set(p["missing"])  # some folders to make, some there
    assert len({x["sha256"][:8] for x in letters}) == len({x["path"] for x in letters}) == mr.N_LETTERS


# ---- the oracle's shell work, Thunar's by hand -------------------------------------------------------------------

def _home(seed: int, tmp_path: Path) -> Path:
    p = _plan(seed)
    home = tmp_path / f"home-{seed}"
    room = home / "postroom"
    for d in ("inbox", *mr.DEPARTMENTS, *(f"{d}/{f}" for d, f in p["folders"])):
        (room / d).mkdir(parents=True, exist_ok=True)
    for x in p["letters"]:
        (room / "inbox" / x["scan"]).write_bytes(x["data"])
    for old in p["old_post"]:
        (room / old["path"]).write_bytes(old["data"])
    (home / "outbox").mkdir()
    (home / "crm.db").write_bytes(mm.database(p))
    return home


def _run(home: Path, argv: list[str], stdin: str = "", check: bool = True) -> str:
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LC_ALL": "C"}
    return subprocess.run(argv, input=stdin, check=check, capture_output=True, text=True, env=env).stdout


def _oracle_offline(seed: int, home: Path, *, follow_rules: bool = True) -> list[dict[str, Any]]:
    """The oracle's shell steps for every letter as the screen shows it, Thunar's steps done by hand (one per
    round, as the oracle does them); the scanner's records."""
    records = []
    room = home / "postroom"
    for x in _plan(seed)["letters"]:
        letter = mr.parse_letter(x["lines"])
        assert letter is not None
        program = mr.lookup_program(letter)
        if not follow_rules:  # the reference as printed, a closed customer's own account
            program = program.replace('.replace("O", "0").replace("I", "1")', "").replace(
                'while row is not None and row[1] == "closed":', "while False:")
        rows = mr.parse_tagged(_run(home, [sys.executable, "-"], program, check=follow_rules))
        if "ROUTE" not in rows:
            continue
        sha, ref, department, folder, manager = rows["ROUTE"]
        name = mr.filing_name(letter["date"], ref, letter["subject"])
        for _round in range(4):
            at = rows["AT"][0]
            if at == f"{department}/{folder}/{name}":
                break
            if rows["DIR"][0] != "yes":
                (room / department / folder).mkdir()
            elif not at.endswith("/" + name):
                (room / at).rename(room / Path(at).parent / name)
            else:
                (room / at).rename(room / department / folder / name)
            rows = mr.parse_tagged(_run(home, ["bash", "-c", mr.locate_command(sha, department, folder)]))
        assert rows["AT"] == [f"{department}/{folder}/{name}"]
        code = f"C{x['number']:05d}"
        records.append({"event": "filed", "letter": x["number"], "path": f"{department}/{folder}/{name}",
                        "sha256": sha, "code": code})
        line = " | ".join((code, ref, department, manager, sha))
        _run(home, ["bash", "-c", f"printf '%s\\n' {mm.shlex.quote(line)} >> ~/outbox/routing.txt"])
    return records


def _probe(home: Path, records: list[dict[str, Any]], owners: Mapping[str, str] | None = None) -> TreeProbe:
    files: dict[str, bytes | str] = {}
    dirs = set()
    for path in (home / "postroom").rglob("*"):
        target = f"{mm.POSTROOM}/{path.relative_to(home / 'postroom')}"
        if path.is_dir():
            dirs.add(target)
        else:
            files[target] = path.read_bytes()
    log = home / "outbox" / "routing.txt"
    if log.exists():
        files[mm.LOG] = log.read_bytes()
    files[mm.RECORD] = "".join(json.dumps(r) + "\n" for r in records)
    return TreeProbe(files, dirs, owners)


def _outcomes(probe: TreeProbe, truth: Mapping[str, Any]) -> dict[str, Outcome]:
    return {c.name: c.check(probe, truth).outcome for c in mm.TASK.clauses}  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 3, 6])
def test_the_oracles_lookups_and_filings_satisfy_every_clause(seed: int, tmp_path: Path) -> None:
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    assert _outcomes(_probe(home, records), _truth(seed)) == {c.name: Outcome.SATISFIED for c in mm.TASK.clauses}


def test_ignoring_the_rules_files_letters_in_the_wrong_place(tmp_path: Path) -> None:
    seed = 3
    home = _home(seed, tmp_path)
    outcomes = _outcomes(_probe(home, _oracle_offline(seed, home, follow_rules=False)), _truth(seed))
    # the misprinted reference finds no customer (that letter stays in the inbox), the closed one goes astray
    assert outcomes["filed"] is Outcome.PARTIAL and outcomes["tidy"] is Outcome.FAILED
    assert outcomes["scanner_confirmed"] is Outcome.PARTIAL and outcomes["routing_log"] is Outcome.PARTIAL


def test_copies_strays_and_foreign_files_fail(tmp_path: Path) -> None:
    seed = 0
    truth = _truth(seed)
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    first = home / "postroom" / truth["letters"][0]["path"]
    shutil.copy(first, home / "postroom" / "inbox" / "scan-9999.pdf")  # a copy left behind
    assert _outcomes(_probe(home, records), truth)["tidy"] is Outcome.FAILED
    (home / "postroom" / "inbox" / "scan-9999.pdf").unlink()
    (home / "postroom" / "legal" / "notes.txt").write_text("x")  # a stray file
    assert _outcomes(_probe(home, records), truth)["tidy"] is Outcome.FAILED
    (home / "postroom" / "legal" / "notes.txt").unlink()
    old = next(iter(truth["old_post"]))
    (home / "postroom" / old).write_bytes(b"changed")
    assert _outcomes(_probe(home, records), truth)["tidy"] is Outcome.FAILED
    (home / "postroom" / old).unlink()
    first.write_bytes(b"%PDF-1.4 forged")
    outcomes = _outcomes(_probe(home, records), truth)
    assert outcomes["filed"] is Outcome.PARTIAL and outcomes["tidy"] is Outcome.FAILED
    home2 = _home(seed, tmp_path / "b")
    records2 = _oracle_offline(seed, home2)
    forged = {f"{mm.POSTROOM}/{x['path']}": mm.WORKSPACE_USER for x in truth["letters"]}
    assert _outcomes(_probe(home2, records2, forged), truth)["filed"] is Outcome.FAILED


def test_the_scanner_record_and_the_log_must_agree(tmp_path: Path) -> None:
    seed = 6
    truth = _truth(seed)
    home = _home(seed, tmp_path)
    records = _oracle_offline(seed, home)
    outcomes = _outcomes(_probe(home, []), truth)  # no confirmation at the scanner: codes made up
    assert outcomes["scanner_confirmed"] is Outcome.FAILED and outcomes["routing_log"] is Outcome.FAILED
    recoded = [dict(r, code=f"Z{r['letter']:05d}") for r in records]
    assert _outcomes(_probe(home, recoded), truth)["routing_log"] is Outcome.FAILED
    log = home / "outbox" / "routing.txt"
    text = log.read_text()
    log.write_text(text.replace(truth["letters"][2]["manager"], "Nobody Atall"))
    assert _outcomes(_probe(home, records), truth)["routing_log"] is Outcome.PARTIAL
    log.write_text(text + "ZZZZZZ | AB00000 | sales | Nobody | " + "0" * 64 + "\n")
    assert _outcomes(_probe(home, records), truth)["routing_log"] is Outcome.PARTIAL
    log.write_text(text.encode("utf-16").decode("latin-1"))
    assert _outcomes(_probe(home, records), truth)["routing_log"] is Outcome.FAILED
    log.unlink()
    assert _outcomes(_probe(home, records), truth)["routing_log"] is Outcome.FAILED
    half = [r for r in records if r["letter"] <= 3]
    assert _outcomes(_probe(home, half), truth)["scanner_confirmed"] is Outcome.PARTIAL


def test_the_oracle_is_denied_what_only_the_scanner_shows() -> None:
    truth = {**_truth(0), "scanner_at": [716, 59], "thunar": [0, 40, 700, 640], "targets": {}}
    assert set(mm.TASK.oracle_truth(truth)) == {"count", "scanner_at", "thunar", "targets"}


# ---- the scanner's judgement of a typed path ------------------------------------------------------------------------

def _scanner_module() -> Any:
    sys.path.insert(0, str(Path(pixel_font.__file__).parent))
    try:
        spec = importlib.util.spec_from_file_location("mailroom_scanner_fixture", FIXTURES / "mailroom_scanner.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.pop(0)


def test_the_scanner_refuses_every_wrong_filing_and_accepts_the_right_one(tmp_path: Path) -> None:
    scanner = _scanner_module()
    home = _home(0, tmp_path)
    room, inbox = str(home / "postroom"), str(home / "postroom" / "inbox")
    x = _plan(0)["letters"][0]
    letter = {"sha256": x["sha256"], "path": x["path"]}

    def judge(typed: str) -> str:
        return str(scanner.judge(typed, letter, room, inbox))

    assert judge("") == judge("../../etc/passwd") == judge("x" * 5000) == "REFUSED: TYPE THE PATH UNDER POSTROOM"
    assert judge("a\x00b") == "REFUSED: TYPE THE PATH UNDER POSTROOM"
    assert judge(x["path"]) == "REFUSED: NO FILE AT THAT PATH"
    assert judge(f"inbox/{x['scan']}") == "REFUSED: THE SCAN IS STILL IN THE INBOX"
    other = _plan(0)["letters"][1]
    assert judge(f"inbox/{other['scan']}") == "REFUSED: THAT FILE IS NOT THIS LETTER"
    wrong_dir = Path(room) / "sales" / "elsewhere"
    wrong_dir.mkdir()
    shutil.copy(Path(inbox) / x["scan"], wrong_dir / x["name"])
    assert judge(f"sales/elsewhere/{x['name']}") == "REFUSED: WRONG DEPARTMENT OR CLIENT"
    target = Path(room) / x["path"]
    target.parent.mkdir(exist_ok=True)
    shutil.copy(Path(inbox) / x["scan"], target.parent / "scan.pdf")
    assert judge(str(target.parent / "scan.pdf")) == "REFUSED: NAME DOES NOT FOLLOW THE RULE"
    shutil.copy(Path(inbox) / x["scan"], target)
    assert judge(x["path"]) == "REFUSED: A COPY IS LEFT IN THE INBOX"
    (Path(inbox) / x["scan"]).unlink()
    os.symlink(target, Path(inbox) / "link.pdf")  # a symlink is no copy, and no filing either
    assert judge(x["path"]) == judge(f"~/postroom/{x['path']}") == judge(f"{room}/{x['path']}") == ""
    assert judge("inbox/link.pdf") == "REFUSED: NO FILE AT THAT PATH"


# ---- the real window on a real X server, through the real guest agent ----------------------------------------

@pytest.mark.xvfb
def test_the_scanner_shows_letters_after_scan_refuses_and_gives_receipts(xvfb: XvfbDisplay, client: GuestClient,
                                                                       tmp_path: Path) -> None:
    p = _plan(3)
    home = _home(3, tmp_path)
    room = home / "postroom"
    conf = {"letters": [{k: x[k] for k in ("lines", "sha256", "path")} for x in p["letters"]], "root": str(room),
            "inbox": str(room / "inbox"), "layout": mr.layout()}
    shutil.copy(FIXTURES / "mailroom_scanner.py", tmp_path / "mailroom_scanner.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "mailroom_scanner.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env={**os.environ, "DISPLAY": xvfb.display, "LANG": "C.UTF-8"})
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(conf).encode())
    proc.stdin.close()
    try:
        at = wait_for(lambda: mr.origin(client.screenshot().image, mr.SCANNER_AT), 20, what="the scanner drawn")
        assert mr.read_letter(client.screenshot().image, at) == []  # nothing before Scan
        entry = mr.centre(at, mr.ENTRY)
        client.click(*entry)
        client.type_text("legal/x.pdf\n")
        wait_for(lambda: mr.read_status(client.screenshot().image, at) == "REFUSED: PRESS SCAN NEXT LETTER FIRST",
                 20, what="the refusal before a scan")
        client.click(*mr.centre(at, mr.SCAN_BUTTON))
        first = p["letters"][0]
        wait_for(lambda: mr.read_letter(client.screenshot().image, at) == first["lines"], 20, what="letter 1")
        client.click(*entry)
        client.key("ctrl+slash")
        client.type_text("../Ünïcode/" + "y" * 30 + "\n")  # odd input: refused, the window lives on (huge: above)
        wait_for(lambda: mr.read_status(client.screenshot().image, at) == "REFUSED: TYPE THE PATH UNDER POSTROOM",
                 20, what="the refusal of odd input")
        target = room / first["path"]
        target.parent.mkdir(exist_ok=True)
        (room / "inbox" / first["scan"]).rename(target)
        client.click(*entry)
        client.key("ctrl+slash")
        client.type_text(first["path"] + "\n")
        record = json.loads(proc.stdout.readline())
        assert record["letter"] == 1 and record["path"] == first["path"] and record["event"] == "filed"
        wait_for(lambda: mr.read_status(client.screenshot().image, at) == f"LETTER 1 FILED RECEIPT {record['code']}",
                 20, what="the receipt")
        assert mr.read_letter(client.screenshot().image, at) == p["letters"][1]["lines"]  # the next one at once
    finally:
        proc.kill()
        proc.wait()


def test_the_oracle_tells_a_thunar_dialog_from_a_repaint_or_the_type_ahead_box() -> None:
    window = [0, 40, 700, 640]
    before = np.full((720, 1280, 3), 255, dtype=np.uint8)

    def box_of(x0: int, y0: int, x1: int, y1: int, shade: int = 246) -> tuple[int, int, int, int] | None:
        frame = before.copy()
        frame[y0:y1, x0:x1] = shade  # a dialog's faint grey over the white folder view
        frame[40:66, 0:700] = 90  # the title bar's shade changes with the focus: not part of the box
        return mm.dialog_box(frame, before, window)

    dialog = box_of(187, 265, 513, 455)
    assert dialog is not None and mm.is_dialog(dialog, window)
    assert not mm.is_dialog(box_of(170, 120, 700, 680), window)  # the folder view repainted
    assert not mm.is_dialog(box_of(520, 600, 690, 630), window)  # the type-ahead search box
    assert not mm.is_dialog(box_of(187, 265, 513, 455, shade=253), window)  # too faint: nothing changed
    assert not mm.is_dialog(None, window)


def test_the_locate_finds_a_client_folder_made_in_the_wrong_place(tmp_path: Path) -> None:
    seed = 0
    home = _home(seed, tmp_path)
    room = home / "postroom"
    x = next(x for x in _plan(seed)["letters"] if not (room / x["department"] / x["client_folder"]).exists())
    elsewhere = next(d for d in mr.DEPARTMENTS if d != x["department"])
    (home / "postroom" / elsewhere / x["client_folder"]).mkdir()
    rows = mr.parse_tagged(_run(home, ["bash", "-c", mr.locate_command(x["sha256"], x["department"],
                                                                       x["client_folder"])]))
    assert rows == {"AT": [f"inbox/{x['scan']}"], "DIR": ["no"], "STRAY": [f"{elsewhere}/{x['client_folder']}"]}
    (room / elsewhere / x["client_folder"]).rename(room / x["department"] / x["client_folder"])
    rows = mr.parse_tagged(_run(home, ["bash", "-c", mr.locate_command(x["sha256"], x["department"],
                                                                       x["client_folder"])]))
    assert rows == {"AT": [f"inbox/{x['scan']}"], "DIR": ["yes"]}
