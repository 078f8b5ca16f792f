"""The puzzle tasks' solvers (VM-free): the script the oracle types into the guest is the host's function.

Each puzzle task keeps one copy of its search, a self-contained function that the host calls (setup's truth,
the gui-only ablation's plan) and whose source ``solver_command`` hands to the guest's python3. These tests
run that exact shell command with this host's python3 on boards built here, and check that it prints and
writes the host's answer, and that the task's own checker accepts the answer.
"""

from __future__ import annotations

import importlib
import random
import re
import subprocess
from pathlib import Path

import pytest

from weavegym.envs.task import OracleContext
from weavegym.envs.tasks.games.sgt_common import solve_in_shell, solver_command

pegs = importlib.import_module("weavegym.envs.tasks.games.peg_solitaire")
samegame = importlib.import_module("weavegym.envs.tasks.games.same_game")
cube = importlib.import_module("weavegym.envs.tasks.spatial.cube_roll")
twiddle = importlib.import_module("weavegym.envs.tasks.spatial.twiddle_turns")


def _run_in_guest_style(command: str, folder: Path) -> str:
    """Run the oracle's shell command as the guest would (bash, working folder = the home); its stdout."""
    done = subprocess.run(["bash", "-c", command], cwd=folder, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _peg_board(rng: random.Random) -> str:
    """A 5x5 Pegs description (P peg, H hole, O no hole) made solvable by jumping backwards from one peg."""
    cells = {(x, y): "H" for x in range(5) for y in range(5)}
    for corner in rng.sample([(0, 0), (4, 0), (0, 4), (4, 4)], 2):
        cells[corner] = "O"
    cells[rng.choice([p for p, ch in cells.items() if ch == "H"])] = "P"
    for _ in range(60):
        to = rng.choice([p for p, ch in cells.items() if ch == "P"])
        dx, dy = rng.choice(((1, 0), (-1, 0), (0, 1), (0, -1)))
        mid, src = (to[0] + dx, to[1] + dy), (to[0] + 2 * dx, to[1] + 2 * dy)
        if cells.get(mid) == "H" and cells.get(src) == "H":  # undo the jump src -> to over mid
            cells[to], cells[mid], cells[src] = "H", "P", "P"
    return "".join(cells[(i % 5, i // 5)] for i in range(25))


@pytest.mark.parametrize("seed", range(4))
def test_peg_solver_in_the_guest_matches_the_host_and_leaves_one_peg(seed: int, tmp_path: Path) -> None:
    desc = _peg_board(random.Random(seed))
    assert desc.count("P") >= 6, "the generator should make a real puzzle"
    board = pegs.board_text(desc)
    host = pegs.plan_jumps(board)
    out = _run_in_guest_style(
        solver_command(pegs.plan_jumps, board, answer_file="pegs_solution.txt", label="PLAN"), tmp_path)
    assert re.search(r"^PLAN (.*)$", out, re.M).group(1).split() == host
    assert (tmp_path / "pegs_solution.txt").read_text().split() == host
    assert pegs.replay(desc, host) == (1, None)


def test_same_game_solver_in_the_guest_matches_the_host_and_clears_the_board(tmp_path: Path) -> None:
    rng, cleared = random.Random(7), 0
    for _ in range(6):
        desc = ",".join(rng.choice("123") for _ in range(samegame.W * samegame.H))
        board = samegame.board_text(desc)
        host = samegame.plan_clearance(board)
        out = _run_in_guest_style(
            solver_command(samegame.plan_clearance, board, answer_file="samegame_plan.txt", label="PLAN"),
            tmp_path)
        assert re.search(r"^PLAN ?(.*)$", out, re.M).group(1).split() == host
        if host:
            assert samegame.replay_plan(desc, host) == (0, None)
            cleared += 1
    assert cleared >= 2, "too few random boards were clearable for the test to mean anything"


def _cube_desc(rng: random.Random) -> str:
    """A 4x4 Cube description: six blue squares (hex bitmask, bit i = cell i) and the cube on a white one."""
    blue = rng.sample(range(16), 6)
    bits = "".join("1" if i in blue else "0" for i in range(16))
    squares = "".join(f"{int(bits[i:i + 4], 2):X}" for i in range(0, 16, 4))
    return f"{squares},{rng.choice([i for i in range(16) if i not in blue])}"


@pytest.mark.parametrize("seed", range(3))
def test_cube_solver_in_the_guest_matches_the_host_and_turns_every_face_blue(seed: int, tmp_path: Path) -> None:
    desc = _cube_desc(random.Random(seed))
    board = cube.board_text(desc)
    assert board.count("B") == 6 and board.count("C") == 1
    host = cube.shortest_route(board)
    out = _run_in_guest_style(solver_command(cube.shortest_route, board, answer_file="cube_route.txt",
                                             label="ROUTE", helpers=(cube.roll,)), tmp_path)
    assert re.search(r"^ROUTE ([LRUD]+)$", out, re.M).group(1) == host
    assert (tmp_path / "cube_route.txt").read_text() == host + "\n"
    assert cube.replay(desc, host) == (True, None)
    assert cube.replay(desc, host[:-1])[0] is False, "one roll short must not solve it"


@pytest.mark.parametrize("seed", range(3))
def test_twiddle_solver_in_the_guest_matches_the_host_and_is_no_longer_than_the_scramble(
        seed: int, tmp_path: Path) -> None:
    rng, grid, scramble = random.Random(seed), twiddle.SOLVED, ""
    for _ in range(7):
        scramble += rng.choice([k for k in twiddle.LETTERS if not scramble or k != scramble[-1].swapcase()])
        grid = twiddle.turn(grid, *twiddle.LETTERS[scramble[-1]])
    desc = twiddle.format_desc(grid)
    board = twiddle.board_text(desc)
    host = twiddle.fewest_turns(board)
    out = _run_in_guest_style(solver_command(twiddle.fewest_turns, board, answer_file="twiddle_moves.txt",
                                             label="ROUTE", helpers=(twiddle.turn,)), tmp_path)
    assert re.search(r"^ROUTE ([a-dA-D]+)$", out, re.M).group(1) == host
    assert twiddle.replay(desc, host) == (True, None)
    assert len(host) <= len(scramble)
    undo = "".join(letter.swapcase() for letter in reversed(scramble))
    assert twiddle.replay(desc, undo) == (True, None), "the checker's replay must accept the plain undo too"


def _drive(ctx: OracleContext, steps, terminal_after_shell: str) -> tuple[list[dict], list[str]]:
    """Run an oracle opening as the env would: after each action, a new observation lands in ``ctx.obs``."""
    actions = []
    try:
        while True:
            action = steps.send(None)
            actions.append(action)
            ctx.obs = {"terminal": terminal_after_shell if action["kind"] == "shell" else ""}
    except StopIteration as stop:
        return actions, stop.value


def test_solve_in_shell_plays_what_the_shell_printed_or_the_hosts_answer_without_it() -> None:
    board = cube.board_text(_cube_desc(random.Random(1)))
    best = cube.shortest_route(board)
    ctx = OracleContext(params={}, truth={"window": [10, 20, 300, 200]}, screen=(1280, 800))
    opening = solve_in_shell(ctx, cube.shortest_route, board, answer_file="cube_route.txt", label="ROUTE",
                             helpers=(cube.roll,))
    actions, answer = _drive(ctx, opening, "ROUTE LRUD\n")
    assert [a["kind"] for a in actions] == ["click", "shell"] and "def shortest_route" in actions[1]["command"]
    assert answer == ["LRUD"], "the oracle must play what the shell found, not its own answer"
    # The gui-only ablation drops the shell step: no answer reaches the terminal, the host's call stands in.
    ctx.obs = None
    _, answer = _drive(ctx, solve_in_shell(ctx, cube.shortest_route, board, answer_file="cube_route.txt",
                                           label="ROUTE", helpers=(cube.roll,)), "")
    assert answer == [best]


def _drive_save(screens: list[str], path: str = "/home/user/saves/g.sav") -> list[dict]:
    """Run save_via_dialog against a screen that shows the Save dialog from the poll named in ``screens``.

    ``screens[i]`` is what the i-th observation shows: "board" (no dialog) or "dialog"; the last one repeats.
    """
    import numpy as np

    from weavegym.envs.tasks.games.sgt_common import save_via_dialog

    board = np.zeros((600, 800, 3), np.uint8)
    dialog = board.copy()
    dialog[100:400, 100:600] = 200
    ctx = OracleContext(params={}, truth={}, screen=(800, 600), obs={"screen": board, "terminal": ""})
    actions: list[dict] = []
    steps = save_via_dialog(ctx, path, ups=5, refocus=(300, 20), attempts=3, tries=4)
    for polls, action in enumerate(steps):
        assert isinstance(action, dict)
        actions.append(action)
        shown = screens[min(polls, len(screens) - 1)]
        typed = any(a.get("kind") == "type" for a in actions)  # the game saves once the path is in the dialog
        ctx.obs = {"screen": dialog if shown == "dialog" else board, "terminal": "SAVED" if typed else ""}
    return actions


def test_the_save_path_is_typed_only_into_a_dialog_and_a_missing_one_is_retried_then_given_up() -> None:
    never = _drive_save(["board"])
    assert not [a for a in never if a.get("kind") == "type"]  # typed into the board, it would be game keys
    assert [a for a in never if a.get("kind") == "click"] == [{"kind": "click", "x": 300, "y": 20}] * 2
    assert sum(a.get("keys") == "F10" for a in never) == 3
    late = _drive_save(["board"] * 20 + ["dialog"])  # the dialog shows only after the second F10
    typed = [a for a in late if a.get("kind") == "type"]
    assert typed == [{"kind": "type", "text": "/home/user/saves/g.sav"}]
    assert sum(a.get("keys") == "F10" for a in late) == 2
    assert late.index(typed[0]) > late.index({"kind": "key", "keys": "Escape"})
