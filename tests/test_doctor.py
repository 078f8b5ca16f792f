"""Real tests of the accelerator probe and `weavegym doctor` checks: QEMU actually runs here."""

from __future__ import annotations

import io
import json
import re
import shutil
import time
from pathlib import Path

import pytest
from rich.console import Console

from weavegym.machine.kvm_probe import (
    CACHE_FILE,
    MARKER,
    ProbeResult,
    boot_sector,
    choose_accelerator,
    machine_key,
    probe_accelerator,
)
from weavegym.ops.doctor import (
    Check,
    all_required_ok,
    check_disk,
    check_kvm_device,
    check_libvirt,
    check_tool,
    checks_to_json,
    render_checks,
    run_checks,
)

# The KVM probe boots a tiny guest under QEMU and the checks talk to libvirtd.
pytestmark = pytest.mark.vm

needs_qemu = pytest.mark.skipif(shutil.which("qemu-system-x86_64") is None, reason="QEMU not installed")
EXPECTED_CHECKS = [
    "accelerator", "qemu-system-x86_64", "qemu-img", "libvirt", "kvm device", "Xvfb", "debootstrap", "mkfs.ext4",
    "disk space",
]


def test_boot_sector_is_one_sector_with_signature() -> None:
    sector = boot_sector()
    assert len(sector) == 512
    assert sector[510:] == b"\x55\xaa"
    assert MARKER in sector
    assert sector[0] == 0xFA  # cli: the first instruction, proving code starts at offset 0


@needs_qemu
def test_tcg_probe_really_boots_and_prints_marker() -> None:
    result = probe_accelerator("tcg", timeout_s=60)
    assert result.works, result.reason
    assert result.accel == "tcg"
    assert "long mode" in result.reason
    assert result.seconds > 0


def test_bogus_qemu_path_fails_with_clear_reason(tmp_path: Path) -> None:
    result = probe_accelerator("tcg", qemu=str(tmp_path / "no-such-qemu"))
    assert not result.works
    assert "qemu not found" in result.reason
    assert "no-such-qemu" in result.reason


@needs_qemu
def test_unknown_accelerator_is_refused_with_stderr() -> None:
    result = probe_accelerator("no-such-accel", timeout_s=30)
    assert not result.works
    assert result.reason.startswith("qemu refused -accel no-such-accel")
    assert "invalid accelerator" in result.reason  # QEMU's own stderr is quoted


@needs_qemu
def test_deadline_kills_a_probe_that_does_not_finish() -> None:
    # TCG cannot boot to the marker in 10 ms, so this exercises the kill-the-group path for real.
    result = probe_accelerator("tcg", timeout_s=0.01)
    assert not result.works
    assert result.reason.startswith("hung:")
    assert "KVM" not in result.reason  # the KVM remark is only for KVM probes


@needs_qemu
def test_kvm_probe_returns_within_deadline_with_a_reason() -> None:
    timeout = 5.0
    start = time.monotonic()
    result = probe_accelerator("kvm", timeout_s=timeout)
    elapsed = time.monotonic() - start
    # deadline + the bounded SIGKILL grace (5 s) + slack for process start-up
    assert elapsed < timeout + 5.0 + 5.0, result
    assert result.accel == "kvm"
    assert result.reason
    if not result.works:  # on the CI machines KVM "hangs": a reason must say how it failed
        assert re.match(r"(hung:|/dev/kvm |qemu refused|wrong output|could not start)", result.reason)


@needs_qemu
def test_choose_accelerator_probes_once_then_reuses_the_cache(tmp_path: Path) -> None:
    first = choose_accelerator(tmp_path, kvm_timeout_s=5.0)
    assert first.accel in ("kvm", "tcg")
    assert first.works, first.reason
    assert not first.from_cache
    if first.accel == "tcg":
        assert first.fallback_from is not None and first.fallback_from.accel == "kvm"
        assert first.fallback_from.reason

    cache = json.loads((tmp_path / CACHE_FILE).read_text())
    assert cache["key"] == machine_key()
    assert set(cache["key"]) == {"qemu", "kernel", "dev_kvm"}
    assert cache["result"] == first.to_dict()
    assert "from_cache" not in json.dumps(cache)

    second = choose_accelerator(tmp_path)
    assert second.from_cache
    assert (second.accel, second.works, second.reason) == (first.accel, first.works, first.reason)
    assert second.to_dict() == first.to_dict()


@needs_qemu
def test_cache_is_trusted_until_refresh_or_key_change(tmp_path: Path) -> None:
    planted = ProbeResult("planted", True, 0.0, "written by the test")
    path = tmp_path / CACHE_FILE
    path.write_text(json.dumps({"key": machine_key(), "result": planted.to_dict()}))
    assert choose_accelerator(tmp_path).accel == "planted"

    path.write_text(json.dumps({"key": {**machine_key(), "kernel": "other"}, "result": planted.to_dict()}))
    reprobed = choose_accelerator(tmp_path, kvm_timeout_s=5.0)
    assert reprobed.accel in ("kvm", "tcg") and not reprobed.from_cache

    path.write_text(json.dumps({"key": machine_key(), "result": planted.to_dict()}))
    refreshed = choose_accelerator(tmp_path, refresh=True, kvm_timeout_s=5.0)
    assert refreshed.accel in ("kvm", "tcg") and not refreshed.from_cache
    assert json.loads(path.read_text())["result"]["accel"] == refreshed.accel


def test_disk_check_reports_gib_free(tmp_path: Path) -> None:
    check = check_disk(tmp_path / "not" / "created" / "yet")
    assert check.name == "disk space"
    match = re.search(r"([0-9.]+) GiB free at (\S+)", check.detail)
    assert match, check.detail
    assert float(match.group(1)) >= 0
    assert Path(match.group(2)).exists()  # measured on the nearest existing parent
    assert check.ok or check.fix


def test_missing_tool_fails_with_install_command() -> None:
    check = check_tool("weavegym-no-such-tool", ["--version"], "weavegym-no-such-package")
    assert not check.ok and check.required and check.status == "✗"
    assert "apt-get install -y weavegym-no-such-package" in check.fix


def test_libvirt_check_reports_daemons_whatever_the_state() -> None:
    check = check_libvirt()
    assert check.name == "libvirt"
    assert "libvirtd" in check.detail and "virtlogd" in check.detail
    assert check.ok or check.fix


@needs_qemu
@pytest.mark.timeout(90)
def test_run_checks_names_details_and_fixes(tmp_path: Path) -> None:
    checks = run_checks(tmp_path)
    assert [c.name for c in checks] == EXPECTED_CHECKS
    for check in checks:
        assert check.detail, check
        assert check.status in ("✓", "✗", "!")
        if not check.ok:
            assert check.fix, check
    accel = checks[0]
    assert accel.ok, accel.detail  # TCG at least works wherever QEMU is installed
    if accel.detail.startswith("KVM unusable"):
        assert "using TCG" in accel.detail and accel.status == "!"

    data = json.loads(checks_to_json(checks))
    assert [d["name"] for d in data] == EXPECTED_CHECKS
    assert all({"ok", "required", "detail", "fix", "status"} <= set(d) for d in data)
    assert all_required_ok(checks) == all(c.ok for c in checks if c.required)

    out = io.StringIO()
    render_checks(checks, Console(file=out, width=200))
    table = out.getvalue()
    assert all(name in table for name in EXPECTED_CHECKS)


def test_render_does_not_treat_details_as_markup() -> None:
    checks = [Check("x", False, True, "open failed: [Errno 2] [bold]no", "apt-get install -y x")]
    out = io.StringIO()
    render_checks(checks, Console(file=out, width=200))
    assert "[Errno 2] [bold]no" in out.getvalue()
    assert checks[0].status == "✗"
    assert Check("y", False, False, "d", "f").status == "!"
    assert Check("z", True, True, "d", warn=True).status == "!"


@pytest.mark.parametrize(
    ("group", "mode", "ok"),
    [("kvm", 0o660, True), ("root", 0o660, False), ("root", 0o666, True), ("kvm", 0o600, False)],
)
def test_kvm_device_check_reads_real_ownership(tmp_path: Path, group: str, mode: int, ok: bool) -> None:
    import grp
    import os

    device = tmp_path / "kvm"
    device.touch()
    os.chown(device, 0, grp.getgrnam(group).gr_gid)
    device.chmod(mode)
    check = check_kvm_device(device)
    assert check.ok is ok, check.detail
    assert check.fix == ("" if ok else f"chgrp kvm {device} && chmod 660 {device}")
    assert check_kvm_device(tmp_path / "absent").ok
