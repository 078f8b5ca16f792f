"""Weave-Web-5 (shop localisation) without a VM: seeds, the catalog's rules, the oracle's lookup run by the real
python3 on the seed's database, the portal's revision numbers, the clauses on fake records (unit), and the Review
Board and the CMS page on a real Xvfb, read back and typed into (CJK, Arabic, Hebrew, accents) through the real
agent (xvfb; the page in chromium, the browser the host tests have, where the VM runs Firefox)."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.trajectory import EpisodeEnd
from weavegym.envs.setup_context import DESKTOP_USER
from weavegym.envs.tasks import pixel_font
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.web import _shop as shop
from weavegym.envs.tasks.web import shop_localise as sl
from weavegym.envs.tasks.web._portal import RECORDS
from weavegym.evaluators.scoring import Outcome
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.xvfb import XvfbDisplay

WEB = Path(sl.__file__).parent
ORIGIN = "http://127.0.0.1:8123"


def _plan(seed: int) -> dict[str, Any]:
    return shop.plan(np.random.default_rng(seed))


def _truth(seed: int) -> dict[str, Any]:
    p = _plan(seed)
    return {"fixes": p["fixes"], "pages": p["pages"], "origin": ORIGIN}


# ---- seeds and the catalog's rules ------------------------------------------------------------------------------

def test_seeds_vary_the_shop_and_the_marks() -> None:
    plans = [_plan(seed) for seed in range(9)]
    assert len({json.dumps(p["fixes"], sort_keys=True) for p in plans}) == 9
    assert len({tuple(p["markets"]) for p in plans}) >= 6
    assert _plan(4) == _plan(4)


@pytest.mark.parametrize("seed", range(12))
def test_every_page_fits_the_board_and_every_script_is_typed(seed: int) -> None:
    p = _plan(seed)
    assert {shop.MARKETS[m][2] for m in p["markets"]} == {shop.CJK, shop.EUROPE, shop.RTL}
    for page in shop.board_pages(p):
        lines = page["lines"]
        assert len(lines) <= shop.MAX_LINES and all(len(line) <= shop.LINE_CHARS for line in lines)
        assert all(not pixel_font.unsupported(line) for line in lines)
        marked = shop.flagged(lines)
        assert 1 <= len(marked) <= 2
        assert sorted(f"{code}/{page['market']}" for code in marked) == \
            sorted(k for k in p["fixes"] if k.endswith("/" + page["market"]))
    titles = "".join(f["title"] for f in p["fixes"].values())
    assert any(ord(c) >= 0x3000 for c in titles) and any(0x590 <= ord(c) < 0x700 for c in titles)
    assert shop.rounding_is_safe(p)  # (setup would redraw a plan with a price on a step boundary)


@pytest.mark.parametrize("seed", range(12))
def test_the_newest_approved_title_and_rate_are_not_the_obvious_picks(seed: int) -> None:
    p = _plan(seed)
    for key, fix in p["fixes"].items():
        code, market = key.split("/")
        locale = shop.MARKETS[market][0]
        rows = [t for t in p["titles"] if t[0] == code and t[1] == locale]
        approved = sorted((t for t in rows if t[3] == "approved"), key=lambda t: t[4])
        assert approved[-1][2] == fix["title"] and len(approved) == 2  # one superseded title, older
        assert all(t[4] > approved[-1][4] for t in rows if t[3] == "draft")  # drafts are newer still
    for currency, rate in p["newest_rates"].items():
        values = [r[1] for r in p["rates"] if r[0] == currency]
        assert currency == "EUR" or max(values, key=float) != rate


def _home(seed: int, tmp_path: Path) -> Path:
    home = tmp_path / f"home-{seed}"
    (home / "outbox").mkdir(parents=True)
    (home / "catalog.db").write_bytes(database_bytes(shop.SCHEMA, shop.database_rows(_plan(seed))))
    return home


def _run(home: Path, argv: list[str], stdin: str = "") -> str:
    env = {"HOME": str(home), "PATH": os.environ["PATH"], "LC_ALL": "C.UTF-8"}
    return subprocess.run(argv, input=stdin, check=True, capture_output=True, text=True, encoding="utf-8",
                          env=env).stdout


@pytest.mark.parametrize("seed", [0, 3, 6, 7])
def test_the_oracles_lookup_finds_every_fix(seed: int, tmp_path: Path) -> None:
    p, home = _plan(seed), _home(seed, tmp_path)
    found = {}
    for page in shop.board_pages(p):
        market = page["lines"][0].split()[1]
        out = _run(home, ["bash", "-c", sl.LOOKUP.format(market=market, codes=shop.flagged(page["lines"]))])
        for line in out.splitlines():
            m = sl.FIX.match(line)
            assert m, line
            found[f"{m.group(1)}/{m.group(2)}"] = {"product": m.group(1), "market": m.group(2), "title": m.group(3),
                                                   "price": m.group(4)}
    assert found == p["fixes"]
    with sqlite3.connect(home / "catalog.db") as db:  # the schema the instruction names
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert tables == {"products", "markets", "rates", "titles"}


def test_prices_round_up_to_the_step_then_take_the_ending_off() -> None:
    assert str(shop.local_price("12.40", "162.35", "10", "0")) == "2020"
    assert f"{shop.local_price('19.99', '1', '1', '0.05'):.2f}" == "19.95"
    assert f"{shop.local_price('20.00', '1', '1', '0.05'):.2f}" == "19.95"
    assert f"{shop.local_price('20.01', '1', '0.5', '0.01'):.2f}" == "20.49"


# ---- the clauses on fake final states -----------------------------------------------------------------------------

class _Probe:
    def __init__(self, records: list[dict[str, Any]], manifest: bytes | None) -> None:
        self.records, self.manifest, self.episode = records, manifest, EpisodeEnd(kind="done", answer="")

    def read_text(self, path: str, *_: Any, **__: Any) -> str | None:
        return "\n".join(json.dumps(r) for r in self.records) if path == RECORDS else None

    def read_bytes(self, path: str, max_bytes: int = 0) -> bytes | None:
        return self.manifest if path == sl.MANIFEST else None


def _record(fix: Mapping[str, str], revision: int, client: str = DESKTOP_USER, **data: str) -> dict[str, Any]:
    return {"form": sl.FORM, "data": {k: fix[k] for k in ("product", "market", "title", "price")} | data,
            "client": client, "origin": ORIGIN, "revision": revision}


def _oracle_state(seed: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    fixes = list(_plan(seed)["fixes"].values())
    records = [_record(f, 4000 + 7 * i) for i, f in enumerate(fixes)]
    items = [{**f, "revision": 4000 + 7 * i} for i, f in enumerate(fixes)]
    return records, items


def _outcomes(records: list[dict[str, Any]], items: Any, truth: Mapping[str, Any],
              raw: bytes | None = None) -> dict[str, Outcome]:
    manifest = raw if raw is not None else json.dumps(items, ensure_ascii=False).encode()
    probe = _Probe(records, manifest)
    return {c.name: c.check(probe, truth).outcome for c in sl.TASK.clauses}  # type: ignore[arg-type]


@pytest.mark.parametrize("seed", [0, 3, 6])
def test_the_oracles_saves_and_manifest_satisfy_every_clause(seed: int) -> None:
    records, items = _oracle_state(seed)
    assert _outcomes(records, items, _truth(seed)) == {c.name: Outcome.SATISFIED for c in sl.TASK.clauses}


def test_saves_from_the_shell_or_another_page_do_not_count() -> None:
    truth = _truth(0)
    records, items = _oracle_state(0)
    shell = [dict(r, client="workspace") for r in records]
    elsewhere = [dict(r, origin="http://127.0.0.1:9999") for r in records]
    refused = [dict(r, refused="origin none is not …") for r in records]
    for forged in (shell, elsewhere, refused, []):
        outcomes = _outcomes(forged, items, truth)
        assert outcomes["cms_saves"] is outcomes["manifest_revisions"] is Outcome.FAILED


def test_a_wrong_title_price_stray_save_or_revision_fails_its_clause() -> None:
    truth = _truth(3)
    records, items = _oracle_state(3)
    first = records[0]["data"]
    bare = [dict(records[0], data=dict(first, title=first["title"] + " " + shop.OLD_WORD["de"])), *records[1:]]
    assert _outcomes(bare, items, truth)["cms_saves"] is Outcome.PARTIAL
    cheap = [*records, _record(first, 9000, price="1.00")]  # saved again later, wrongly: the last save counts
    assert _outcomes(cheap, items, truth)["cms_saves"] is Outcome.PARTIAL
    again = [*records, _record(first, 9000)]  # saved again rightly: the manifest must carry the new revision
    assert _outcomes(again, items, truth)["manifest_revisions"] is Outcome.FAILED
    stray = {"product": "P-0001", "market": "JP", "title": "x", "price": "1"}
    assert _outcomes([*records, _record(stray, 9001)], items, truth)["cms_only_marked"] is Outcome.FAILED
    assert _outcomes(records, items[1:], truth)["manifest_items"] is Outcome.PARTIAL
    assert _outcomes(records, [*items, {**stray, "revision": 1}], truth)["manifest_items"] is Outcome.PARTIAL
    off = [dict(items[0], revision=items[0]["revision"] + 1), *items[1:]]
    assert _outcomes(records, off, truth)["manifest_revisions"] is Outcome.FAILED


def test_a_manifest_in_another_encoding_or_shape_fails() -> None:
    truth = _truth(6)
    records, items = _oracle_state(6)
    text = json.dumps(items, ensure_ascii=False)
    for raw in (text.encode("utf-16"), b"{}", b"not json", json.dumps(items + items[:1]).encode()):
        outcomes = _outcomes(records, items, truth, raw)
        assert outcomes["manifest_items"] is outcomes["manifest_revisions"] is Outcome.FAILED
    escaped = json.dumps(items).encode()  # \\u escapes are still the same JSON strings
    assert _outcomes(records, items, truth, escaped)["manifest_items"] is Outcome.SATISFIED


def test_the_oracle_is_denied_what_only_the_board_shows() -> None:
    truth = {**_truth(0), "board_at": [0, 0], "browser": [490, 0, 790, 720], "tabs": 4}
    assert set(sl.TASK.oracle_truth(truth)) == {"origin", "board_at", "browser", "tabs"}


# ---- the oracle's saves under a slow CMS --------------------------------------------------------------------------

BROWSER = (490, 0, 790, 720)
ITEM = {"product": "P-1234", "market": "JP", "title": "x", "price": "9.95"}


def _screen(receipt: str) -> np.ndarray:
    """The browser with the CMS receipt: the paper box, and ``receipt`` drawn on it in the page's dot-matrix ink."""
    image = np.zeros((720, 1280, 3), dtype=np.uint8)
    left, top = BROWSER[0] + 40, 300
    image[top:top + 60, left:left + 500] = sl.PAPER
    x, y = left + sl.RECEIPT_TEXT[0], top + sl.RECEIPT_TEXT[1]
    for x0, y0, x1, y1 in pixel_font.layout_text(receipt, x, y, sl.RECEIPT_SCALE):
        image[y0:y1, x0:x1] = pixel_font.INK
    return image


def _drive_save(answers: Mapping[int, list[int]], last: int = 4000) -> tuple[int, int]:
    """Run the oracle's ``_save`` against a CMS whose answers to the k-th submission land on the receipt after the
    given numbers of the oracle's waits (each answer's revision is 4272 + 46 k): (its result, submissions sent)."""
    ctx = sl.OracleContext(params={}, truth={"browser": list(BROWSER)}, screen=(1280, 720),
                           obs={"screen": _screen("NO SAVE YET")})
    drawn: list[tuple[int, str]] = []  # (after how many waits in all, receipt)
    waits = submissions = 0
    plan = sl._save(ctx, ITEM, last)
    action = next(plan)
    while True:
        if action["kind"] == "type":
            drawn += [(waits + delay, f"REVISION {4272 + 46 * submissions} P-1234 JP")
                      for delay in answers.get(submissions, [])]
            submissions += 1
        elif action["kind"] == "wait":
            waits += 1
        shown = [text for at, text in sorted(drawn) if at <= waits]
        ctx.obs = {"screen": _screen(shown[-1] if shown else "NO SAVE YET")}
        try:
            action = plan.send(ctx.obs)
        except StopIteration as stop:
            return stop.value, submissions


def test_a_prompt_save_is_taken_at_once() -> None:
    assert _drive_save({0: [1]}) == (4272, 1)


def test_a_retried_save_whose_first_answer_was_only_slow_files_the_later_revision() -> None:
    """Both submissions land (the first after the oracle gave up on it): the item's revision is the second's, as
    the CMS's last save of it. The oracle once filed the first one it saw."""
    late = sl.SAVE_WAITS + 2
    assert _drive_save({0: [late], 1: [6]}) == (4272 + 46, 2)


def test_a_retry_that_never_landed_keeps_the_answer_that_did_and_sends_no_third() -> None:
    assert _drive_save({0: [sl.SAVE_WAITS + 2]}) == (4272, 2)


def test_a_save_that_never_answers_gives_up_after_every_try() -> None:
    assert _drive_save({}) == (0, sl.SAVE_TRIES)


def test_an_older_revision_on_the_receipt_is_not_taken_for_this_save() -> None:
    assert _drive_save({0: [1]}, last=4272) == (0, sl.SAVE_TRIES)


# ---- the portal's revision numbers --------------------------------------------------------------------------------

def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture()
def cms(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """The CMS as setup serves it: the page in a site dir, the scripts in a static dir, --revisions."""
    site, static = tmp_path / "site", tmp_path / "static"
    site.mkdir()
    static.mkdir()
    (site / "index.html").write_text((WEB / "fixtures/shopcms/index.html").read_text(encoding="utf-8"),
                                     encoding="utf-8")
    css = (WEB / "fixtures/portal.css").read_text()
    (site / "style.css").write_text(css.replace("{{BANNER}}", "#" + bytes(sl.BANNER).hex()))
    shutil.copy(WEB / "fixtures/portal-form.js", static / "portal-form.js")
    (static / "shop-cms.js").write_text(sl.cms_script((WEB / "fixtures/shopcms/shop-cms.js").read_text()))
    port, records = _free_port(), tmp_path / "records.jsonl"
    proc = subprocess.Popen([sys.executable, "-I", str(WEB / "fixtures/portal_server.py"), "--port", str(port),
                             "--log", str(tmp_path / "log"), "--site", str(site), "--static", str(static),
                             "--records", str(records), "--form", sl.FORM, "--revisions"])
    try:
        wait_for(lambda: _get(f"http://127.0.0.1:{port}/"), 20, what="the CMS answering")
        yield port, records
    finally:
        proc.kill()
        proc.wait()


def _get(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except OSError:
        return False


def _post(port: int, body: Mapping[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/{sl.FORM}", json.dumps(body).encode(),
                                     {"Content-Type": "application/json", "Origin": f"http://127.0.0.1:{port}"})
    with urllib.request.urlopen(request, timeout=5) as reply:
        return json.loads(reply.read())


def test_revisions_grow_by_random_steps_and_are_recorded(cms: tuple[int, Path]) -> None:
    port, records = cms
    answers = [_post(port, {"product": "P-1000", "n": n}) for n in range(6)]
    revisions = [a["revision"] for a in answers]
    assert revisions == sorted(set(revisions)) and revisions[0] > 1000
    assert [a["id"] for a in answers] == list(range(1, 7))
    assert len({b - a for a, b in itertools.pairwise(revisions)}) > 1  # not a count anyone could work out
    recorded = [json.loads(line) for line in records.read_text().splitlines()]
    assert [r["revision"] for r in recorded] == revisions


def test_the_page_script_gets_the_dot_matrix_table() -> None:
    script = sl.cms_script((WEB / "fixtures/shopcms/shop-cms.js").read_text())
    assert "__" not in script.split("\n", 5)[-1]
    table = json.loads(script.split("const GLYPHS = ", 1)[1].split(";\n", 1)[0])
    assert table["7"] == list(pixel_font.GLYPHS["7"]) and set("REVISON0123456789P- ") <= set(table)


# ---- the real windows on a real X server, through the real guest agent ---------------------------------------------

@pytest.mark.xvfb
def test_the_board_shows_each_market_only_after_its_click(xvfb: XvfbDisplay, client: GuestClient,
                                                        tmp_path: Path) -> None:
    p = _plan(3)
    shutil.copy(WEB / "fixtures/review_board.py", tmp_path / "review_board.py")
    shutil.copy(Path(pixel_font.__file__), tmp_path / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(tmp_path / "review_board.py")], stdin=subprocess.PIPE,
                            env={**os.environ, "DISPLAY": xvfb.display, "LANG": "C.UTF-8"})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps({"pages": shop.board_pages(p), "layout": shop.board_layout()}).encode())
    proc.stdin.close()
    try:
        window = wait_for(lambda: next((w for w in client.list_windows()[0] if w.title == shop.BOARD_TITLE), None),
                          20, what="the board mapped")
        at = wait_for(lambda: shop.origin(client.screenshot().image, window.geometry), 20, what="the board drawn")
        assert shop.read_page(client.screenshot().image, at) == []
        for index in (2, 0, 3, 1):
            client.click(*shop.tab_centre(at, index))
            want = shop.board_pages(p)[index]["lines"]
            wait_for(lambda w=want: shop.read_page(client.screenshot().image, at) == w, 20,
                     what=f"page {index} read back exactly")
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.xvfb
def test_titles_typed_into_the_cms_are_saved_exactly_and_the_revision_reads_back(
        xvfb: XvfbDisplay, client: GuestClient, cms: tuple[int, Path], tmp_path: Path) -> None:
    browser = shutil.which("chromium")
    assert browser, "chromium is one of the Makefile's APT_PACKAGES"
    port, records = cms
    geometry = [0, 0, 790, 700]
    proc = subprocess.Popen([browser, "--no-sandbox", "--no-first-run", "--disable-gpu", "--password-store=basic",
                             f"--user-data-dir={tmp_path / 'profile'}", "--window-position=0,0",
                             f"--window-size={geometry[2]},{geometry[3]}", "--force-device-scale-factor=1",
                             f"--app=http://127.0.0.1:{port}/"],
                            env={**os.environ, "DISPLAY": xvfb.display}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    items = [{"product": "P-2436", "market": "CN", "title": "笔记本套装", "price": "62.99"},
             {"product": "P-1294", "market": "SA", "title": "علبة لاتيه ماتشا", "price": "49.95"},
             {"product": "P-2811", "market": "IL", "title": "ספל תרמי", "price": "97.90"},
             {"product": "P-7608", "market": "PL", "title": "Dębowa deska do krojenia", "price": "88.99"},
             {"product": "P-5944", "market": "KR", "title": "울 목도리", "price": "58400.00"}]
    try:
        wait_for(lambda: sl.read_receipt(client.screenshot().image, geometry) == "NO SAVE YET", 60,
                 what="the CMS page's receipt")
        last = 0
        for n, item in enumerate(items, 1):
            client.click(*wait_for(lambda: sl.banner_point(client.screenshot().image, geometry), 20, what="banner"))
            client.key("Tab")
            client.type_text(f"{item['product']}\t{item['market']}\t{item['title']}\t{item['price']}\n")
            try:
                text = wait_for(lambda i=item: (lambda t: t if t.endswith(f"{i['product']} {i['market']}") else None)(
                    sl.read_receipt(client.screenshot().image, geometry)), 20, what="the receipt of the save")
            except TimeoutError:
                from PIL import Image
                Image.fromarray(client.screenshot().image).save("/tmp/web5ff/cms-fail.png")
                raise
            found = sl.RECEIPT.match(text)
            assert found, text
            saved = [json.loads(line) for line in records.read_text().splitlines()]
            assert len(saved) == n and saved[-1]["data"] == item
            assert int(found.group(1)) == saved[-1]["revision"] > last
            last = saved[-1]["revision"]
    finally:
        proc.kill()
        proc.wait()
