"""Weave-Web-6 (the link audit) without a VM: seeds, the site's plan, the CMS server on the host (pages, loops, the
editor's refusals, tickets), the oracle's crawl, lookup and report scripts run by the real python3 against it, the
clauses on good and bad states (unit), and the SEO Audit board on a real Xvfb, started, verified and read back
through the real agent (xvfb)."""

from __future__ import annotations

import getpass
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.web import _links as links
from weavegym.envs.tasks.web import link_audit as la
from weavegym.envs.tasks.web._portal import RECORDS
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.files_probe import FilesProbe
from weavegym.testing.xvfb import XvfbDisplay

WEB = Path(la.__file__).parent
ME = getpass.getuser()  # the host tests' "desktop account": the server takes edits from it


def _plan(seed: int) -> dict[str, Any]:
    return links.plan(np.random.default_rng(seed))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Site:
    """The CMS server on the host, for one seed's plan."""

    def __init__(self, seed: int, tmp: Path, desktop: str = ME) -> None:
        self.plan = _plan(seed)
        self.port, self.records, self.tmp = _free_port(), tmp / "records.jsonl", tmp
        self.origin = f"http://127.0.0.1:{self.port}"
        static = tmp / "static"
        static.mkdir(parents=True, exist_ok=True)
        for name in ("admin.html", "link-admin.js"):
            shutil.copy(WEB / "fixtures/linkcms" / name, static / name)
        shutil.copy(WEB / "fixtures/portal-form.js", static / "portal-form.js")
        (static / "admin.css").write_text((WEB / "fixtures/portal.css").read_text().replace("{{BANNER}}", "#123456"))
        self.proc = subprocess.Popen(
            [sys.executable, "-I", str(WEB / "fixtures/linkcms/link_cms_server.py"), "--port", str(self.port),
             "--log", str(tmp / "log"), "--static", str(static), "--records", str(self.records)],
            stdin=subprocess.PIPE)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(links.server_plan(self.plan, desktop)).encode())
        self.proc.stdin.close()
        wait_for(lambda: self.get("/")[0] == 200, 20, what="the CMS answering")
        home = tmp / "home"
        (home / "outbox").mkdir(parents=True, exist_ok=True)
        (home / "migration.db").write_bytes(database_bytes(links.SCHEMA, {"moves": self.plan["moves"]}))
        self.home = home

    def close(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def get(self, path: str) -> tuple[int, str, str]:
        class Stay(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args: Any, **kwargs: Any) -> None:
                return None
        try:
            with urllib.request.build_opener(Stay).open(self.origin + path, timeout=5) as reply:
                return reply.status, reply.read().decode(), ""
        except urllib.error.HTTPError as err:
            return err.code, "", err.headers.get("Location") or ""
        except OSError:
            return -1, "", ""

    def post(self, form: str, body: Mapping[str, Any], origin: str | None = None) -> tuple[int, dict[str, Any]]:
        headers = {"Content-Type": "application/json"}
        if origin is not False:
            headers["Origin"] = origin or self.origin
        request = urllib.request.Request(f"{self.origin}/api/{form}", json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as reply:
                return reply.status, json.loads(reply.read())
        except urllib.error.HTTPError as err:
            return err.code, json.loads(err.read())

    def shell(self, script: str) -> str:
        done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60,
                              env={**os.environ, "HOME": str(self.home)}, check=True)
        return done.stdout

    def truth(self) -> dict[str, Any]:
        return {"findings": self.plan["findings"], "decoys": self.plan["decoys"], "origin": self.origin,
                "sitemap": links.reachable(links.fixed_pages(self.plan), self.plan["nav"]),
                "count": len(self.plan["findings"])}


class LiveProbe(FilesProbe):
    """FilesProbe plus the real server's HTTP and records file (what the checker reads in the guest)."""

    def __init__(self, site: Site, files: Mapping[str, bytes | str]) -> None:
        records = site.records.read_text() if site.records.exists() else ""
        super().__init__({RECORDS: records, **files})
        self.site = site

    def http_get(self, url: str, timeout: float = 5.0) -> tuple[int, str] | None:
        status, body, _location = self.site.get(url.removeprefix(self.site.origin))
        return None if status < 0 else (status, body)


@pytest.fixture()
def site(tmp_path: Path) -> Iterator[Site]:
    s = Site(0, tmp_path)
    yield s
    s.close()


def _oracle_fix_all(s: Site) -> list[dict[str, Any]]:
    """What the oracle does, with the board's findings from the plan: look up, publish, verify; the fixes."""
    fixes = []
    for number, lines in enumerate(links.board_findings(s.plan), 1):
        finding = links.current_finding([f"FINDING {number} OF 4", *lines])
        assert finding is not None
        out = s.shell(la.LOOKUP.format(port=s.port, page=finding["page"], box=finding["box"],
                                       index=finding["index"]))
        page, old, new = la.FIX.match(out.strip().splitlines()[-1]).groups()  # type: ignore[union-attr]
        assert s.post("link-edits", {"page": page, "old": old, "new": new})[0] == 201
        assert "LIVE" in s.shell(la.CONFIRM.format(port=s.port, page=page, old=old))
        status, answer = s.post("verify", {"finding": number}, origin=False)
        assert status == 200 and answer["ok"], answer
        fix = {"finding": number, "ticket": answer["ticket"], "page": page, "old_url": old, "new_url": new}
        assert f"RECORDED {number} {answer['ticket']} 200" in s.shell(la.RECORD.format(port=s.port, fix=fix))
        fixes.append(fix)
    assert "SITEMAP 21 pages" in s.shell(la.SITEMAP_SCRIPT.format(port=s.port))
    return fixes


def _outputs(s: Site) -> dict[str, bytes]:
    return {la.REPORT: (s.home / "outbox/audit.json").read_bytes(),
            la.SITEMAP: (s.home / "outbox/sitemap.txt").read_bytes()}


# ---- seeds and the plan ------------------------------------------------------------------------------------------

def test_seeds_vary_the_site_and_the_findings() -> None:
    plans = [_plan(seed) for seed in range(9)]
    assert len({json.dumps(p["findings"], sort_keys=True) for p in plans}) == 9
    assert len({tuple(f["kind"] for f in p["findings"]) for p in plans}) >= 4
    assert _plan(4) == _plan(4)


@pytest.mark.parametrize("seed", range(12))
def test_every_finding_is_broken_drawable_and_one_target_is_an_orphan(seed: int) -> None:
    p = _plan(seed)
    assert {f["kind"] for f in p["findings"]} == {links.RIGHT, links.WRONG, links.MISSING}
    assert len(p["findings"]) == 4
    for lines in links.board_findings(p):
        assert len(lines) == 3 and all(len(line) <= links.LINE_CHARS and not pixel_font.unsupported(line)
                                       for line in lines)
    before, after = links.reachable(p["pages"], p["nav"]), links.reachable(links.fixed_pages(p), p["nav"])
    orphans = {f["target"] for f in p["findings"] if f["kind"] == links.RIGHT}
    assert orphans and not orphans & set(before) and set(after) - set(before) == orphans
    moves = {old: new for old, new, _day in p["moves"]}
    for f in p["findings"]:
        assert f["old"] not in p["pages"]
        assert (f["old"] in p["loops"]) == (f["symptom"] == links.LOOP)
        assert {links.RIGHT: moves.get(f["old"]) == f["target"], links.MISSING: f["old"] not in moves,
                links.WRONG: f["old"] in moves and moves[f["old"]] != f["target"]}[f["kind"]]
        page_titles = [p["pages"][path]["title"] for path in p["pages"]]
        assert page_titles.count(f["title"]) == 1 and page_titles.count(p["pages"][f["page"]]["title"]) == 1
    for d in p["decoys"]:
        assert d["old"] not in p["pages"] and d["old"] not in moves and d["old"] not in p["loops"]


# ---- the CMS server and the oracle's scripts against it -----------------------------------------------------------

def test_the_site_serves_pages_loops_and_dead_links_and_the_admin_only_to_the_desktop(site: Site,
                                                                                       tmp_path: Path) -> None:
    p = site.plan
    for f in p["findings"]:
        status, _body, location = site.get(f["old"])
        if f["symptom"] == links.DEAD:
            assert status == 404
        else:
            assert status == 301 and site.get(location)[2] == f["old"]
    page = links.parse_page(site.get(p["findings"][0]["page"])[1])
    assert page == {"title": p["pages"][p["findings"][0]["page"]]["title"],
                    "boxes": p["pages"][p["findings"][0]["page"]]["boxes"]}
    assert site.get("/admin/")[0] == 200 and "link-form" in site.get("/admin/")[1]
    other = Site(0, tmp_path / "other", desktop="somebody-else")
    try:
        assert other.get("/admin/")[0] == 403 and other.get("/static/link-admin.js")[0] == 403
        status, answer = other.post("link-edits", {"page": p["findings"][0]["page"], "old": p["findings"][0]["old"],
                                                   "new": p["findings"][0]["target"]})
        assert status == 403 and "desktop" in answer["error"]
        assert other.post("verify", {"finding": 1}, origin=False)[0] == 403
        assert links.parse_page(other.get(p["findings"][0]["page"])[1])["boxes"] == \
            p["pages"][p["findings"][0]["page"]]["boxes"]
    finally:
        other.close()


def test_the_editor_refuses_bad_edits_and_stays_usable(site: Site) -> None:
    f = site.plan["findings"][0]
    bad = [({"page": "/nowhere/", "old": f["old"], "new": f["target"]}, "no page"),
           ({"page": f["page"], "old": "/pages/p000.php", "new": f["target"]}, "no link"),
           ({"page": f["page"], "old": f["old"], "new": "javascript:alert(1)"}, "path on this site"),
           ({"page": f["page"], "old": f["old"], "new": "/" + "x" * 5000}, "path on this site"),
           ({"page": ["odd"], "old": {"x": 1}, "new": None}, "no page")]
    for body, why in bad:
        status, answer = site.post("link-edits", body)
        assert status == 422 and why in answer["error"], (body, answer)
    assert site.post("link-edits", {"page": f["page"], "old": f["old"], "new": f["target"]},
                     origin="http://evil.example")[0] == 403
    assert site.post("verify", {"finding": 1}, origin=False) == (200, {"ok": False, "finding": 1})
    assert site.post("verify", {"finding": 9}, origin=False)[0] == 403
    assert site.post("link-edits", {"page": site.origin + f["page"], "old": f["old"], "new": f["target"]})[0] == 201
    first = site.post("verify", {"finding": 1}, origin=False)[1]
    assert first["ok"] and re.fullmatch(r"[A-Z2-9]{6}", first["ticket"])
    assert site.post("verify", {"finding": 1}, origin=False)[1]["ticket"] == first["ticket"]  # issued once
    records = [json.loads(line) for line in site.records.read_text().splitlines()]
    assert sum(1 for r in records if r.get("applied")) == 1 and la.issued_tickets(records) == {1: first["ticket"]}
    assert all(r["client"] == ME for r in records)


@pytest.mark.parametrize("seed", [6])
def test_the_oracles_scripts_fix_every_finding_and_satisfy_every_clause(seed: int, tmp_path: Path) -> None:
    s = Site(seed, tmp_path)
    try:
        fixes = _oracle_fix_all(s)
        assert [(x["page"], x["old_url"], x["new_url"]) for x in fixes] == \
            [(f["page"], f["old"], f["target"]) for f in s.plan["findings"]]
        probe, truth = LiveProbe(s, _outputs(s)), s.truth()
        for clause in la.TASK.clauses:
            verdict = clause.check(probe, truth)
            assert verdict.outcome is Outcome.SATISFIED, (clause.name, verdict.evidence)
    finally:
        s.close()


# ---- every clause fails on a bad state -------------------------------------------------------------------------------

def test_each_clause_fails_when_its_part_is_wrong(tmp_path: Path) -> None:
    s = Site(3, tmp_path)
    try:
        truth = s.truth()
        clauses = {c.name: c for c in la.TASK.clauses}
        # Nothing done: every clause fails.
        for name, clause in clauses.items():
            assert clause.check(LiveProbe(s, {}), truth).outcome is Outcome.FAILED, name
        # The report and sitemap made before any fix (the shell alone): no tickets, the orphan missing.
        for n, f in enumerate(s.plan["findings"], 1):
            s.shell(la.RECORD.format(port=s.port, fix={"finding": n, "ticket": "AAAAAA", "page": f["page"],
                                                       "old_url": f["old"], "new_url": f["target"]}))
        before = len(links.reachable(s.plan["pages"], s.plan["nav"]))
        assert f"SITEMAP {before} pages" in s.shell(la.SITEMAP_SCRIPT.format(port=s.port))
        early = LiveProbe(s, _outputs(s))
        assert clauses["report_links"].check(early, truth).outcome is Outcome.SATISFIED
        assert clauses["report_tickets"].check(early, truth).outcome is Outcome.FAILED
        assert clauses["sitemap"].check(early, truth).outcome is Outcome.FAILED
        assert clauses["links_fixed"].check(early, truth).outcome is Outcome.FAILED
        _oracle_fix_all(s)
        good = _outputs(s)
        report = json.loads(good[la.REPORT])
        for name, change in [
            ("report_links", lambda r: r[0].update(new_url="/visit/")),
            ("report_links", lambda r: r[1].update(status=404)),
            ("report_links", lambda r: r.pop()),
            ("report_tickets", lambda r: r[2].update(ticket="ZZZZZZ")),
        ]:
            bad = json.loads(json.dumps(report))
            change(bad)
            verdict = clauses[name].check(LiveProbe(s, {**good, la.REPORT: json.dumps(bad)}), truth)
            assert verdict.outcome is not Outcome.SATISFIED, (name, verdict.evidence)
        garbled = LiveProbe(s, {**good, la.REPORT: b"\xff{"})
        assert clauses["report_links"].check(garbled, truth).outcome is Outcome.FAILED
        full_urls = [dict(x, old_url=s.origin + x["old_url"], new_url=s.origin + x["new_url"]) for x in report]
        assert clauses["report_links"].check(LiveProbe(s, {**good, la.REPORT: json.dumps(full_urls)}),
                                             truth).outcome is Outcome.SATISFIED
        sitemap = good[la.SITEMAP].decode().splitlines()
        for bad_map in (sitemap[:-1], [*sitemap, s.plan["findings"][0]["old"]]):
            assert clauses["sitemap"].check(LiveProbe(s, {**good, la.SITEMAP: "\n".join(bad_map)}),
                                            truth).outcome is Outcome.FAILED
        assert clauses["only_findings"].check(LiveProbe(s, good), truth).outcome is Outcome.SATISFIED
        # A decoy's dead link "fixed" too: an edit the audit did not ask for.
        decoy = s.plan["decoys"][0]
        assert s.post("link-edits", {"page": decoy["page"], "old": decoy["old"], "new": "/"})[0] == 201
        assert clauses["only_findings"].check(LiveProbe(s, good), truth).outcome is Outcome.FAILED
        # A finding's link pointed elsewhere afterwards: the live site no longer has the fix.
        f = s.plan["findings"][1]
        assert s.post("link-edits", {"page": f["page"], "old": f["target"], "new": "/about/"})[0] == 201
        verdict = clauses["links_fixed"].check(LiveProbe(s, good), truth)
        assert verdict.outcome is Outcome.PARTIAL and "finding 2" in verdict.evidence
    finally:
        s.close()


def test_the_oracle_is_denied_what_only_the_board_shows() -> None:
    assert {"findings", "decoys", "sitemap"} <= set(la.TASK.withheld)
    assert la.TASK.draft == "" or la.TASK.draft


# ---- the real board on a real X server, through the real guest agent ---------------------------------------------

@pytest.mark.xvfb
def test_the_board_shows_findings_one_at_a_time_and_tickets_only_after_a_fix(
        xvfb: XvfbDisplay, client: GuestClient, tmp_path: Path) -> None:
    s = Site(6, tmp_path)
    shutil.copy(WEB / "fixtures/linkcms/audit_board.py", tmp_path / "audit_board.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "audit_board.py")], stdin=subprocess.PIPE,
                            env={**os.environ, "DISPLAY": xvfb.display, "LANG": "C.UTF-8"})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"port": s.port, "findings": links.board_findings(s.plan),
                                 "layout": links.board_layout()}).encode())
    proc.stdin.close()
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == links.BOARD_TITLE), None),
                          20, what="the board mapped")
        at = wait_for(lambda: links.origin(client.screenshot().image, window.geometry), 20, what="the board drawn")

        def lines() -> list[str]:
            return links.read_board(client.screenshot().image, at)

        assert lines() == ["PRESS START AUDIT"]
        client.click(*links.button_centre(at, links.VERIFY_BUTTON))  # before the start: nothing happens
        client.click(*links.button_centre(at, links.START_BUTTON))
        wait_for(lambda: (links.current_finding(lines()) or {}).get("number") == 1, 20, what="finding 1")
        assert lines()[1:4] == links.board_findings(s.plan)[0]
        client.click(*links.button_centre(at, links.VERIFY_BUTTON))  # not fixed yet: no ticket, same finding
        wait_for(lambda: "NOT FIXED YET (CHECK 1)" in lines(), 20, what="the refusal")
        f = s.plan["findings"][0]
        assert s.post("link-edits", {"page": f["page"], "old": f["old"], "new": f["target"]})[0] == 201
        client.click(*links.button_centre(at, links.VERIFY_BUTTON))
        wait_for(lambda: (links.current_finding(lines()) or {}).get("number") == 2, 20, what="finding 2")
        records = [json.loads(line) for line in s.records.read_text().splitlines()]
        assert links.tickets(lines()) == la.issued_tickets(records) and len(la.issued_tickets(records)) == 1
        assert lines()[1:4] == links.board_findings(s.plan)[1]
    finally:
        proc.kill()
        proc.wait()
        s.close()
