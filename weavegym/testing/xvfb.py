"""A private Xvfb display on the host, for development, tests and `weavegym bench agent`.

Readiness comes from Xvfb's ``-displayfd``: the server writes its display number
to the pipe once it accepts connections, so there is no sleep and no guessed
display number that another process might hold.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
from dataclasses import dataclass

from weavegym.core.deadline import Deadline
from weavegym.core.errors import HostSetupError


@dataclass(frozen=True)
class XvfbConfig:
    width: int = 1280
    height: int = 720
    depth: int = 24
    start_timeout_s: float = 15.0
    # An MIT cookie file (xauth) to start with: access control is then on, as on the image's Xorg (without one,
    # Xvfb lets every local client in and its access list means nothing).
    auth_file: str = ""


class XvfbDisplay:
    """Start with ``start()`` (or as a context manager); ``display`` is then e.g. ``":7"``."""

    def __init__(self, config: XvfbConfig | None = None) -> None:
        self.config = config or XvfbConfig()
        self.display: str = ""
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> XvfbDisplay:
        binary = shutil.which("Xvfb")
        if binary is None:
            raise HostSetupError("Xvfb is not installed; run `make setup` or `apt-get install xvfb`")
        read_fd, write_fd = os.pipe()
        cfg = self.config
        try:
            self._proc = subprocess.Popen(
                [
                    binary, "-displayfd", str(write_fd), "-screen", "0",
                    f"{cfg.width}x{cfg.height}x{cfg.depth}", "-nolisten", "tcp", "-noreset",
                    "+extension", "MIT-SHM", "+extension", "XFIXES",
                    *(("-auth", cfg.auth_file) if cfg.auth_file else ()),
                ],
                pass_fds=(write_fd,),
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
            os.close(write_fd)
            write_fd = -1
            self.display = ":" + self._read_display_number(read_fd)
        except BaseException:
            self.stop()
            raise
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
        return self

    def _read_display_number(self, fd: int) -> str:
        deadline = Deadline(self.config.start_timeout_s)
        buf = b""
        while not buf.endswith(b"\n"):
            ready, _, _ = select.select([fd], [], [], deadline.remaining())
            if not ready:
                raise HostSetupError(f"Xvfb did not report a display within {self.config.start_timeout_s}s")
            chunk = os.read(fd, 64)
            if not chunk:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc and self._proc.stderr else ""
                raise HostSetupError(f"Xvfb exited during start-up: {err.strip()[-500:]}")
            buf += chunk
        return buf.decode().strip()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stop(self) -> None:
        """Idempotent: kills the server's process group and reaps it."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGTERM)
                proc.wait(timeout=5)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=5)
        if proc.stderr:
            proc.stderr.close()

    def __enter__(self) -> XvfbDisplay:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
