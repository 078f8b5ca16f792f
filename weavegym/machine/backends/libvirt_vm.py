"""One weavegym VM under libvirt: overlay, domain, agent, `ready` snapshot, fast reset, recovery, teardown.

Lifecycle: ``start()`` cold-boots the VM on a private qcow2 overlay of the
shared base image, waits for the agent and the desktop, then saves the
``ready`` snapshot inside the overlay. ``reset()`` loads a snapshot in the
running QEMU (about a second) and resyncs the guest clock, which a memory
snapshot freezes. If QEMU died, ``reset()`` starts a new QEMU paused, loads
``ready`` into it and resumes, so even a crash costs no cold boot.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import subprocess
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

import numpy as np

from weavegym.core.deadline import wait_for
from weavegym.core.errors import AgentError, BackendError, HostSetupError, SnapshotError, VMStartError
from weavegym.core.extras import missing_extra
from weavegym.core.guest_layout import WORKSPACE_USER
from weavegym.core.paths import (
    default_boot_timeout,
    default_cache_dir,
    default_reset_timeout,
    default_states_max_bytes,
)
from weavegym.guest_agent.auth import TlsIdentity
from weavegym.guest_agent.relay import Relay, tcp_listener, vsock_connector
from weavegym.machine.agent_identity import new_agent_identity
from weavegym.machine.backends import resources
from weavegym.machine.backends.domain_xml import DomainSpec, domain_xml
from weavegym.machine.backends.lease import DomainLease
from weavegym.machine.backends.prepared_states import (
    DEVICE_STATE,
    DISK,
    RAM_FILE,
    READY,
    PreparedStore,
    StateBuild,
    StateHold,
    machine_shape,
)
from weavegym.machine.backends.qemu_host import (
    ImagePaths,
    LocalQemuHost,
    PortReservation,
    QemuHost,
    SshQemuHost,
    is_remote_uri,
    ssh_target_of,
)
from weavegym.machine.backends.snapshots import InternalSnapshots
from weavegym.machine.backends.state_transfer import load_device_state, save_device_state
from weavegym.machine.frames import read_ppm
from weavegym.machine.guest_client import ClientConfig, GuestClient
from weavegym.machine.kvm_probe import choose_accelerator
from weavegym.machine.window_manager import nudge_window_manager
from weavegym.vm_images.builder import BuiltImage, require_image
from weavegym.vm_images.recipe import ImageRecipe

try:
    import libvirt
except ModuleNotFoundError as _missing:  # an optional extra (core/extras.py)
    raise missing_extra(_missing) from None

READY_SNAPSHOT = READY  # the booted desktop: the one prepared state never removed to make room
IDENTITY_FILE_BYTES = 4096  # the agent's key and certificate, padded (see _allocate)
libvirt.registerErrorHandler(lambda _ctx, _err: None, None)  # errors arrive as exceptions; no stderr noise


@dataclass(frozen=True)
class LibvirtConfig:
    uri: str = ""  # "" : qemu:///system as root, qemu:///session otherwise; any remote URI works
    profile: str = "base"
    distro: str = "debian-12"
    memory_mib: int = 2048
    vcpus: int = 2
    screen: tuple[int, int] = (1280, 720)
    accel: str = "auto"  # auto (probe KVM, fall back to TCG) | kvm | tcg
    transport: str = "tcp"  # tcp (user-mode NIC + hostfwd) | vsock (needs /dev/vhost-vsock on the host)
    boot_timeout_s: float = field(default_factory=default_boot_timeout)  # $WEAVEGYM_BOOT_TIMEOUT_S or 300
    reset_timeout_s: float = field(default_factory=default_reset_timeout)  # $WEAVEGYM_RESET_TIMEOUT_S or 60
    cache_dir: Path = field(default_factory=default_cache_dir)
    image_dir: Path | None = None  # a specific built image instead of the one matching the recipe
    forward_ssh: bool = False  # also forward a host port to the guest's sshd (see ssh_port)
    # qemu+ssh:// URIs: where images and run dirs live on the far host (see qemu_host.py)
    remote_cache_dir: str = "/var/cache/weavegym"
    # Start from, and save task states as, host-wide prepared states (prepared_states.py) that every VM of
    # this image and shape on this host shares: a new VM restores in seconds instead of a cold boot, its RAM
    # is shared copy-on-write, and any env reuses a task variant another one set up. Local libvirt only.
    prepared_states: bool = False
    # What the task states of one image and shape may take on disk; the least recently used go first
    # ($WEAVEGYM_STATES_MAX_GB, else 24 GiB).
    states_max_bytes: int = field(default_factory=default_states_max_bytes)

    def resolved_uri(self) -> str:
        return self.uri or ("qemu:///system" if os.geteuid() == 0 else "qemu:///session")


@dataclass
class _HostState:
    """Shared with the teardown finalizer, which must not hold the VM object itself."""

    host: QemuHost | None = None
    run_dir: str = ""
    lease: DomainLease | None = None  # destroys the domain if this process dies without closing it


@dataclass(frozen=True)
class VncAddress:
    host: str
    port: int
    password: str

    def __str__(self) -> str:
        return f"vnc://{self.host}:{self.port} (password {self.password})"


def connect(uri: str) -> libvirt.virConnect:
    """Open libvirt, turning "daemon not running" into a message that says how to start it."""
    try:
        return libvirt.open(uri)
    except libvirt.libvirtError as exc:
        hint = ("start it with `virtlogd -d && libvirtd -d` (no systemd) or `systemctl start libvirtd`"
                if "libvirt-sock" in str(exc) or "No such file" in str(exc) else "check `virsh -c URI version`")
        raise HostSetupError(f"cannot connect to libvirt at {uri}: {exc}; {hint}") from None


def _domain_type(config: LibvirtConfig, conn: libvirt.virConnect | None = None) -> str:
    if config.accel == "tcg":
        return "qemu"
    if config.accel == "kvm":
        return "kvm"
    if is_remote_uri(config.resolved_uri()) and conn is not None:
        # The KVM probe boots a guest on *this* host; for a far host trust its capabilities (accel='tcg' if
        # KVM is present there but broken, as measured on our CI machines).
        return "kvm" if "<domain type='kvm'" in conn.getCapabilities() else "qemu"
    return "kvm" if choose_accelerator(config.cache_dir).accel == "kvm" else "qemu"


class LibvirtVM:
    supports_snapshots = True
    workspace_user = WORKSPACE_USER  # the image's account for shell/python (vm_images/guest_files/provision.sh)
    separate_accounts = True

    def __init__(self, config: LibvirtConfig | None = None) -> None:
        self.config = config or LibvirtConfig()
        self.name = resources.new_vm_name()
        self.token = secrets.token_hex(24)
        self.vnc_password = secrets.token_urlsafe(6)[:8]  # VNC passwords are at most 8 characters
        self.client: GuestClient | None = None
        # The agent's TLS key and certificate, made here and pinned by the client: whatever else answers
        # on the forwarded port (a host process that took it while QEMU was down) fails the handshake
        # and never receives the token.
        self.identity: TlsIdentity | None = None
        self.image: BuiltImage | None = None
        self.timings: dict[str, float] = {}
        self._conn: libvirt.virConnect | None = None
        self._domain: libvirt.virDomain | None = None
        self._snapshots: InternalSnapshots | None = None
        self._locks: list[PortReservation] = []
        self._spec: DomainSpec | None = None
        self._host = _HostState()  # the QEMU host, its run dir and our port locks: what teardown releases
        self._relay: Relay | None = None
        self._store: PreparedStore | None = None  # with LibvirtConfig.prepared_states, once the image is known
        self._state_hold: StateHold | None = None  # the prepared state this VM runs from: not to be removed
        self._image_paths = ImagePaths("", "", "")
        self._last_frame = b""
        self._wm_manages_windows = False
        self._closed = False
        self._remote = is_remote_uri(self.config.resolved_uri())
        self._local_agent_port = 0
        self._local_vnc_port = 0
        self._finalizer = weakref.finalize(self, LibvirtVM._teardown, self.name, self.config.resolved_uri(),
                                           self._host, self._locks)  # also runs at interpreter exit

    # -- public ----------------------------------------------------------------------------------
    @property
    def vnc(self) -> VncAddress:
        assert self._spec is not None, "start() first"
        return VncAddress("127.0.0.1", self._local_vnc_port or self._spec.vnc_port, self.vnc_password)

    @property
    def ssh_port(self) -> int:
        """The host port of the guest's sshd on 127.0.0.1 (needs ``forward_ssh=True``)."""
        assert self._spec is not None and self._spec.ssh_host_port, "start() with forward_ssh=True first"
        return self._spec.ssh_host_port

    @property
    def agent_target(self) -> str:
        assert self._spec is not None, "start() first"
        return f"127.0.0.1:{self._local_agent_port or self._spec.agent_host_port}"

    @property
    def domain(self) -> libvirt.virDomain:
        if self._domain is None:
            raise BackendError(f"VM {self.name} is not running")
        return self._domain

    @property
    def snapshots(self) -> InternalSnapshots:
        if self._snapshots is None:
            raise BackendError(f"VM {self.name} is not running")
        return self._snapshots

    def start(self) -> LibvirtVM:
        """Cold boot, wait for the desktop, save `ready`. Cleans up everything if any step fails."""
        t0 = time.monotonic()
        try:
            self._check_transport()
            self.image = self._image()
            if self.config.prepared_states:
                if self._remote:
                    raise HostSetupError("prepared_states needs a local libvirt (its states are files on this host)")
                self._store = PreparedStore(self.config.cache_dir / "states" / self.image.name / machine_shape(
                    self.config.memory_mib, self.config.vcpus, self.config.screen),
                    min_free_bytes=(self.config.memory_mib + 1024) << 20, max_bytes=self.config.states_max_bytes)
            self._conn = connect(self.config.resolved_uri())
            self._host.host = self._open_qemu_host()
            self._check_disk_space()
            self._allocate()
            # From here on a domain may exist: it must not outlive this process, however it ends.
            self._host.lease = DomainLease(self.config.resolved_uri(), self.name,
                                           "" if self._remote else self._host.run_dir)
            if self._store is not None:
                self._start_prepared(t0)
            else:
                self._create_overlay()
                self._boot()
                self.timings["cold_boot_s"] = time.monotonic() - t0
                self.timings["snapshot_save_s"] = self.snapshots.save(READY_SNAPSHOT)
            assert self.client is not None
            self.client.reconnect()
            self.client.wait_ready(self.config.reset_timeout_s)
        except BaseException:
            self.close()
            raise
        return self

    def _image(self) -> BuiltImage:
        if self.config.image_dir is None:
            return require_image(ImageRecipe(self.config.profile, self.config.distro), self.config.cache_dir)
        manifest = Path(self.config.image_dir) / "manifest.json"
        if not manifest.is_file():
            raise HostSetupError(f"{self.config.image_dir} is not a built weavegym image (no manifest.json)")
        return BuiltImage(Path(self.config.image_dir).name, Path(self.config.image_dir),
                          json.loads(manifest.read_text()))

    def is_running(self) -> bool:
        """Whether QEMU is up. A VM paused from outside (``virsh suspend``) is resumed here, and counted in
        ``timings["resumed"]``: paused, it would only make every later call wait out its timeout."""
        if self._domain is None:
            return False
        try:
            self._reattach()
        except BackendError:
            return False
        if self._domain is None:
            return False
        try:
            state, reason = self._domain.state()
            if state == libvirt.VIR_DOMAIN_PAUSED and reason == libvirt.VIR_DOMAIN_PAUSED_USER:
                self._domain.resume()
                self.timings["resumed"] = self.timings.get("resumed", 0.0) + 1
                state, _ = self._domain.state()
        except libvirt.libvirtError:
            return False
        return state in (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_PAUSED)

    def reset(self, snapshot: str = READY_SNAPSHOT) -> float:
        """Bring the VM back to ``snapshot``; recovers a dead QEMU. Returns the seconds it took."""
        if self._store is not None:
            return self._restore(snapshot)
        start = time.monotonic()
        self._reattach()
        if not self.is_running():
            self._recover(snapshot)
        else:
            try:
                self.snapshots.load(snapshot)
            except SnapshotError:
                if self.is_running():
                    raise
                self._recover(snapshot)  # QEMU died just now, before libvirt had noticed
        assert self.client is not None
        self.client.reconnect()  # connections from before the snapshot are frozen in the past
        self.client.wait_ready(self.config.reset_timeout_s)
        self.resync_clock()
        return time.monotonic() - start

    def save_snapshot(self, name: str) -> float:
        if self._store is not None:
            raise SnapshotError("with prepared_states, snapshots are made by make_snapshot (a state the whole "
                                "host shares), not saved into this VM's overlay")
        self._reattach()
        return self.snapshots.save(name)

    def _reattach(self) -> None:
        """After a libvirtd restart our connection is dead while QEMU, and so the VM, lives on: open a new
        connection and find the domain again. Raises ``BackendError`` while libvirtd is down."""
        if self._conn is None or self._closed:
            return
        try:
            self._conn.getLibVersion()  # a round trip: isAlive() still says yes until a call fails
            return
        except libvirt.libvirtError:
            pass
        with contextlib.suppress(libvirt.libvirtError):
            self._conn.close()
        try:
            self._conn = connect(self.config.resolved_uri())
        except HostSetupError as exc:
            raise BackendError(f"lost libvirtd and cannot reconnect: {exc}") from None
        self.timings["libvirt_reconnects"] = self.timings.get("libvirt_reconnects", 0.0) + 1
        try:
            self._domain = self._conn.lookupByName(self.name)
        except libvirt.libvirtError:
            self._domain = None  # gone while libvirtd was away: the next reset recovers it
            return
        if self._snapshots is not None:
            self._snapshots.rebind(self._domain)

    def delete_snapshot(self, name: str) -> None:
        if self._store is None:  # prepared states are the host's, shared by other envs: kept
            self.snapshots.delete(name)

    # -- prepared states (LibvirtConfig.prepared_states) ---------------------------------------------
    @property
    def shares_snapshots(self) -> bool:
        """Whether snapshots are host-wide prepared states, which another env may have made already."""
        return self._store is not None

    def find_snapshot(self, name: str) -> bytes | None:
        """The payload saved with prepared state ``name``, or None if this host has no such state."""
        state = self._store.find(name) if self._store is not None else None
        if state is None:
            return None
        assert self._store is not None
        self._store.note_use(name)  # the most recently used now: the last a builder elsewhere would remove
        return state.payload()

    def make_snapshot(self, name: str, base: str, setup: Callable[[], bytes]) -> bytes:
        """Start from ``base``, run ``setup`` and keep the result as snapshot ``name`` with setup's payload.

        With prepared states the build holds the state's host-wide lock: if another process built it
        meanwhile, its payload is returned and nothing runs. The VM is down afterwards until ``reset``.
        """
        if self._store is None:
            self.reset(base)
            payload = setup()
            self.save_snapshot(name)
            return payload
        with self._store.building(name, self.config.boot_timeout_s * 2) as build:
            if build.existing is not None:
                return build.existing.payload()
            self._restore(base, into=build)
            payload = setup()
            self._freeze_into(build)
            build.publish(payload, {"image": self.image.name if self.image else "", "base": base})
            return payload

    def _start_prepared(self, t0: float) -> None:
        """Restore the host's booted desktop, making it first (cold boot, then freeze) if nobody has."""
        assert self._store is not None and self._spec is not None
        with self._store.building(READY_SNAPSHOT, self.config.boot_timeout_s * 2) as build:
            if build.existing is None:
                self._spec = replace(self._spec, ram_file=str(build.staging / RAM_FILE), ram_shared=True)
                self._create_overlay()
                self._boot()
                self.timings["cold_boot_s"] = time.monotonic() - t0
                self._freeze_into(build)
                build.publish(b"", {"image": self.image.name if self.image else "",
                                    "cold_boot_s": self.timings["cold_boot_s"]})
        self.timings["restore_s"] = self._restore(READY_SNAPSHOT)

    def _freeze_into(self, build: StateBuild) -> None:
        """Save the running VM's device state into ``build`` and move its disk there; QEMU is gone after."""
        assert self._spec is not None and self._spec.ram_shared, "only a VM with its RAM in a shared file freezes"
        self.timings["state_save_s"] = save_device_state(self.domain, build.staging / DEVICE_STATE)
        self._destroy_domain()
        os.replace(self._spec.disk, build.staging / DISK)

    def _restore(self, name: str, into: StateBuild | None = None) -> float:
        """A new QEMU in prepared state ``name``: a fresh overlay on its frozen disk, its RAM file mapped
        copy-on-write (or, ``into`` a state being built, copied there and written through), its device
        state loaded. This VM's own token and TLS key reach the agent by fw_cfg, which it reads live."""
        assert self._store is not None and self._spec is not None and self._host.host is not None
        hold = self._store.hold(name)  # before looking: a state found unheld could be removed under us
        state = self._store.find(name)
        if state is None:
            hold.release()
            raise SnapshotError(f"no prepared state {name!r} in {self._store.root}")
        previous, self._state_hold = self._state_hold, hold
        if previous is not None:
            previous.release()
        start = time.monotonic()
        self._reattach()  # libvirtd may have restarted since the last call
        self._destroy_domain()
        with contextlib.suppress(FileNotFoundError):
            os.remove(self._spec.disk)
        self._host.host.create_overlay(str(state.disk), self._spec.disk)
        ram, shared = str(state.ram), False
        if into is not None:
            ram, shared = str(into.staging / RAM_FILE), True
            subprocess.run(["cp", "--sparse=always", str(state.ram), ram], check=True, capture_output=True)
        self._spec = replace(self._spec, ram_file=ram, ram_shared=shared, incoming=True)
        self._define(paused=True)
        try:
            self.timings["state_load_s"] = load_device_state(self.domain, state.device_state)
            self.domain.resume()
        except (SnapshotError, libvirt.libvirtError) as exc:
            self._destroy_domain()
            raise SnapshotError(f"could not restore prepared state {name!r}: {exc}") from None
        assert self.client is not None
        self.client.reconnect()  # a new QEMU: the old connections are gone
        self.client.wait_ready(self.config.reset_timeout_s)
        self.resync_clock()
        return time.monotonic() - start

    def _destroy_domain(self) -> None:
        if self._domain is not None:
            with contextlib.suppress(libvirt.libvirtError):
                self._domain.destroy()
        if self._relay is not None:
            self._relay.stop()
            self._relay = None

    def grab_frame(self) -> np.ndarray:
        """The screen as QEMU displays it (what VNC shows, pointer included), via HMP ``screendump``.

        About 10x cheaper than an in-guest capture under TCG (measured here). The file lands on the
        host running QEMU, so a remote libvirt URI falls back to the agent's screenshot.
        """
        if self._remote:
            assert self.client is not None
            return self.client.screenshot().image
        path = Path(self._host.run_dir) / "screen.ppm"
        self.snapshots.hmp(f"screendump {path}")
        try:
            return read_ppm(path.read_bytes()).copy()
        except (OSError, ValueError, IndexError) as exc:
            raise BackendError(f"could not read {self.name}'s screendump {path}: {exc}") from None

    def resync_clock(self) -> None:
        """A memory snapshot restores the guest clock of its moment; set it to now."""
        assert self.client is not None
        result = self.client.exec(["date", "-u", "-s", f"@{time.time():.3f}"], timeout=10)
        if not result.ok:
            raise BackendError(f"could not set the guest clock: {result.stderr.strip()}")

    def close(self) -> None:
        """Idempotent: destroy the domain, delete the overlay and run dir, release ports and locks."""
        if self._closed:
            return
        self._closed = True
        if self.client is not None:
            self.client.close()
        if self._state_hold is not None:
            self._state_hold.release()
        if self._relay is not None:
            self._relay.stop()
        self._domain = None
        self._finalizer()
        if self._conn is not None:
            with contextlib.suppress(libvirt.libvirtError):
                self._conn.close()
            self._conn = None

    def __enter__(self) -> LibvirtVM:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- steps -----------------------------------------------------------------------------------
    def _check_transport(self) -> None:
        if self.config.transport not in ("tcp", "vsock"):
            raise ValueError(f"transport must be 'tcp' or 'vsock', not {self.config.transport!r}")
        if self.config.transport == "vsock" and not Path("/dev/vhost-vsock").exists():
            raise HostSetupError("transport='vsock' needs /dev/vhost-vsock on the host (`modprobe vhost_vsock`); "
                                 "this host has none, so use transport='tcp'")

    def _start_vsock_relay(self) -> None:
        """Relay 127.0.0.1:agent_host_port to the guest's CID; a new QEMU may get a new CID."""
        assert self._spec is not None
        match = re.search(r"<cid auto='yes' address='(\d+)'", self.domain.XMLDesc())
        if match is None:
            raise VMStartError(f"{self.name} has no vsock CID in its live definition")
        if self._relay is not None:
            self._relay.stop()
        listener = tcp_listener("127.0.0.1", self._spec.agent_host_port)
        self._relay = Relay(listener, vsock_connector(int(match.group(1)), self._spec.agent_guest_port)).start()

    def _open_qemu_host(self) -> QemuHost:
        """This host for local URIs; for qemu+ssh:// the far host, over the same SSH login libvirt uses."""
        if not self._remote:
            return LocalQemuHost(self.config.cache_dir)
        if self.config.transport == "vsock":
            raise ValueError("transport='vsock' works only with a local libvirt; use 'tcp' with a remote URI")
        return SshQemuHost(ssh_target_of(self.config.resolved_uri()), self.config.remote_cache_dir)

    def _check_disk_space(self) -> None:
        assert self._host.host is not None
        where = self.config.remote_cache_dir if self._remote else self.config.cache_dir
        free = self._host.host.free_bytes()
        need = (self.config.memory_mib << 20) * 2 + (1 << 30)  # saved RAM states + disk delta
        if free < need:
            raise HostSetupError(f"only {free / 2**30:.1f} GiB free in {where}; a VM with "
                                 f"{self.config.memory_mib} MiB RAM needs about {need / 2**30:.1f} GiB for its "
                                 f"overlay and snapshots. Free space, or pass another cache_dir")

    def _allocate(self) -> None:
        host = self._host.host
        assert self.image is not None and host is not None
        # The image first (a far host may need a copy that takes minutes): a port reservation is then
        # short-lived until QEMU binds it, so it never looks abandoned.
        paths = self._image_paths = host.image_paths(self.image)
        # Reserved where QEMU binds them: in this cache's lock folder locally, on the far host for qemu+ssh.
        vnc_port, vnc_lock = host.reserve_port("vnc", resources.VNC_PORTS)
        self._locks.append(vnc_lock)
        agent_port, agent_lock = host.reserve_port("agent", resources.AGENT_PORTS)
        self._locks.append(agent_lock)
        ssh_port = 0
        if self.config.forward_ssh:
            ssh_port, ssh_lock = host.reserve_port("ssh", resources.SSH_PORTS)
            self._locks.append(ssh_lock)
        run_dir = self._host.run_dir = host.run_dir(self.name)
        host.make_dir(run_dir)
        token_file = f"{run_dir}/agent-token"
        host.write_private_file(token_file, self.token.encode())  # QEMU reads it; `ps` never shows it
        identity_file = ""
        if self.image.manifest.get("agent_tls"):  # images from before agent TLS serve plain gRPC
            self.identity = new_agent_identity()
            identity_file = f"{run_dir}/agent-identity"
            # Always the same size: the guest kernel reads fw_cfg sizes once, at boot, and a VM restored from
            # a prepared state must read its own identity through the size the preparing VM booted with.
            host.write_private_file(identity_file, self.identity.bundle().ljust(IDENTITY_FILE_BYTES, b"\n"))
        self._spec = DomainSpec(
            name=self.name, domain_type=_domain_type(self.config, self._conn), memory_mib=self.config.memory_mib,
            vcpus=self.config.vcpus, kernel=paths.kernel, initrd=paths.initrd,
            disk=f"{run_dir}/overlay.qcow2", console_log=f"{run_dir}/console.log",
            vnc_port=vnc_port, vnc_password=self.vnc_password, agent_host_port=agent_port,
            agent_guest_port=int(self.image.manifest.get("agent_port", 760)), token_file=token_file,
            screen=self.config.screen, owner_pid=os.getpid(), run_as_root=self._qemu_as_root(),
            vsock=self.config.transport == "vsock", ssh_host_port=ssh_port, identity_file=identity_file,
        )
        record = resources.VMRecord(
            name=self.name, uri=self.config.resolved_uri(), owner_pid=os.getpid(), overlay=self._spec.disk,
            run_dir="" if self._remote else run_dir, vnc_port=vnc_port, agent_port=agent_port)
        self._locks.append(resources.write_record(self.config.cache_dir / "run", record))
        if self._remote:  # QEMU binds these on the far host's loopback: bring them here
            self._local_agent_port = host.reach(agent_port)
            self._local_vnc_port = host.reach(vnc_port)

    def _qemu_as_root(self) -> bool:
        """Local: when we are root. Remote: for the system daemon, so QEMU can read the root-owned cache."""
        if self._remote:
            return urlsplit(self.config.resolved_uri()).path.rstrip("/") == "/system"
        return os.geteuid() == 0

    def _create_overlay(self) -> None:
        assert self._spec is not None and self._host.host is not None
        self._host.host.create_overlay(self._image_paths.disk, self._spec.disk)

    def _define(self, paused: bool) -> None:
        assert self._conn is not None and self._spec is not None
        if self.client is None:
            self.client = GuestClient(self.agent_target, self.token, ClientConfig(),
                                      tls_cert=self.identity.cert_pem if self.identity is not None else None)
        flags = libvirt.VIR_DOMAIN_START_PAUSED if paused else 0
        try:
            self._domain = self._conn.createXML(domain_xml(self._spec), flags)
        except libvirt.libvirtError as exc:
            raise VMStartError(f"libvirt could not start {self.name}: {exc}") from None
        if self._snapshots is None:
            self._snapshots = InternalSnapshots(self._domain)
        else:
            self._snapshots.rebind(self._domain)
        if self._spec.vsock:
            self._start_vsock_relay()

    def _boot(self) -> None:
        self._define(paused=False)
        try:
            self.client.wait_ready(self.config.boot_timeout_s)
            # Its own full deadline: XFCE took over 150 s to settle with five TCG guests on two cores.
            wait_for(self._desktop_ready, self.config.boot_timeout_s, what="the guest desktop")
        except (AgentError, TimeoutError) as exc:
            raise VMStartError(f"{self.name} booted but its desktop did not come up: {exc}; "
                               f"console log tail:\n{self.console_tail()}") from None

    def _desktop_ready(self) -> bool:
        """The screen has its size, a WM runs, the profile's windows are mapped, and frames stopped changing.

        The last condition keeps the `ready` snapshot from catching a desktop half drawn.
        """
        assert self.client is not None and self.image is not None
        info = self.client.info(timeout=10)
        if (info.screen_width, info.screen_height) != self.config.screen:
            return False
        windows, wm = self.client.list_windows(timeout=10)
        classes = {w.wm_class for w in windows}
        if not wm or not set(self.image.manifest.get("ready_window_classes", [])) <= classes:
            return False
        if not self._wm_manages_windows:
            self._wm_manages_windows = self._probe_window_manager()
            return False
        digest = hashlib.sha256(self.client.screenshot(hide_cursor=True).image.tobytes()).digest()
        settled, self._last_frame = digest == self._last_frame, digest
        return settled

    def _probe_window_manager(self) -> bool:
        """Map a throwaway window and wait until the WM lists it as a client.

        The WM announces itself (``_NET_SUPPORTING_WM_CHECK``) long before it manages
        windows: openbox took 17 s between the two with two TCG guests on two cores.
        Worse, openbox 3.6 under TCG can stall right after startup with a MapRequest
        it has not processed (the window stays unmapped until some other event
        arrives); a ``ready`` snapshot of that state restores a desktop where new
        windows never appear. Each poll therefore also nudges the WM with a root
        property change, and readiness means "the WM managed a window".
        """
        assert self.client is not None
        client, title = self.client, "weavegym-wm-probe"
        client.exec(f"xmessage -name {title} -title {title} {title} >/dev/null 2>&1 &", user="user", timeout=10)

        def managed() -> bool:
            nudge_window_manager(client)
            return any(w.title == title for w in client.list_windows(timeout=10)[0])

        try:
            wait_for(managed, self.config.boot_timeout_s / 2, what="the window manager to manage a probe window")
        finally:
            client.exec(["pkill", "-f", f"xmessage -name {title}"], timeout=10)
        return True

    def _recover(self, snapshot: str) -> None:
        """QEMU is gone: start a fresh one paused, load the snapshot from the overlay, resume."""
        if self._snapshots is None or self._spec is None:
            raise BackendError(f"VM {self.name} was never started")
        self._define(paused=True)
        try:
            self.snapshots.load(snapshot)
        except BackendError:
            self.domain.destroy()
            raise
        self.domain.resume()

    def console_tail(self, limit: int = 3000) -> str:
        if self._host.host is None or not self._host.run_dir:
            return ""
        return self._host.host.read_tail(f"{self._host.run_dir}/console.log", limit)

    @staticmethod
    def _teardown(name: str, uri: str, host: _HostState, locks: list[PortReservation]) -> None:
        """Runs from close(), at interpreter exit, or when the VM object is collected."""
        reached_libvirt = False
        with contextlib.suppress(libvirt.libvirtError):
            conn = libvirt.open(uri)
            reached_libvirt = True
            try:
                with contextlib.suppress(libvirt.libvirtError):
                    conn.lookupByName(name).destroy()
            finally:
                conn.close()
        if host.host is not None and host.run_dir:
            host.host.remove_tree(host.run_dir)
        for lock in locks:  # before the host is closed: a far host's reservations go over its link
            lock.release()
        locks.clear()
        if host.host is not None:
            host.host.close()
            host.host = None
        # Torn down by us: the watchdog has nothing left to do. If libvirtd could not be reached, the lease is
        # kept, so the watchdog destroys the domain once this process is gone (libvirtd may be back by then).
        if host.lease is not None and reached_libvirt:
            host.lease.release()
            host.lease = None
