"""Running a task's pixel-only Tk fixture (a desk, a board, an office) on a host X display, as its setup does in the
guest: the fixture as ``app.py`` beside a copy of ``pixel_font.py`` (which it imports), its configuration as JSON
on stdin. The xvfb tests then drive it through the real guest agent and read it back off the screen.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from weavegym.envs.tasks import pixel_font


@contextmanager
def pixel_app(fixture: Path, conf: object, workdir: Path, display: str, *, stdout: bool = True,
              **env: str) -> Iterator[subprocess.Popen[bytes]]:
    """Start ``fixture`` in ``workdir`` on ``display`` with ``conf`` written to its stdin; kill it on the way out.

    ``stdout``: pipe the app's stdout to the test (the apps print a JSON line per record they write). ``env``:
    more environment variables. The app runs in a session of its own and the whole session is killed at the end,
    so a program the app started (the league night's game windows) cannot outlive the test."""
    shutil.copy(fixture, workdir / "app.py")
    shutil.copy(Path(pixel_font.__file__), workdir / "pixel_font.py")
    proc = subprocess.Popen([sys.executable, str(workdir / "app.py")], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE if stdout else None, start_new_session=True,
                            env={**os.environ, "DISPLAY": display, **env})
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(conf).encode())
    proc.stdin.close()
    try:
        yield proc
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
