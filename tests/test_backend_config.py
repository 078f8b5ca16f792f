"""Backend pieces that need no VM: the domain definition and the transport checks."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from weavegym.core.errors import HostSetupError
from weavegym.machine.backends.domain_xml import DomainSpec, domain_xml
from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM


def _spec(**overrides: object) -> DomainSpec:
    base = dict(name="weavegym-1-abc", domain_type="qemu", memory_mib=2048, vcpus=2, kernel="/k", initrd="/i",
                disk="/d.qcow2", console_log="/c.log", vnc_port=5911, vnc_password="pw123456",
                agent_host_port=17611, agent_guest_port=760, token_file="/run/x/agent-token", screen=(1280, 720),
                owner_pid=42, run_as_root=True)
    base.update(overrides)
    return DomainSpec(**base)  # type: ignore[arg-type]


def test_tcp_domain_forwards_only_the_agent_port_on_loopback() -> None:
    root = ET.fromstring(domain_xml(_spec()))
    args = [a.get("value") for a in root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg")]
    netdev = args[args.index("-netdev") + 1]
    assert netdev == "user,id=wgnet,restrict=on,hostfwd=tcp:127.0.0.1:17611-:760"
    graphics = root.find("devices/graphics")
    assert graphics is not None and graphics.get("port") == "5911" and graphics.get("autoport") == "no"
    assert graphics.find("listen").get("address") == "127.0.0.1"
    oem = [e.text for e in root.iter("entry") if e.text]
    assert oem == ["weavegym-screen=1280x720"]  # the screen only (the token travels by fw_cfg)
    # The token goes as a fw_cfg file: QEMU's command line names the file, never the token.
    fw_cfg = [(e.get("name"), e.get("file")) for e in root.iterfind("sysinfo[@type='fwcfg']/entry")]
    assert fw_cfg == [("opt/weavegym/token", "/run/x/agent-token")]
    assert root.find("devices/vsock") is None
    # An overloaded TCG host must not panic the guest in the kernel's early timer check.
    assert "no_timer_check" in root.find("os/cmdline").text.split()


def test_the_agent_identity_goes_by_fw_cfg_file_too() -> None:
    root = ET.fromstring(domain_xml(_spec(identity_file="/run/x/agent-identity")))
    fw_cfg = [(e.get("name"), e.get("file")) for e in root.iterfind("sysinfo[@type='fwcfg']/entry")]
    assert fw_cfg == [("opt/weavegym/token", "/run/x/agent-token"), ("opt/weavegym/identity", "/run/x/agent-identity")]
    assert "BEGIN" not in domain_xml(_spec(identity_file="/run/x/agent-identity"))


def test_vsock_domain_has_no_nic_and_a_vsock_device() -> None:
    root = ET.fromstring(domain_xml(_spec(vsock=True)))
    assert root.find("devices/vsock").get("model") == "virtio"
    assert not list(root.iter("{http://libvirt.org/schemas/domain/qemu/1.0}arg"))


def test_vsock_transport_is_refused_clearly_without_vhost_vsock(tmp_path: Path) -> None:
    if Path("/dev/vhost-vsock").exists():
        pytest.skip("this host has vhost-vsock")
    with pytest.raises(HostSetupError, match="vhost-vsock"):
        LibvirtVM(LibvirtConfig(transport="vsock", cache_dir=tmp_path)).start()
    assert not (tmp_path / "run").exists()


@pytest.mark.unit
def test_the_boot_and_reset_deadlines_come_from_the_environment_and_bad_values_are_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WEAVEGYM_BOOT_TIMEOUT_S", raising=False)
    assert LibvirtConfig().boot_timeout_s == 300.0
    monkeypatch.setenv("WEAVEGYM_BOOT_TIMEOUT_S", "1200")
    assert LibvirtConfig().boot_timeout_s == 1200.0
    assert LibvirtConfig(boot_timeout_s=42.0).boot_timeout_s == 42.0  # an explicit config still wins
    monkeypatch.setenv("WEAVEGYM_RESET_TIMEOUT_S", "240")
    assert LibvirtConfig().reset_timeout_s == 240.0
    for name in ("WEAVEGYM_BOOT_TIMEOUT_S", "WEAVEGYM_RESET_TIMEOUT_S"):
        for bad in ("ten minutes", "0", "-5", "inf", "nan"):
            monkeypatch.setenv(name, bad)
            with pytest.raises(HostSetupError, match=name):
                LibvirtConfig()
        monkeypatch.delenv(name)
