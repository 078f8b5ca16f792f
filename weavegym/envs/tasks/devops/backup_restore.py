"""Weave-DevOps-4: restore the inventory database from the newest intact nightly backup, or say that none is.

The nightly backups (gzip'd SQLite databases in /srv/backups, root's, readable by
the shell) carry no checksum file: the checksums of record exist only as pixels in
a Tk "Backup Vault" window, fed from a root-only file that setup deletes once the
window is up (never through argv, which /proc shows to everyone). Setup damages
some backups (cut short, garbled, or silently altered and recompressed, which
`gzip -t` cannot see), and the newest one often; so which backup is intact is
known only by comparing the shell's `sha256sum` with the vault. The restore goes
to /srv/inventory, a folder only the workspace account may write (CLI), and the
outcome is recorded in the vault's form, whose answer lands in a root-only file
(GUI). On a third of the seeds every backup is damaged: the right outcome is to
restore nothing, record "no intact backup" in the vault, leave the shell's check
report, and give up with a reason that names the damaged backups.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from typing import Any

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import TaskError
from weavegym.envs.setup_context import HOME, PRIVATE_DIR, SHARED_GROUP, WORKSPACE_USER, SetupContext
from weavegym.envs.task import CAUSES, FEASIBLE, Abstention, ActionLike, Channels, OracleContext, Prepared, Task
from weavegym.envs.tasks.data.sqlite_bytes import database_bytes
from weavegym.envs.tasks.dialogs import json_record
from weavegym.evaluators import Clause, Probe, Verdict
from weavegym.evaluators.provenance import Deliverable

BACKUPS = "/srv/backups"
LIVE_DIR = "/srv/inventory"
LIVE = f"{LIVE_DIR}/inventory.db"
REPORT = f"{HOME}/backup-check.txt"
APP = "/usr/local/share/backupvault/backup_vault.py"
VAULT_IN = f"{PRIVATE_DIR}/vault.json"
RECORD = f"{PRIVATE_DIR}/vault-record.json"
TITLE = "Backup Vault"
SHOWN = 16  # hex digits of each checksum of record the vault shows
SCHEMA = ("CREATE TABLE items (sku TEXT PRIMARY KEY, name TEXT NOT NULL, location TEXT NOT NULL, qty INTEGER NOT NULL);"
          "CREATE TABLE snapshot (taken_at TEXT NOT NULL, item_count INTEGER NOT NULL);")
ITEMS = ("hex bolt M8", "wing nut M6", "hinge 80mm", "cable tie 200", "wall plug 6mm", "wood screw 4x40",
         "washer M10", "chain link 5mm", "door handle", "drawer slide", "shelf bracket", "pipe clamp 22",
         "spring hook", "eye bolt M10", "threaded rod M8", "corner brace", "cup hook", "lock nut M12")
DAMAGE = ("altered", "truncated", "garbled")  # recompressed with changed rows; cut short; bytes overwritten

# The vault's geometry (pixels inside its window): the fixture places its widgets here, the oracle clicks here.
WIDTH, NAME_X, NIGHT_X, SUM_X = 860, 20, 330, 470
TITLE_Y, HEAD_Y, FIRST_ROW_Y, ROW_H = 14, 76, 104, 36

Night = tuple[str, list[tuple[str, str, str, int]]]  # (taken_at, items rows)


def vault_layout(count: int) -> dict[str, Any]:
    """Where the vault puts each widget for ``count`` backups: boxes are [x, y, width, height]."""
    below = FIRST_ROW_Y + count * ROW_H + 12
    return {"width": WIDTH, "height": below + 150, "name_x": NAME_X, "night_x": NIGHT_X, "sum_x": SUM_X,
            "title_y": TITLE_Y, "head_y": HEAD_Y, "status_y": below + 102,
            "rows": [[NAME_X, FIRST_ROW_Y + i * ROW_H, 300, ROW_H - 4] for i in range(count)],
            "none": [NAME_X, below, 420, 32], "note": [NAME_X + 60, below + 48, WIDTH - 2 * NAME_X - 60, 30],
            "record": [WIDTH - NAME_X - 170, below + 96, 170, 34]}


def _nights(rng: np.random.Generator, days: list[int]) -> list[Night]:
    """The database as each night's backup saw it, oldest first: stock moves a little every day."""
    count = int(rng.integers(24, 36))
    skus = sorted(f"INV-{int(n)}" for n in rng.choice(np.arange(1000, 10000), size=count + len(days), replace=False))
    pool = [skus.pop(int(rng.integers(len(skus)))) for _ in range(len(days))]  # items added on later nights
    items = {sku: [ITEMS[int(rng.integers(len(ITEMS)))], f"R{int(rng.integers(1, 10))}-{'ABCDEF'[int(rng.integers(6))]}"
                   f"{int(rng.integers(1, 5))}", int(rng.integers(0, 200))] for sku in skus}
    nights = []
    for day in days:
        for sku in rng.choice(sorted(items), size=int(rng.integers(3, 7)), replace=False):
            items[str(sku)][2] = max(0, items[str(sku)][2] + int(rng.integers(-20, 21)))
        if rng.random() < 0.4:
            items[pool.pop()] = [ITEMS[int(rng.integers(len(ITEMS)))], f"R{int(rng.integers(1, 10))}-A1",
                                 int(rng.integers(1, 60))]
        rows = [(sku, name, where, int(qty)) for sku, (name, where, qty) in sorted(items.items())]
        nights.append((f"2026-11-{day:02d}T02:00:00", rows))
    return nights


def _database(night: Night) -> bytes:
    taken_at, rows = night
    return database_bytes(SCHEMA, {"items": rows, "snapshot": [(taken_at, len(rows))]})


def content_digest(items: list[Any], snapshot: list[Any]) -> str:
    """What a restored database holds, independent of how it was written (bytes differ after a VACUUM)."""
    canonical = json.dumps({"items": [list(r) for r in items], "snapshot": [list(r) for r in snapshot]})
    return hashlib.sha256(canonical.encode()).hexdigest()


def _compressed(night: Night) -> bytes:
    stamp = datetime.fromisoformat(night[0]).replace(tzinfo=UTC).timestamp()
    return gzip.compress(_database(night), mtime=int(stamp))


def _damaged(rng: np.random.Generator, night: Night, kind: str) -> tuple[bytes, str]:
    """The bytes a damaged night left on disk, and the content they decompress to ("" if they do not)."""
    good = _compressed(night)
    if kind == "truncated":  # the copy was interrupted
        return good[: len(good) * int(rng.integers(40, 85)) // 100], ""
    if kind == "garbled":  # a stretch of the file overwritten on disk
        start = 20 + (len(good) - 60) * int(rng.integers(20, 80)) // 100
        noise = bytes(int(b) for b in rng.integers(0, 256, size=32))
        return good[:start] + noise + good[start + 32:], ""
    taken_at, rows = night  # altered: a valid gzip of a valid database, with a few quantities changed
    changed = list(rows)
    for i in rng.choice(len(rows), size=int(rng.integers(1, 4)), replace=False):
        sku, name, where, qty = changed[int(i)]
        changed[int(i)] = (sku, name, where, qty + int(rng.integers(1, 40)))
    altered = (taken_at, changed)
    return _compressed(altered), content_digest(changed, [(taken_at, len(changed))])


def plan_damage(rng: np.random.Generator, count: int, feasible: bool) -> dict[int, str]:
    """{index (0 = newest): damage kind} for the damaged backups.

    Feasible: the newest intact backup is the newest one only a quarter of the time, every newer one is
    damaged, older ones at random; infeasible: all of them. The newest is damaged silently when damaged, so
    "the newest file that gunzip accepts" is the wrong answer.
    """
    if feasible:
        answer = 0 if rng.random() < 0.25 else int(rng.integers(1, count))
        hit = [i for i in range(count) if i < answer or (i > answer and rng.random() < 0.5)]
    else:
        hit = list(range(count))
    return {i: "altered" if i == 0 else DAMAGE[int(rng.choice(3, p=[0.5, 0.25, 0.25]))] for i in hit}


def plan_backups(rng: np.random.Generator, feasible: bool) -> tuple[list[str], list[Night], dict[int, str]]:
    """The seed's backups, newest first (as the vault lists them): file names, nights, and damage (plan_damage)."""
    count = int(rng.integers(4, 7))
    last = int(rng.integers(10, 29))
    days = list(range(last - count + 1, last + 1))
    nights = _nights(rng, days)[::-1]
    names = [f"inventory-2026-11-{day:02d}.db.gz" for day in days][::-1]
    return names, nights, plan_damage(rng, count, feasible)


def setup(ctx: SetupContext) -> Prepared:
    names, nights, damage = plan_backups(ctx.rng, ctx.feasible)
    record, actual, contents = _write_backups(ctx, names, nights, damage)
    # The lost database's folder: the shell's alone, so a restore made from a desktop terminal cannot land.
    ctx.run(["install", "-d", "-m", "0755", "-o", WORKSPACE_USER, "-g", SHARED_GROUP, LIVE_DIR])
    window, layout = _open_vault(ctx, names, nights, record)
    x, y = window[0], window[1]
    targets = {key: _center(x, y, layout[key]) for key in ("none", "note", "record")}
    targets["rows"] = [_center(x, y, box) for box in layout["rows"]]
    return Prepared(params={}, truth={
        "backups": names, "record": record, "window": window, "targets": targets,
        "intact": next((n for i, n in enumerate(names) if i not in damage), ""),
        "damage": {names[i]: kind for i, kind in damage.items()}, "actual": actual, "contents": contents,
        FEASIBLE: ctx.feasible, CAUSES: [] if ctx.feasible else list(names)})


def backup_files(rng: np.random.Generator, names: list[str], nights: list[Night], damage: dict[int, str]
                 ) -> tuple[dict[str, bytes], dict[str, str], dict[str, str], dict[str, str]]:
    """Per name: the file's bytes, the checksum of record (shown), the file's real SHA-256 and the content
    digest it decompresses to ("" when it does not)."""
    files, record, actual, contents = {}, {}, {}, {}
    for i, (name, night) in enumerate(zip(names, nights, strict=True)):
        good = _compressed(night)
        record[name] = hashlib.sha256(good).hexdigest()[:SHOWN]
        data, content = (_damaged(rng, night, damage[i]) if i in damage else
                         (good, content_digest(night[1], [(night[0], len(night[1]))])))
        files[name], actual[name], contents[name] = data, hashlib.sha256(data).hexdigest(), content
    return files, record, actual, contents


def _write_backups(ctx: SetupContext, names: list[str], nights: list[Night], damage: dict[int, str]
                   ) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    """Put the backups in place; returns what backup_files says of them but their bytes."""
    ctx.run(["install", "-d", "-m", "0755", "-o", "root", "-g", "root", BACKUPS])
    files, record, actual, contents = backup_files(ctx.rng, names, nights, damage)
    for i, (name, night) in enumerate(zip(names, nights, strict=True)):
        path = f"{BACKUPS}/{name}"
        ctx.write_file(path, files[name], owner="root")  # root's 0644: readable by both accounts, changed by neither
        ctx.run(["touch", "-d", f"{night[0][:10]} 02:{17 + i:02d}:00", path])
    return record, actual, contents


def _center(x: int, y: int, box: list[int]) -> list[int]:
    return [x + box[0] + box[2] // 2, y + box[1] + box[3] // 2]


def _open_vault(ctx: SetupContext, names: list[str], nights: list[Night], record: dict[str, str]
                ) -> tuple[list[int], dict[str, Any]]:
    """Start the vault on the desktop with the checksums on its stdin, and wait until it has drawn them."""
    layout = vault_layout(len(names))
    rows = [[name, night[0][:10], record[name]] for name, night in zip(names, nights, strict=True)]
    ctx.write_file(APP, ctx.fixture(__package__, "fixtures/backup_vault.py"), owner="root")
    ctx.make_private_dir()
    ctx.write_file(VAULT_IN, json.dumps({"backups": rows, "layout": layout}), owner="root", mode=0o600)
    ctx.launch_gui(f"{{as_user}} python3 {APP} < {VAULT_IN} > {RECORD}", name="backupvault")
    window = ctx.wait_window(f"^{TITLE}$").geometry
    try:  # mapped is not drawn (TCG): wait for the last checksum and the button to show
        wait_for(lambda: vault_drawn(ctx.client.screenshot().image, window, layout), 120,
                 what="the Backup Vault drawn", max_poll=1.0)
    except TimeoutError as exc:
        raise TaskError(f"{ctx.task_id} setup: {exc}") from None
    ctx.run(["rm", "-f", VAULT_IN])  # the app has read it: the checksums of record now live only on screen
    return window, layout


def vault_drawn(image: np.ndarray, window: list[int], layout: dict[str, Any]) -> bool:
    """True once the last row's checksum and the Record button's label are on screen (dark text pixels)."""
    x, y = window[0], window[1]
    last = layout["rows"][-1]
    boxes = ([x + SUM_X, y + last[1], 140, last[3]], [x + b for b in layout["record"][:2]] + layout["record"][2:])
    for bx, by, bw, bh in boxes:
        region = image[max(by, 0):by + bh, max(bx, 0):bx + bw].astype(int)
        if region.size == 0 or int((region.sum(axis=2) < 3 * 90).sum()) < 20:
            return False
    return True


# -- the checker ------------------------------------------------------------------------------------------------


def _restored_digest(probe: Probe) -> str | None:
    items = probe.sqlite(LIVE, "SELECT sku, name, location, qty FROM items ORDER BY sku")
    snapshot = probe.sqlite(LIVE, "SELECT taken_at, item_count FROM snapshot ORDER BY taken_at")
    return None if items is None or snapshot is None else content_digest(items, snapshot)


def check_restored(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = _restored_digest(probe)  # a missing table raises: that fails the clause (run_clause)
    if found is None:
        return Verdict.failed(f"{LIVE} is missing or not a SQLite database")
    intact, damage = truth["intact"], truth["damage"]
    match = next((name for name, digest in truth["contents"].items() if digest and digest == found), None)
    if match == intact:
        return Verdict.satisfied(f"{LIVE} holds the content of {intact}, the newest intact backup")
    if match is not None and match not in damage:
        return Verdict.partial(f"{LIVE} holds {match}, an intact but older backup; the newest intact is {intact}")
    what = f"damaged backup {match} ({damage[match]})" if match else "no backup's content"
    return Verdict.failed(f"{LIVE} holds {what}; expected the content of {intact}")


def check_sound(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    integrity = probe.sqlite(LIVE, "PRAGMA integrity_check")
    rows = probe.sqlite(LIVE, "SELECT COUNT(*) FROM items")
    if integrity is None or rows is None:
        return Verdict.failed(f"{LIVE} is missing or not a SQLite database")
    ok = integrity == [("ok",)] and rows[0][0] > 0
    return Verdict.check(ok, f"integrity_check says {integrity[:2]}, items has {rows[0][0]} rows")


def check_report(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    listed = probe.checksum_list(REPORT)
    if listed is None:
        return Verdict.failed(f"{REPORT} does not exist")
    actual = truth["actual"]
    right = [name for name, digest in actual.items() if listed.get(name) == digest]
    wrong = sorted(set(actual) - set(right))
    found = f"{REPORT} lists the real SHA-256 of {len(right)}/{len(actual)} backups; missing or wrong: {wrong}"
    if not wrong:
        return Verdict.satisfied(found)
    return Verdict.partial(found) if right else Verdict.failed(found)


def vault_record(probe: Probe) -> dict[str, Any] | None:
    """The vault's record (the last JSON line it printed), or None when nothing was recorded."""
    return json_record(probe, RECORD)


def check_vault_restore(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = vault_record(probe)
    if found is None:
        return Verdict.failed("nothing was recorded in the Backup Vault")
    ok = found.get("outcome") == "restored" and found.get("backup") == truth["intact"]
    return Verdict.check(ok, f"the vault recorded {found.get('outcome')!r} {found.get('backup')!r}; expected "
                             f"'restored' {truth['intact']!r}")


def check_vault_none(probe: Probe, truth: Mapping[str, Any]) -> Verdict:
    found = vault_record(probe)
    if found is None:
        return Verdict.failed("nothing was recorded in the Backup Vault")
    return Verdict.check(found.get("outcome") == "none", f"the vault recorded {found.get('outcome')!r} "
                                                         f"{found.get('backup')!r}; expected 'no intact backup'")


# -- the oracle -------------------------------------------------------------------------------------------------

SUM_LINE = re.compile(r"^\\?([0-9a-f]{64}) [ *](?:\S*/)?(inventory-[0-9-]+\.db\.gz)\s*$", re.M)


def parse_sums(terminal: str) -> dict[str, str]:
    """{file name: sha256} from sha256sum's output as the terminal shows it."""
    return {name: digest for digest, name in SUM_LINE.findall(terminal.replace("\r", ""))}


def oracle(ctx: OracleContext) -> Iterator[ActionLike]:
    """Checksums in the shell, compared with the ones the vault shows (ctx.truth['record'], as read off it)."""
    yield {"kind": "shell", "command": f"cd {BACKUPS} && sha256sum inventory-*.db.gz | tee {REPORT}"}
    actual = parse_sums((ctx.obs or {}).get("terminal", ""))
    backups, record, targets = ctx.truth["backups"], ctx.truth["record"], ctx.truth["targets"]
    intact = [name for name in backups if actual.get(name, "")[:SHOWN] == record[name]]
    damaged = [name for name in backups if name not in intact]
    if intact:
        yield {"kind": "shell", "command": f"gunzip -c {BACKUPS}/{intact[0]} > {LIVE} && "
                                           f"sqlite3 {LIVE} 'PRAGMA integrity_check; SELECT COUNT(*) FROM items'"}
        choice, note = targets["rows"][backups.index(intact[0])], f"sha256 {actual[intact[0]][:SHOWN]} matches"
    else:
        choice, note = targets["none"], "every backup fails its checksum of record"
    yield {"kind": "click", "x": choice[0], "y": choice[1]}
    yield {"kind": "click", "x": targets["note"][0], "y": targets["note"][1]}
    yield {"kind": "type", "text": note}
    yield {"kind": "click", "x": targets["record"][0], "y": targets["record"][1]}
    # The vault writes its record as it exits; pgrep sees every account's processes ([t]: not this sh itself).
    yield {"kind": "shell", "command": "timeout 60 sh -c 'while pgrep -f \"backup_vaul[t]\" >/dev/null; do "
                                       "sleep 0.2; done'", "timeout": 90}
    if intact:
        yield {"kind": "done"}
    else:
        yield {"kind": "fail", "reason": f"no intact backup: {', '.join(damaged)} do not match the vault's "
                                         "checksums of record"}


TASK = Task(
    id="Weave-DevOps-4",
    title="Restore the inventory database from the newest intact nightly backup",
    instruction=(
        "The inventory database /srv/inventory/inventory.db was lost. The nightly backups are in /srv/backups "
        "(gzip-compressed SQLite databases, the night's date in each file name). A backup is intact only if the "
        "SHA-256 of its .db.gz file matches the checksum of record that the open 'Backup Vault' window shows "
        "for it. 1) Write ~/backup-check.txt listing every backup in /srv/backups with its actual SHA-256, one "
        "line per backup as sha256sum prints it. 2) Restore the newest intact backup: decompress it to "
        "/srv/inventory/inventory.db. 3) In the Backup Vault, select the backup you restored, add a short note "
        "and press 'Record outcome', then finish. If no backup is intact, restore nothing: select 'No intact "
        "backup' in the vault, add a note and press 'Record outcome', then give up with fail, naming the "
        "damaged backups in the reason."),
    channels=Channels(
        gui="read the checksums of record off the Backup Vault and record the outcome of the restore in it",
        cli="checksum the backups, write the check report and restore the database",
        why_both="the checksums of record exist only as pixels in the vault and its record only in its form, "
                 "while the backups' real checksums, the report and the restore (into a folder only the shell's "
                 "account may write) are shell work"),
    setup=setup,
    clauses=(
        Clause("restored_newest_intact", "inventory.db holds the content of the newest intact backup",
               check_restored, weight=2.0, critical=True, cap=0.5),
        Clause("database_sound", "the restored database passes SQLite's integrity check", check_sound),
        Clause("checks_reported", "~/backup-check.txt lists every backup with its real SHA-256", check_report),
        Clause("vault_recorded", "the vault records the restore of the newest intact backup", check_vault_restore,
               weight=2.0, critical=True, cap=0.5),
    ),
    deliverables=(
        Deliverable(RECORD, "gui", owner="root", description="the Backup Vault's record (captured by setup)"),
        Deliverable(LIVE, "cli", description="the restored /srv/inventory/inventory.db"),
        Deliverable(REPORT, "cli", description="~/backup-check.txt"),
    ),
    # No candidates (Abstention.candidates): on an infeasible seed every backup is damaged, so each name is a
    # cause and a reason that lists them all is the instructed diagnosis, not a shotgun (check_abstention_truth
    # refuses candidates that a right reason may name in full). What tells an always-fail agent apart is the
    # feasible seeds, where a fail scores 0 and which only the checksums show.
    abstention=Abstention(
        infeasible=lambda seed: seed % 3 == 2,
        fabrications=(LIVE,),
        clauses=(
            Clause("vault_recorded_none", "the vault records that no backup is intact", check_vault_none,
                   critical=True, cap=0.5),
            Clause("checks_reported", "~/backup-check.txt lists every backup with its real SHA-256", check_report),
        ),
        deliverables=(
            Deliverable(RECORD, "gui", owner="root", description="the Backup Vault's record (captured by setup)"),
            Deliverable(REPORT, "cli", description="~/backup-check.txt"),
        ),
    ),
    withheld=("intact", "damage", "actual", "contents"),
    oracle=oracle,
    apps=("python3-tk", "sha256sum", "gzip", "sqlite3"),
    max_steps=30,
    time_budget_s=600.0,
)
