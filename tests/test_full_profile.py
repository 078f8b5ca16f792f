"""Smoke test of the `full` image (XFCE): run by `make test-full`, not by `make test` (CI time)."""

from __future__ import annotations

import re

import pytest

from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM

pytestmark = pytest.mark.full_image


def test_full_profile_boots_to_a_drawn_xfce_desktop_and_resets() -> None:
    with LibvirtVM(LibvirtConfig(accel="tcg", profile="full")) as vm:
        assert vm.client is not None
        windows, wm = vm.client.list_windows()
        assert wm == "Xfwm4"
        assert {"Xfce4-panel", "Xfdesktop"} <= {w.wm_class for w in windows}
        frame = vm.client.screenshot(hide_cursor=True).image
        assert frame.shape == (720, 1280, 3)
        assert frame.std() > 10, "the ready snapshot caught an undrawn (uniform) desktop"
        # XFCE's settings daemon applies its keyboards channel on start: the image's default keeps autorepeat
        # off (a stalled guest must not turn a press into a run of characters).
        assert re.search(r"auto repeat:\s+off", vm.client.exec("xset q", user="user").stdout)
        for app in ("dia", "tshark", "wireshark", "audacity", "sox"):  # the task suite v2's newest apps
            assert vm.client.exec(f"command -v {app}").stdout.strip(), app
        vm.client.exec("echo x > /home/user/full.txt", user="user")
        vm.reset()
        assert not vm.client.stat("/home/user/full.txt").exists
        assert vm.client.screenshot(hide_cursor=True).image.std() > 10
