"""The wheel works without the source tree: built, installed into a clean venv, and booting a task from there.

``make`` installs editable, so nothing else would notice a file read through the repository instead of the
package (the image key, the guest's pins, fixtures), or a dependency that only the dev extras bring.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from weavegym.core.paths import default_cache_dir
from weavegym.vm_images.recipe import ImageRecipe, guest_pins

pytestmark = [pytest.mark.vm, pytest.mark.timeout(1500)]

REPO = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, timeout: float = 600, env: dict[str, str] | None = None,
         check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **(env or {})})
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {result.returncode}:\n{result.stdout[-3000:]}\n"
                             f"{result.stderr[-3000:]}")
    return result


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the built wheel and its [libvirt] extra, and nothing from this checkout."""
    root = tmp_path_factory.mktemp("wheel")
    _run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(root / "dist"), str(REPO)], root)
    [wheel] = (root / "dist").glob("weavegym-*.whl")
    _run([sys.executable, "-m", "venv", str(root / "venv")], root)
    # At this venv's grpcio/protobuf/python-xlib versions: they are part of the image key (the guest runs the
    # host's), and pip would otherwise pick the newest, so this venv would want an image of its own.
    _run([str(root / "venv/bin/pip"), "install", "-q", "--disable-pip-version-check", f"{wheel}[libvirt]",
          *guest_pins().values()], root, timeout=1200)
    return root / "venv"


def test_the_wheel_holds_the_package_and_no_source_tree(wheel_venv: Path, tmp_path: Path) -> None:
    python = str(wheel_venv / "bin/python")
    probe = _run([python, "-c", "import json, weavegym, weavegym.vm_images.recipe as r; "
                  "print(json.dumps([weavegym.__file__, weavegym.__version__, r.ImageRecipe().name, "
                  "r.ImageRecipe(profile='full').name]))"], tmp_path)
    location, version, base, full = json.loads(probe.stdout)
    assert location.startswith(str(wheel_venv)) and version != "0+unknown"
    # The same image key as this checkout's: the wheel boots the image `make image` built.
    assert (base, full) == (ImageRecipe().name, ImageRecipe(profile="full").name)
    assert _run([str(wheel_venv / "bin/weavegym"), "--version"], tmp_path).stdout.strip() == f"weavegym {version}"
    # An extra that is not installed is named in one line, not a bare ModuleNotFoundError.
    missing = _run([python, "-c", "import weavegym.reporting.report"], tmp_path, check=False)
    assert missing.returncode == 1 and "pip install 'weavegym[report]'" in missing.stderr
    assert "MissingExtraError" in missing.stderr
    # The llm baseline is importable (the runner lists it) and says what it needs when it is built.
    llm = _run([python, "-c", "from weavegym.baselines import make_policy; "
                "make_policy('llm', base_url='http://127.0.0.1:9/v1', model='m')"], tmp_path, check=False)
    assert llm.returncode == 1 and "pip install 'weavegym[llm]'" in llm.stderr


def test_the_installed_wheel_boots_and_scores_a_base_task(wheel_venv: Path, tmp_path: Path) -> None:
    """The README's `weavegym run` with the oracle, from the clean venv, on the cached base image."""
    out = tmp_path / "run"
    _run([str(wheel_venv / "bin/weavegym"), "run", "--agent", "oracle", "--tasks", "Weave-DevOps-1", "--out",
          str(out)], tmp_path, timeout=1200, env={"WEAVEGYM_CACHE_DIR": str(default_cache_dir())})
    [episode] = json.loads((out / "results.json").read_text())["episodes"]
    assert episode["status"] == "done" and episode["score"] == 1.0, episode
