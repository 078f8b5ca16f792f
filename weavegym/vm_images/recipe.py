"""Image recipes: what goes into a guest image, and the cache key that names the result.

The key hashes the recipe *and* every file that ends up in the guest (the
provisioning script, the systemd units, the guest agent's source and the
protocol stubs), so changing any of them produces a new image instead of
silently reusing a stale one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent  # weavegym/, the import root (a source tree or a wheel)
GUEST_FILES = Path(__file__).resolve().parent / "guest_files"
# What the guest agent needs besides its own wheel, at the exact versions this host runs: host and guest
# must speak the same gRPC and protobuf (generated code checks the runtime's version).
GUEST_DEPENDENCIES: tuple[str, ...] = ("grpcio", "protobuf", "python-xlib")


def guest_pins() -> dict[str, str]:
    """``{"grpcio": "grpcio==1.76.0", ...}`` from the installed distributions (no source tree needed)."""
    from importlib.metadata import PackageNotFoundError, version

    pins = {}
    for name in GUEST_DEPENDENCIES:
        try:
            pins[name] = f"{name}=={version(name)}"
        except PackageNotFoundError:
            raise RuntimeError(f"{name} is not installed; it is one of weavegym's dependencies") from None
    return pins


@dataclass(frozen=True)
class Distro:
    name: str
    suite: str
    mirror: str
    components: tuple[str, ...]
    kernel_package: str
    python_version: str  # of the distro's python3, for picking agent wheels
    keyring: str = ""    # debootstrap --keyring; empty: the host default


DISTROS: dict[str, Distro] = {
    "debian-12": Distro(
        name="debian-12", suite="bookworm", mirror="http://deb.debian.org/debian", components=("main",),
        # The cloud kernel has no DRM/bochs driver ("no screens found"); the generic one does.
        kernel_package="linux-image-amd64", python_version="3.11",
    ),
    # Same recipe, another mirror and suite. It needs the Ubuntu archive, which this project's CI
    # machines cannot reach; users with internet access can build it.
    "ubuntu-24.04": Distro(
        name="ubuntu-24.04", suite="noble", mirror="http://archive.ubuntu.com/ubuntu",
        components=("main", "universe"), kernel_package="linux-image-generic", python_version="3.12",
        keyring="/usr/share/keyrings/ubuntu-archive-keyring.gpg",
    ),
}

BASE_PACKAGES: tuple[str, ...] = (
    "systemd-sysv", "udev", "dbus", "initramfs-tools", "procps", "iproute2", "sudo", "openssh-server",
    "python3", "python3-venv",
    "xserver-xorg-core", "xserver-xorg-input-libinput", "x11-xserver-utils", "x11-utils", "xinit",
    "openbox", "xterm", "xfonts-base", "zenity", "xdotool", "fonts-dejavu-core",
    # xauth: the root-only cookie that switches on the X server's access control (weavegym-xauth).
    "xauth",
    # xclip: a clipboard client, so the channel tests show that the workspace account's copy is refused too.
    "xclip",
    # acct: the kernel's process accounting (uid and controlling tty of every process), which the
    # NoDesktopTerminalWork rule reads to see command lines typed into a terminal on the desktop.
    "acct",
    # imagemagick: `import -window root` is how tasks ask for screenshot deliverables from the CLI.
    "imagemagick",
    # Light real apps so that one task per domain can run (and be validated in CI) on the base image:
    # sgt-puzzles (GTK games with text save files), sqlite3, git with gitk, python3-tk for Tk fixtures.
    "sgt-puzzles", "sqlite3", "git", "gitk", "python3-tk",
)

# Apps that tasks declare; the task-suite issue extends this list and records its build time and size.
FULL_EXTRA_PACKAGES: tuple[str, ...] = (
    "xfce4", "xfce4-terminal", "mousepad", "thunar", "fonts-noto-cjk", "dbus-x11",
    # Docs / Data: office suite, PDF tools, metric-compatible fonts, a SQLite GUI.
    "libreoffice-writer", "libreoffice-calc", "libreoffice-gtk3", "poppler-utils", "fonts-liberation2",
    "sqlitebrowser",
    # Games: chess engine with its GUI (sgt-puzzles is already in base).
    "gnuchess", "xboard",
    # Web: a real browser and a real web server.
    "firefox-esr", "nginx-light",
    # DevOps: git's own GUI and a task manager.
    "git-gui", "xfce4-taskmanager",
    # Spatial: OpenSCAD plus an STL checker.
    "openscad", "admesh",
    # Design: vector and raster editors.
    "inkscape", "gimp",
    # Task suite v2 (each well under 300 MB with its dependencies; see README for the image's size):
    # a spreadsheet with its command-line converter (ssconvert), a waveform viewer with a Verilog
    # simulator, and a PDF viewer that annotates.
    "gnumeric", "gtkwave", "iverilog", "evince",
    # A diagram editor with a command-line exporter (`dia -e`), a packet analyser's GUI with its CLI twin,
    # and an audio editor with sox.
    "dia", "wireshark-qt", "tshark", "audacity", "sox",
)

PROFILES: dict[str, dict[str, object]] = {
    # ready_window_classes: WM_CLASS values that must be mapped before the desktop counts as ready
    # (XFCE maps its panel and desktop ~15 s after its window manager under TCG).
    "base": {"packages": BASE_PACKAGES, "session": "openbox-session", "disk_gb": 4, "ready_window_classes": ()},
    "full": {"packages": BASE_PACKAGES + FULL_EXTRA_PACKAGES, "session": "startxfce4", "disk_gb": 8,
             "ready_window_classes": ("Xfce4-panel", "Xfdesktop")},
}


@dataclass(frozen=True)
class ImageRecipe:
    profile: str = "base"
    distro: str = "debian-12"
    desktop_user: str = "user"  # runs the X session and every GUI app
    workspace_user: str = "workspace"  # runs the episode's shell and python actions; no X access
    shared_group: str = "weave"  # both accounts: files one channel makes, the other can read
    extra_packages: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.profile not in PROFILES:
            raise ValueError(f"unknown image profile {self.profile!r}; choose from {sorted(PROFILES)}")
        if self.distro not in DISTROS:
            raise ValueError(f"unknown distro {self.distro!r}; choose from {sorted(DISTROS)}")

    @property
    def distribution(self) -> Distro:
        return DISTROS[self.distro]

    @property
    def packages(self) -> tuple[str, ...]:
        pkgs = tuple(PROFILES[self.profile]["packages"])  # type: ignore[arg-type]
        return (self.distribution.kernel_package, *pkgs, *self.extra_packages)

    @property
    def session_command(self) -> str:
        return str(PROFILES[self.profile]["session"])

    @property
    def ready_window_classes(self) -> tuple[str, ...]:
        return tuple(PROFILES[self.profile]["ready_window_classes"])  # type: ignore[arg-type]

    @property
    def disk_gb(self) -> int:
        return int(PROFILES[self.profile]["disk_gb"])  # type: ignore[call-overload]

    @property
    def name(self) -> str:
        return f"{self.profile}-{self.distro}-{self.key()}"

    def key(self) -> str:
        digest = hashlib.sha256(json.dumps(asdict(self), sort_keys=True).encode())
        digest.update(json.dumps(asdict(self.distribution), sort_keys=True).encode())
        digest.update(json.dumps(self.packages).encode())
        digest.update(json.dumps(PROFILES[self.profile], sort_keys=True, default=list).encode())
        digest.update(json.dumps(guest_pins(), sort_keys=True).encode())
        for path in _guest_content_files():
            digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()[:12]


def agent_version() -> str:
    """A digest of everything the guest agent is made of; an installed agent with another one is stale."""
    digest = hashlib.sha256()
    for path in _guest_content_files():
        digest.update(str(path.relative_to(PACKAGE_ROOT)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _guest_content_files() -> list[Path]:
    """Everything that is copied into the guest, in a stable order."""
    roots = [GUEST_FILES, PACKAGE_ROOT / "guest_agent", PACKAGE_ROOT / "agent"]
    files: list[Path] = []
    for root in roots:
        files.extend(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    files.append(Path(__file__).resolve().parent / "builder.py")  # it makes the guest wheel's layout
    return sorted(files)
