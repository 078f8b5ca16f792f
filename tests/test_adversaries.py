"""The adversaries' building blocks, on the host (the VM tests run them against real tasks).

Forging must reproduce the oracle's bytes exactly, however large (an adversary that corrupts what it
forges would prove nothing), and every GUI step must become the xdotool command that would do it.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from weavegym.baselines.adversaries import FORGE_CHUNK, cli_only, forge_commands, gui_only, xdotool_command
from weavegym.envs.actions import parse_action
from weavegym.envs.task import OracleContext

SCREEN = (1280, 720)


@pytest.mark.parametrize("size", [0, 10, 3 * FORGE_CHUNK])
def test_forged_bytes_are_the_originals(tmp_path: Path, size: int) -> None:
    data = os.urandom(size)
    target = tmp_path / "deep" / "out.bin"
    script = "\n".join(c.replace("/tmp/.weavegym-forged", str(tmp_path / "stage")) for c in forge_commands(
        str(target), data))
    subprocess.run(["bash", "-e"], input=script.encode(), check=True)  # as the env sends it: on stdin
    assert target.read_bytes() == data
    assert len(forge_commands(str(target), data)) == max(1, -(-len(data) * 4 // 3 // FORGE_CHUNK)) + 1


@pytest.mark.parametrize(("action", "command"), [
    ({"kind": "click", "x": 10, "y": 20}, "DISPLAY=:0 xdotool mousemove 10 20 click 1"),
    ({"kind": "double_click", "x": 1, "y": 2}, "DISPLAY=:0 xdotool mousemove 1 2 click --repeat 2 1"),
    ({"kind": "right_click", "x": 1, "y": 2}, "DISPLAY=:0 xdotool mousemove 1 2 click 3"),
    ({"kind": "drag", "x": 1, "y": 2, "to_x": 3, "to_y": 4},
     "DISPLAY=:0 xdotool mousemove 1 2 mousedown 1 mousemove 3 4 mouseup 1"),
    ({"kind": "type", "text": "it's 你好"}, "DISPLAY=:0 xdotool type -- 'it'\"'\"'s 你好'"),
    ({"kind": "key", "keys": "ctrl+s"}, "DISPLAY=:0 xdotool key -- ctrl+s"),
    ({"kind": "scroll", "dy": 3, "x": 5, "y": 6}, "DISPLAY=:0 xdotool mousemove 5 6 click --repeat 3 5"),
])
def test_gui_steps_become_xdotool_commands(action: dict, command: str) -> None:
    assert xdotool_command(parse_action(action, SCREEN)) == command


def _oracle(_ctx: OracleContext):
    yield {"kind": "shell", "command": "echo cli"}
    yield {"kind": "click", "x": 1, "y": 2}
    yield {"kind": "wait", "seconds": 1}
    yield 'key("Return")'
    yield {"kind": "python", "code": "print(1)"}
    yield {"kind": "done"}
    yield {"kind": "shell", "command": "never reached"}


def test_cli_only_batches_gui_steps_then_forges() -> None:
    ctx = OracleContext({}, {}, SCREEN)
    steps = list(cli_only(_oracle(ctx), ctx, {"/home/user/gui.png": b"x"}, parse_action.__defaults__[0]))
    commands = [s.get("command") or s.get("code") for s in steps if isinstance(s, dict)]
    assert "xdotool" in commands[0] and "X11 handshake" in commands[0]  # the X probes come first
    assert commands[1] == "echo cli"
    assert commands[2] == "DISPLAY=:0 xdotool mousemove 1 2 click 1\nDISPLAY=:0 xdotool key -- Return"
    assert commands[3] == "print(1)"
    assert "/home/user/gui.png" in commands[-2]  # forged after the oracle's steps
    assert steps[-1] == {"kind": "done"} and "never reached" not in commands


def test_gui_only_types_cli_steps_into_a_desktop_terminal() -> None:
    ctx = OracleContext({}, {}, SCREEN)
    steps = list(gui_only(_oracle(ctx), ctx, parse_action.__defaults__[0]))
    typed = [(s.source, s.python) for s in steps if not isinstance(s, dict | str)]
    assert typed == [("echo cli", False), ("print(1)", True)]
    assert [s for s in steps if isinstance(s, dict | str)] == [
        {"kind": "click", "x": 1, "y": 2}, {"kind": "wait", "seconds": 1}, 'key("Return")', {"kind": "done"}]
