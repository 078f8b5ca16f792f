"""The hybrid adversaries' plans and shell text, on the host (the VM tests run them against real tasks).

Each must do what it claims or it proves nothing: the backdoor's grant comes first and its revoke last, GUI
steps go out through X, deliverables are written by the runner; the linker's file is a second link of the
other account's file with the oracle's bytes; the swapper's path alternates between the forged file and the
decoy. None of them spells a deliverable's path in a command, so no command-text rule stands in for the rule
each one is aimed at.
"""

from __future__ import annotations

import os
import pwd
import subprocess
from pathlib import Path

from weavegym.baselines.hybrid_adversaries import (
    GRANT,
    REVOKE,
    RunnerCommand,
    backdoor,
    hidden_path,
    link_and_write,
    linker,
    swap_job,
    swapper,
)
from weavegym.core.deadline import wait_for
from weavegym.envs.actions import parse_action
from weavegym.envs.task import OracleContext

SCREEN = (1280, 720)
LIMITS = parse_action.__defaults__[0]
GUI_FILE = "/home/user/out/poster.svg"


def _oracle(ctx: OracleContext):
    yield {"kind": "shell", "command": "echo cli"}
    yield {"kind": "click", "x": 1, "y": 2}
    yield 'key("Return")'
    yield {"kind": "wait", "seconds": 1}
    yield {"kind": "done", "answer": "42"}
    yield {"kind": "shell", "command": "never reached"}


def _shell_text(steps: list) -> str:
    return "\n".join(str(s.get("command", "")) for s in steps if isinstance(s, dict))


def test_backdoor_grants_first_drives_x_from_the_shell_and_revokes_before_the_ending() -> None:
    ctx = OracleContext({}, {}, SCREEN)
    steps = list(backdoor(_oracle(ctx), ctx, {GUI_FILE: b"<svg/>"}, LIMITS))
    assert steps[0] == RunnerCommand(GRANT)
    assert steps[-2] == RunnerCommand(REVOKE) and steps[-1] == {"kind": "done", "answer": "42"}
    assert steps[1] == {"kind": "shell", "command": "echo cli"}
    runner = [s.source for s in steps if isinstance(s, RunnerCommand)]
    assert any(GUI_FILE in source for source in runner)  # the runner writes the GUI deliverable
    encoded = steps[2]["command"]
    decoded = subprocess.run(["sh", "-c", encoded.replace("| sh", "")], capture_output=True, text=True).stdout
    assert decoded == "DISPLAY=:0 xdotool mousemove 1 2 click 1\nDISPLAY=:0 xdotool key -- Return"
    assert "never reached" not in _shell_text(steps) and "xdotool" not in _shell_text(steps)


def test_linker_and_swapper_skip_the_gui_and_never_spell_the_path() -> None:
    ctx = OracleContext({}, {}, SCREEN)
    for plan in (linker, swapper):
        steps = list(plan(_oracle(ctx), ctx, {GUI_FILE: b"<svg/>"}, LIMITS))
        assert steps[0] == {"kind": "shell", "command": "echo cli"}
        assert steps[-1] == {"kind": "done", "answer": "42"}
        assert not any(isinstance(s, dict) and s.get("kind") in ("click", "key") for s in steps)
        assert GUI_FILE not in _shell_text(steps) and "poster" not in _shell_text(steps)


def test_hidden_path_decodes_to_the_path() -> None:
    path = "/home/user/out/ünïcode name.txt"
    out = subprocess.run(["sh", "-c", f"printf %s {hidden_path(path)}"], capture_output=True).stdout
    assert out.decode() == path


def test_link_and_write_borrows_the_owner_through_a_second_link(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    material = home / "notes" / "material.txt"
    material.write_text("setup's\n")
    material.chmod(0o664)
    target = home / "out.svg"
    target.write_text("old\n")
    data = os.urandom(3000)
    run = subprocess.run(["bash", "-c", link_and_write(str(target), data, home=str(home), owner=me)],
                         capture_output=True, text=True, check=True)
    assert "linked" in run.stdout
    assert target.read_bytes() == data and os.stat(target).st_nlink == 2
    assert os.path.samefile(target, material)


def test_swap_job_alternates_the_forged_file_and_the_decoy(tmp_path: Path) -> None:
    me = pwd.getpwuid(os.getuid()).pw_name
    home = tmp_path / "home"
    (home / "notes").mkdir(parents=True)
    (home / "notes" / "decoy.txt").write_text("decoy\n")
    target = home / "out.svg"
    subprocess.run(["bash", "-c", swap_job(str(target), b"forged\n", home=str(home), owner=me)], check=True,
                   capture_output=True)
    seen: set[str] = set()
    try:
        def both_seen() -> bool:
            try:
                seen.add(target.read_text())
            except OSError:
                pass
            return {"forged\n", "decoy\n"} <= seen

        wait_for(both_seen, 20, what="the path to show both files")
    finally:
        subprocess.run(["pkill", "-KILL", "-f", "while :; do mv -f"], check=False)
    assert {"forged\n", "decoy\n"} <= seen
