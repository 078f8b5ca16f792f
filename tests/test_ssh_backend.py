"""The ssh backend against a real weavegym VM whose sshd is forwarded to the host, plus its bad-input errors."""

from __future__ import annotations

import base64
import re
import socket
import time
from pathlib import Path

import paramiko
import pytest

from weavegym.core.errors import HostSetupError, SnapshotError
from weavegym.envs.tasks import get_task
from weavegym.envs.weave_env import WeaveEnv
from weavegym.machine.backends.base import make_backend
from weavegym.machine.backends.libvirt_vm import LibvirtConfig, LibvirtVM
from weavegym.machine.backends.ssh_link import SshLink, SshTarget
from weavegym.ops.validation import run_policy

pytestmark = pytest.mark.vm


def _key(path: Path) -> Path:
    paramiko.RSAKey.generate(2048).write_private_key_file(str(path))
    return path


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_unknown_option_and_missing_host_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="unknown ssh backend option"):
        make_backend("ssh", screen=(1280, 720), profile="base", options={"hostname": "x"})
    with pytest.raises(ValueError, match="needs backend_options"):
        make_backend("ssh", screen=(1280, 720), profile="base", options={})


def test_refused_port_and_missing_key_fail_fast(tmp_path) -> None:
    start = time.monotonic()
    with pytest.raises(HostSetupError, match="cannot connect"):
        SshLink(SshTarget("127.0.0.1", port=_closed_port(), key_file=_key(tmp_path / "k"))).connect()
    with pytest.raises(HostSetupError, match="does not exist"):
        SshLink(SshTarget("127.0.0.1", key_file=tmp_path / "missing")).connect()
    (tmp_path / "garbage").write_text("not a key\n")
    with pytest.raises(HostSetupError, match="cannot read the private key"):
        SshLink(SshTarget("127.0.0.1", key_file=tmp_path / "garbage")).connect()
    assert time.monotonic() - start < 5


def test_silent_host_fails_within_its_deadline(tmp_path) -> None:
    """A port that accepts TCP but never speaks SSH (a black hole) must not hang past connect_timeout_s."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        start = time.monotonic()
        with pytest.raises(HostSetupError, match=r"no answer within 2 s|cannot connect"):
            SshLink(SshTarget("127.0.0.1", port=silent.getsockname()[1], key_file=_key(tmp_path / "k"),
                              connect_timeout_s=2.0)).connect()
        assert time.monotonic() - start < 8


@pytest.fixture(scope="module")
def ssh_vm(tmp_path_factory):
    """A weavegym base VM with sshd on a host port and our key authorized for root."""
    key = _key(tmp_path_factory.mktemp("ssh") / "id_rsa")
    public = f"ssh-rsa {paramiko.RSAKey.from_private_key_file(str(key)).get_base64()} weavegym-test\n"
    vm = LibvirtVM(LibvirtConfig(forward_ssh=True)).start()
    try:
        assert vm.client is not None
        vm.client.exec("install -d -m 700 /root/.ssh && cat > /root/.ssh/authorized_keys && "
                       "chmod 600 /root/.ssh/authorized_keys", stdin=public.encode(), timeout=30)
        yield vm, key
    finally:
        vm.close()


def test_wrong_key_is_rejected_with_a_clear_error(ssh_vm, tmp_path) -> None:
    vm, _key_file = ssh_vm
    start = time.monotonic()
    with pytest.raises(HostSetupError, match="rejected the login"):
        SshLink(SshTarget("127.0.0.1", port=vm.ssh_port, key_file=_key(tmp_path / "other"), host_keys="any")).connect()
    assert time.monotonic() - start < 20


def test_host_keys_are_verified_unless_the_caller_opts_in(ssh_vm, tmp_path) -> None:
    """An unknown host is refused by default; accept-new records it; a changed key is refused even then."""
    vm, key = ssh_vm
    known = tmp_path / "known_hosts"

    def target(policy: str) -> SshTarget:
        return SshTarget("127.0.0.1", port=vm.ssh_port, key_file=key, host_keys=policy, known_hosts=known)

    with pytest.raises(HostSetupError, match=r"not in .*known_hosts.*accept-new"):
        SshLink(target("known")).connect()
    assert not known.exists()
    SshLink(target("accept-new")).connect().close()
    recorded = known.read_text().split()
    assert recorded[0] == f"[127.0.0.1]:{vm.ssh_port}" and len(recorded) == 3
    SshLink(target("known")).connect().close()  # now it is known
    # The machine "was replaced": the recorded key no longer matches, whatever the policy short of "any".
    blob = base64.b64decode(recorded[2])
    changed = base64.b64encode(blob[:-1] + bytes([blob[-1] ^ 1])).decode()
    known.write_text(f"{recorded[0]} {recorded[1]} {changed}\n")
    for policy in ("known", "accept-new"):
        with pytest.raises(HostSetupError, match="host key mismatch"):
            SshLink(target(policy)).connect()
    SshLink(target("any")).connect().close()
    with pytest.raises(ValueError, match="host_keys"):
        SshTarget("127.0.0.1", host_keys="yes")


@pytest.mark.timeout(900)
def test_one_episode_through_the_ssh_backend(ssh_vm) -> None:
    vm, key = ssh_vm
    task = get_task("Weave-Productivity-1")
    # The machine is a weavegym image, so it has the workspace account: the channels stay apart over ssh too.
    env = WeaveEnv(task, backend="ssh",
                   backend_options={"host": "127.0.0.1", "port": vm.ssh_port, "user": "root", "key_file": key,
                                    "host_keys": "any",
                                    "workspace_user": "workspace", "xauthority": "/run/weavegym/Xauthority"})
    try:
        oracle = run_policy(env, "oracle", task.oracle, seed=0)
        assert oracle.action_errors == []
        assert oracle.score == 1.0, oracle.evaluation
        assert env.backend is not None and env.backend.vnc is None
        with pytest.raises(SnapshotError):
            env.backend.save_snapshot("x")
        # No snapshot: reset re-runs the setup after stopping what the last setup launched, so exactly one
        # approval dialog is open and the confirmed answer of the last episode is gone. Files the oracle
        # wrote in the home directory stay (documented), so the noop gets their partial credit, capped
        # by the failed critical dialog clause.
        noop = run_policy(env, "noop", lambda _ctx: iter([{"kind": "done"}]), seed=0)
        clauses = {c["name"]: c["outcome"] for c in noop.evaluation["clauses"]}
        assert clauses["dialog_total"] == "failed" and clauses["total_file"] == "satisfied", clauses
        assert noop.score <= 0.5, noop.evaluation
        assert env.backend.client is not None
        titles = [w.title for w in env.backend.client.list_windows()[0]]
        assert titles.count("Expense approval") == 1, titles
        # The agent runs from the ssh backend's own install, not the image's systemd unit.
        listeners = env.backend.client.exec("ss -ltn", timeout=10).stdout
        assert re.search(r"127\.0\.0\.1\]?:7611 ", listeners), listeners
    finally:
        env.close()
    # close() stopped the agent it started.
    assert vm.client is not None
    assert ":7611 " not in vm.client.exec("ss -ltn", timeout=10).stdout
