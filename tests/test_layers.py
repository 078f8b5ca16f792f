"""The import direction: each package of ``weavegym`` imports only from the layers below it.

The layers are the map in CONTRIBUTING.md. Every import counts, including those inside functions and
under ``TYPE_CHECKING``: a deferred import that goes upward is still a cycle, only hidden.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "weavegym"

# Bottom first. A package may import its own modules and any package of a lower layer; packages that
# share a layer are independent of each other.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("core", "agent"),
    ("guest_agent", "vm_images"),
    ("machine",),
    ("evaluators",),
    ("envs",),
    ("baselines", "testing", "distributed", "wrappers"),
    ("reporting", "ops"),
    ("cli", "__init__"),
)
# Narrower than its layer: the guest agent is installed alone in the guest, with the protocol only.
ONLY: dict[str, frozenset[str]] = {"guest_agent": frozenset({"guest_agent", "agent"}),
                                   "agent": frozenset({"agent"})}
LAYER_OF = {package: depth for depth, packages in enumerate(LAYERS) for package in packages}


def _package_of(module: str) -> str:
    """`weavegym.machine.backends.base` -> `machine`; `weavegym` itself -> `__init__`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, module: str) -> list[tuple[int, str]]:
    """Every weavegym module that ``path`` (module ``module``) imports, with its line, at any depth."""
    here = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = ".".join(here[:len(here) - node.level + 1])
                target = f"{base}.{node.module}" if node.module else base
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from weavegym import x` imports the subpackage x, not the root's __init__.
            if target == "weavegym":
                found[-1:] = [(node.lineno, f"weavegym.{alias.name}") for alias in node.names]
    return [(line, name) for line, name in found if name == "weavegym" or name.startswith("weavegym.")]


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def _upward(path: Path, module: str) -> list[str]:
    source = _package_of(module)
    allowed = ONLY.get(source) or {source, *(p for p, depth in LAYER_OF.items() if depth < LAYER_OF[source])}
    return [f"line {line}: {name}" for line, name in _imports(path, module) if _package_of(name) not in allowed]


def test_every_package_has_a_layer() -> None:
    packages = {_package_of(_module_name(p)) for p in _sources()}
    assert packages <= set(LAYER_OF), f"packages without a layer in LAYERS: {sorted(packages - set(LAYER_OF))}"


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_imports_point_down(path: Path) -> None:
    module = _module_name(path)
    upward = _upward(path, module)
    assert not upward, f"{module} (layer {LAYER_OF[_package_of(module)]}) imports upward: {upward}"


def test_no_lazy_reexports() -> None:
    """A module-level ``__getattr__`` is how a cycle gets hidden; the layers make it unnecessary."""
    lazy = [str(p.relative_to(PACKAGE)) for p in _sources()
            if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in ast.parse(p.read_text()).body)]
    assert not lazy


def test_the_check_sees_upward_imports(tmp_path: Path) -> None:
    """The check must be able to fail: deferred, relative and root imports that go up are all caught."""
    probe = tmp_path / "probe.py"
    probe.write_text("import weavegym\nfrom ..envs import task\n"
                     "def f():\n    from weavegym.envs.weave_env import WeaveEnv\n    return WeaveEnv\n")
    assert _upward(probe, "weavegym.evaluators.probe") == [
        "line 1: weavegym", "line 2: weavegym.envs", "line 4: weavegym.envs.weave_env"]
    probe.write_text("from weavegym.core import errors\nfrom weavegym.machine.guest_client import GuestClient\n")
    assert _upward(probe, "weavegym.guest_agent.probe") == [
        "line 1: weavegym.core", "line 2: weavegym.machine.guest_client"]
    assert _upward(probe, "weavegym.evaluators.probe") == []
