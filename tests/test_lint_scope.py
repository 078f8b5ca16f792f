"""ruff (``make lint``) reads every source file of the package, not just the ones outside the card's folders.

The top-level folders ``envs/``, ``evaluators/``... are symlinks into ``weavegym/``; they are excluded so files
are not linted twice. An unanchored exclude ("envs") once matched ``weavegym/envs`` too and hid five
layers from the linter.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_ruff_reads_every_package_module_except_the_generated_stubs() -> None:
    ruff = Path(sys.executable).with_name("ruff")
    listed = subprocess.run([str(ruff), "check", "--show-files", "."], cwd=REPO, capture_output=True, text=True,
                            check=True).stdout
    seen = {Path(line.strip()).resolve() for line in listed.splitlines() if line.strip().endswith(".py")}
    wanted = {p.resolve() for p in (REPO / "weavegym").rglob("*.py") if "_pb2" not in p.name}
    missing = sorted(str(p.relative_to(REPO)) for p in wanted - seen)
    assert not missing, f"ruff skips {len(missing)} modules, e.g. {missing[:5]}"
    assert not any("_pb2" in p.name for p in seen), "the generated stubs are not ours to lint"
