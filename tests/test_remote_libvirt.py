"""Remote libvirt (qemu+ssh://) for real: a private sshd on this host plays the far VM host.

Everything that would cross the network does here too: libvirt's own ssh
transport, the image copy over SFTP into a separate "remote" cache, qemu-img
over ssh, and the agent and VNC ports forwarded back through the SSH link.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import paramiko
import pytest
from vncdotool import api as vnc_api

from weavegym.core.deadline import wait_for
from weavegym.core.errors import HostSetupError
from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM
from weavegym.machine.backends.qemu_host import STALE_RESERVATION_S, SshQemuHost, ssh_target_of
from weavegym.vm_images.builder import BuiltImage

pytestmark = pytest.mark.vm

SSHD = Path("/usr/sbin/sshd")  # from openssh-server, which `make setup` installs


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    """An sshd of our own on 127.0.0.1 (no system config touched) that accepts one key for root."""
    work = tmp_path_factory.mktemp("sshd")
    key, host_key = work / "id_rsa", work / "host_rsa"
    client_key = paramiko.RSAKey.generate(2048)
    client_key.write_private_key_file(str(key))
    paramiko.RSAKey.generate(2048).write_private_key_file(str(host_key))
    os.chmod(key, 0o600)
    os.chmod(host_key, 0o600)
    (work / "authorized_keys").write_text(f"ssh-rsa {client_key.get_base64()} weavegym-test\n")
    port = _free_port()
    (work / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {host_key}\nAuthorizedKeysFile {work}/authorized_keys\n"
        f"PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
        f"UsePAM no\nStrictModes no\nPidFile {work}/sshd.pid\nSubsystem sftp /usr/lib/openssh/sftp-server\n")
    Path("/run/sshd").mkdir(exist_ok=True)  # privilege separation directory
    proc = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(work / "sshd_config")],
                            stdout=subprocess.DEVNULL, stderr=open(work / "sshd.log", "w"))  # noqa: SIM115
    try:
        wait_for(lambda: _port_open(port), 15, what="the test sshd")
        yield port, key, work
    finally:
        proc.terminate()
        proc.wait(10)


def _uri(port: int, key: Path) -> str:
    return f"qemu+ssh://root@127.0.0.1:{port}/system?keyfile={key}&no_verify=1&no_tty=1"


@pytest.mark.timeout(1200)  # the 1.7 GB image copy over SFTP plus a cold boot
def test_a_vm_on_a_remote_libvirt_host_over_ssh(sshd, tmp_path) -> None:
    port, key, _work = sshd
    remote_cache = tmp_path / "far-cache"
    vm = LibvirtVM(LibvirtConfig(uri=_uri(port, key), accel="tcg", remote_cache_dir=str(remote_cache)))
    try:
        vm.start()
        # The image was copied into the far cache, and the VM runs from there.
        copied = list((remote_cache / "images").glob("*/manifest.json"))
        assert len(copied) == 1 and (copied[0].parent / "disk.qcow2").stat().st_size > 500 << 20
        assert str(remote_cache) in vm.domain.XMLDesc()
        # Agent and VNC come through local forwards, not QEMU's own ports.
        assert vm.client is not None and vm.client.exec("echo far", timeout=20).stdout.strip() == "far"
        assert vm.agent_target != f"127.0.0.1:{vm._spec.agent_host_port}"
        frame = vm.grab_frame()
        assert frame.shape == (720, 1280, 3) and frame.std() > 0
        assert vm.vnc.port != vm._spec.vnc_port
        client = vnc_api.connect(f"127.0.0.1::{vm.vnc.port}", password=vm.vnc.password, timeout=60)
        try:
            capture = tmp_path / "vnc.png"
            client.captureScreen(str(capture))
        finally:
            client.disconnect()
        from PIL import Image

        assert Image.open(capture).size == (1280, 720)
        # Snapshots live in the far overlay; a reset loads one through the remote daemon.
        vm.client.exec("touch /tmp/after-ready", timeout=20)
        assert vm.reset("ready") < 60
        assert vm.client.exec("test -e /tmp/after-ready", timeout=20).exit_code == 1
        run_dir = remote_cache / "run" / vm.name
        assert (run_dir / "overlay.qcow2").exists()
    finally:
        vm.close()
    assert not run_dir.exists()  # teardown removed the far run dir over ssh


def test_an_unreachable_remote_host_is_a_clear_error(tmp_path) -> None:
    key = tmp_path / "id_rsa"
    paramiko.RSAKey.generate(2048).write_private_key_file(str(key))
    start = time.monotonic()
    with pytest.raises(HostSetupError, match="cannot connect to libvirt"):
        LibvirtVM(LibvirtConfig(uri=_uri(_free_port(), key), accel="tcg")).start()
    assert time.monotonic() - start < 30
    assert shutil.which("ssh"), "libvirt's ssh transport needs the openssh client"


def _far_host(sshd, remote_cache: Path) -> SshQemuHost:
    port, key, _work = sshd
    return SshQemuHost(ssh_target_of(_uri(port, key)), str(remote_cache))


def _free_pair() -> range:
    """Two adjacent ports nothing listens on (the far host is this machine)."""
    for _ in range(50):
        first = _free_port()
        if first < 65535 and not _port_open(first + 1):
            return range(first, first + 2)
    raise AssertionError("no two adjacent free ports")


def test_two_clients_of_one_far_host_never_share_a_port(sshd, tmp_path) -> None:
    """Each client has its own local lock folder; the reservation lives on the far host and holds for both."""
    remote_cache = tmp_path / "far-cache"
    one, two = _far_host(sshd, remote_cache), _far_host(sshd, remote_cache)
    try:
        ports = _free_pair()
        first, held = one.reserve_port("vnc", ports)
        second, _ = two.reserve_port("vnc", ports)
        assert {first, second} == set(ports)
        with pytest.raises(HostSetupError, match="no free vnc port"):
            one.reserve_port("vnc", ports)
        held.release()
        assert two.reserve_port("vnc", ports)[0] == first  # released: free for anyone again
        # A port something listens on is never handed out, reservation or not.
        with socket.socket() as listener:
            listener.bind(("127.0.0.1", 0))
            listener.listen()
            busy = listener.getsockname()[1]
            with pytest.raises(HostSetupError, match="no free agent port"):
                one.reserve_port("agent", range(busy, busy + 1))
    finally:
        one.close()
        two.close()


def test_a_stale_reservation_of_a_free_port_is_taken_over(sshd, tmp_path) -> None:
    remote_cache = tmp_path / "far-cache"
    one, two = _far_host(sshd, remote_cache), _far_host(sshd, remote_cache)
    try:
        port = _free_port()
        assert one.reserve_port("agent", range(port, port + 1))[0] == port  # its owner dies without releasing
        with pytest.raises(HostSetupError):
            two.reserve_port("agent", range(port, port + 1))  # fresh: still held
        old = time.time() - STALE_RESERVATION_S - 60
        os.utime(remote_cache / "ports" / f"agent-{port}", (old, old))
        assert two.reserve_port("agent", range(port, port + 1))[0] == port
    finally:
        one.close()
        two.close()


def test_two_clients_copying_one_image_at_once_both_get_a_complete_copy(sshd, tmp_path) -> None:
    """Each copies into a folder of its own and renames it into place; neither deletes the other's files."""
    local = tmp_path / "local" / "base-test-0123"
    local.mkdir(parents=True)
    for name, size in (("disk.qcow2", 8 << 20), ("vmlinuz", 1 << 20), ("initrd.img", 2 << 20)):
        (local / name).write_bytes(os.urandom(size))
    (local / "manifest.json").write_text('{"name": "base-test-0123"}')
    image = BuiltImage("base-test-0123", local, {"name": "base-test-0123"})
    remote_cache = tmp_path / "far-cache"
    (remote_cache / "images" / image.name).mkdir(parents=True)  # a half copy an older version left behind
    (remote_cache / "images" / image.name / "disk.qcow2").write_bytes(b"truncated")
    hosts = [_far_host(sshd, remote_cache) for _ in range(2)]
    try:
        with ThreadPoolExecutor(2) as pool:
            results = list(pool.map(lambda host: host.image_paths(image), hosts))
    finally:
        for host in hosts:
            host.close()
    far = remote_cache / "images" / image.name
    assert results[0] == results[1] and results[0].disk == str(far / "disk.qcow2")
    for name in ("disk.qcow2", "vmlinuz", "initrd.img", "manifest.json"):
        assert (far / name).read_bytes() == (local / name).read_bytes(), name
    assert sorted(p.name for p in (remote_cache / "images").iterdir()) == [image.name]  # no partial left
