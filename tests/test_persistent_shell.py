"""The guest agent's long-lived shell (GuestClient.shell), through the real agent on a host Xvfb.

One bash per account keeps its state because it is one process; a command killed at its deadline (or an
`exit`) leaves the state from before it, through the stopped copy the shell forks before each command.
These tests drive the real agent over gRPC and look at real processes in /proc.
"""

from __future__ import annotations

import shlex
import threading
import time
from pathlib import Path

import pytest

from weavegym.core.deadline import wait_for
from weavegym.core.errors import AgentRequestError
from weavegym.envs.shell_session import ShellSession
from weavegym.guest_agent.persistent_shell import _alive
from weavegym.machine.guest_client import GuestClient
from weavegym.testing.local_agent import LocalAgent, LocalAgentConfig

pytestmark = pytest.mark.xvfb


@pytest.fixture()
def sh(client: GuestClient) -> GuestClient:
    client.close_shell()  # each test starts from a fresh shell
    yield client
    client.close_shell()


def _pid(path: Path) -> int:
    return int(wait_for(lambda: path.read_text().strip() if path.exists() and path.read_text().strip() else None,
                        10, what=f"a pid in {path}"))


def test_state_persists_because_it_is_one_shell(sh: GuestClient, tmp_path: Path) -> None:
    setup = (f"cd {tmp_path}; export WG_EXPORTED=one; plain=two; declare -A map=([k]=three); "
             "greet() { echo \"hi $1\"; }; alias say='echo said'; shopt -s extglob; echo $$ > shell.pid")
    first = sh.shell(setup, timeout=10)
    assert first.exit_code == 0 and not first.timed_out, first.stdout
    out = sh.shell("pwd; echo $WG_EXPORTED $plain ${map[k]}; greet you; say; shopt -q extglob && echo glob; "
                   "echo $$", timeout=10)
    assert out.stdout.splitlines() == [str(tmp_path), "one two three", "hi you", "said", "glob",
                                       (tmp_path / "shell.pid").read_text().strip()]
    py = sh.shell("import os; print(os.getcwd(), os.environ.get('WG_EXPORTED'), os.environ.get('plain'))",
                  python=True, timeout=10)
    assert py.stdout == f"{tmp_path} one None\n", "python starts in the shell's directory, with its exports"


def test_a_command_killed_at_its_deadline_leaves_the_state_before_it_and_earlier_jobs(
        sh: GuestClient, tmp_path: Path) -> None:
    sh.shell(f"cd {tmp_path}; kept=yes; sleep 300 & echo $! > early.pid", timeout=10)
    early = _pid(tmp_path / "early.pid")
    start = time.monotonic()
    out = sh.shell(f"cd /; kept=no; lost=1; sleep 301 & echo $! > {tmp_path}/late.pid; sleep 300", timeout=2)
    assert out.timed_out and out.exit_code == 124 and time.monotonic() - start < 15
    assert not out.restarted
    late = _pid(tmp_path / "late.pid")
    wait_for(lambda: not _alive(late), 10, what="the killed command's own job to die")
    assert _alive(early), "a job of an earlier command must outlive a later command's timeout"
    after = sh.shell("pwd; echo ${kept}-${lost:-unset}", timeout=10)
    assert after.stdout.splitlines() == [str(tmp_path), "yes-unset"]


def test_exit_and_exec_end_the_command_not_the_terminal(sh: GuestClient, tmp_path: Path) -> None:
    sh.shell(f"cd {tmp_path}; n=1", timeout=10)
    assert sh.shell("n=2; exit 7", timeout=10).exit_code == 7
    assert sh.shell("echo $n $PWD", timeout=10).stdout == f"1 {tmp_path}\n"
    replaced = sh.shell("exec true", timeout=10)
    assert replaced.exit_code == 255 and "the shell ended" in replaced.stdout
    assert sh.shell("kill -9 $BASHPID", timeout=10).exit_code == 255
    assert sh.shell("echo still $n", timeout=10).stdout == "still 1\n"


def test_output_is_exact_capped_and_background_output_comes_with_the_next_command(sh: GuestClient) -> None:
    text = "ünïcode ✓ \t tab\n" * 3
    assert sh.shell(f"printf %s {shlex.quote(text)}", timeout=10).stdout == text
    assert sh.shell("printf no-newline", timeout=10).stdout == "no-newline"
    big = sh.shell("head -c 3000000 /dev/zero | tr '\\0' x", timeout=30, max_output_bytes=1000)
    assert big.stdout == "x" * 1000 and big.stdout_truncated and big.stdout_total == 3_000_000
    assert sh.shell("echo err >&2; echo out", timeout=10).stdout == "err\nout\n"
    sh.shell("(sleep 0.5; echo late) &", timeout=10)
    time.sleep(1.0)  # the job's output is written while no command runs; a terminal shows it next
    assert sh.shell("echo next", timeout=10).stdout == "late\nnext\n"


def test_bad_requests_are_refused_and_change_nothing(sh: GuestClient) -> None:
    sh.shell("marker=kept", timeout=10)
    with pytest.raises(AgentRequestError, match="NUL"):
        sh.shell("echo a\x00b", timeout=10)
    with pytest.raises(AgentRequestError, match="timeout"):
        sh.shell("true", timeout=-1)
    long = "x" * 200_000
    assert sh.shell(f"v={long}; echo ${{#v}}", timeout=30).stdout == "200000\n"
    assert sh.shell("echo $marker", timeout=10).stdout == "kept\n"


def test_calls_from_two_threads_run_one_after_the_other(sh: GuestClient) -> None:
    sh.shell("count=0", timeout=10)
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(20):
                sh.shell("count=$((count + 1))", timeout=10)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors and sh.shell("echo $count", timeout=10).stdout == "40\n"


def test_close_ends_the_shell_its_copies_and_every_job(sh: GuestClient, tmp_path: Path) -> None:
    sh.shell(f"cd {tmp_path}; sleep 300 & echo $! > job.pid; echo $$ > shell.pid; x=1", timeout=10)
    job, shell = _pid(tmp_path / "job.pid"), _pid(tmp_path / "shell.pid")
    assert sh.close_shell() is True
    wait_for(lambda: not _alive(job) and not _alive(shell), 10, what="the shell and its job to die")
    assert sh.close_shell() is False
    fresh = sh.shell("echo ${x:-fresh} $PWD", timeout=10)
    assert fresh.stdout.split()[0] == "fresh" and not fresh.restarted


def test_the_env_shell_session_runs_on_it_when_persistent(sh: GuestClient, tmp_path: Path) -> None:
    session = ShellSession(sh, user="", persistent=True)
    session.shell(f"cd {tmp_path}; y=5", timeout=10)
    killed = session.shell("sleep 30", timeout=1)
    assert killed.timed_out and "the shell is still usable" in killed.text
    assert session.shell("echo $y $PWD", timeout=10).text == f"5 {tmp_path}\n"
    assert session.python("print(2 + 2)", timeout=10).text == "4\n"
    session.restart()
    assert session.shell("echo ${y:-gone}", timeout=10).text == "gone\n"


def test_a_flood_of_output_is_counted_not_kept(sh: GuestClient, agent) -> None:
    """200 MB written in one command: the reply holds the cap, the count is exact, the agent's memory stays small."""
    def agent_rss_mib() -> float:
        status = Path(f"/proc/{agent._proc.pid}/status").read_text()
        return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024

    before = agent_rss_mib()
    flood = sh.shell("head -c 200000000 /dev/zero", timeout=120, max_output_bytes=4096)
    assert flood.exit_code == 0 and flood.stdout_total == 200_000_000 and len(flood.stdout_raw) == 4096
    assert agent_rss_mib() - before < 50, "the agent must not hold what it does not send"


def test_a_killed_agents_shell_ends_with_it_and_the_next_agent_starts_fresh(xvfb) -> None:
    """The shell and its stopped copy read the agent's request pipe: when the agent dies (SIGKILL, as a crash),
    they read end-of-file and exit instead of lingering; the restarted agent's shell has a fresh state."""
    first = LocalAgent(LocalAgentConfig(display=xvfb.display)).start()
    try:
        with first.client() as c:
            c.wait_ready(20)
            shell = int(c.shell("x=1; echo $$", timeout=10).stdout)
            copy = int(c.shell("echo $(pgrep -P $$ -x bash | head -1)", timeout=10).stdout or 0)
        first.kill()
        wait_for(lambda: not _alive(shell) and not (copy and _alive(copy)), 10, what="the old shell to exit")
    finally:
        first.stop()
    with LocalAgent(LocalAgentConfig(display=xvfb.display)) as second, second.client() as c:
        c.wait_ready(20)
        assert c.shell("echo ${x:-fresh}", timeout=10).stdout == "fresh\n"


# Programs whose output and exit code a warm interpreter's child must share with a fresh `python3 -`.
SAME_AS_PYTHON3 = [
    "print('plain')",
    "raise ValueError('boom')",
    "def broken(:",
    "try:\n    1 / 0\nexcept Exception:\n    raise KeyError('chained')",
    "raise SystemExit('bye')",
    "import sys; sys.exit(3)",
    "raise KeyboardInterrupt",
    "print(input())",
    "import atexit; atexit.register(print, 'at exit')",
    "import threading, time; threading.Thread(target=lambda: (time.sleep(0.2), print('joined'))).start()",
    "import sys, __main__; print(sys.argv, repr(sys.path[0]), __name__, __file__, __main__.__spec__, "
    "__main__.__loader__, sorted(globals()))",
    "import os; print(os.getcwd(), oct(os.umask(0)), os.environ.get('WG_EXPORTED'), os.environ.get('plain'))",
    "import sys; print([m for m in ('threading', 'random', 'json') if m in sys.modules])",
]


def _warm_pid(sh: GuestClient) -> int:
    """The parent of a python call's process: the warm interpreter, unless the shell ran python3 itself."""
    return int(sh.shell("import os; print(os.getppid())", python=True, timeout=10).stdout)


def test_python_runs_in_a_warm_interpreter_exactly_as_a_fresh_python3(sh: GuestClient, tmp_path: Path) -> None:
    shell = int(sh.shell(f"cd {tmp_path}; umask 027; export WG_EXPORTED=one; plain=two; echo $$", timeout=10).stdout)
    warm = _warm_pid(sh)
    assert warm != shell, "the code must run in a child of the warm interpreter, not in a python3 the shell started"
    for code in SAME_AS_PYTHON3:
        fresh = sh.shell(f"python3 - <<'WG_END'\n{code}\nWG_END", timeout=20)
        forked = sh.shell(code, python=True, timeout=20)
        assert (forked.exit_code, forked.stdout) == (fresh.exit_code, fresh.stdout), code
    assert _warm_pid(sh) == warm, "one interpreter serves every call"
    assert "/tmp" not in sh.shell("print(1)", python=True, timeout=10).stdout


def test_python_falls_back_to_a_real_python3_where_a_fork_would_differ(sh: GuestClient, tmp_path: Path) -> None:
    shell = int(sh.shell("echo $$", timeout=10).stdout)
    assert _warm_pid(sh) != shell
    # Read by the interpreter at start-up: this call runs in a python3 of the shell's, the next in a warm
    # interpreter restarted with the new environment.
    sh.shell(f"export PYTHONPATH={tmp_path}/lib", timeout=10)
    code = f"import os, sys; print(os.getppid(), {str(tmp_path / 'lib')!r} in sys.path)"
    assert sh.shell(code, python=True, timeout=10).stdout == f"{shell} True\n"
    restarted = sh.shell(code, python=True, timeout=10).stdout.split()
    assert restarted[1] == "True" and int(restarted[0]) != shell
    sh.shell("unset PYTHONPATH", timeout=10)
    # A site directory that changed since the interpreter started (a new .pth, pip install --user). The user
    # base is this test's own, not the account's: two test runs on one host must not see each other's .pth.
    sh.shell(f"export PYTHONUSERBASE={tmp_path}/userbase", timeout=10)
    site = sh.shell("import site; print(site.getusersitepackages())", python=True, timeout=10).stdout.strip()
    assert site.startswith(f"{tmp_path}/userbase/")
    assert sh.shell("print('warm again')", python=True, timeout=10).stdout == "warm again\n"
    (tmp_path / "pth").mkdir()  # a .pth line names a folder that must exist
    sh.shell(f"mkdir -p {shlex.quote(site)} && echo {tmp_path}/pth > {shlex.quote(site)}/wg-test.pth", timeout=10)
    seen = sh.shell(f"import sys; print({str(tmp_path / 'pth')!r} in sys.path)", python=True, timeout=10)
    assert seen.stdout == "True\n"
    sh.shell("unset PYTHONUSERBASE", timeout=10)
    # A shell function named python3 runs, as it would have; `ulimit` reaches the code.
    assert sh.shell("python3() { echo the function; }", timeout=10).exit_code == 0
    assert sh.shell("print('no')", python=True, timeout=10).stdout == "the function\n"
    sh.shell("unset -f python3; ulimit -n 77", timeout=10)
    limits = sh.shell("import os, resource; print(resource.getrlimit(resource.RLIMIT_NOFILE)[0], os.getppid())",
                      python=True, timeout=10)
    assert limits.stdout == f"77 {shell}\n"


def test_python_killed_at_its_deadline_takes_what_it_started_and_keeps_the_shell(
        sh: GuestClient, tmp_path: Path) -> None:
    shell = int(sh.shell(f"cd {tmp_path}; kept=yes; echo $$", timeout=10).stdout)
    warm = _warm_pid(sh)
    start = time.monotonic()
    killed = sh.shell(f"import subprocess, time; p = subprocess.Popen(['sleep', '300']); "
                      f"open({str(tmp_path / 'job.pid')!r}, 'w').write(str(p.pid)); print('started', flush=True); "
                      "time.sleep(300)", python=True, timeout=2)
    assert killed.timed_out and killed.exit_code == 124 and time.monotonic() - start < 10
    assert killed.stdout == "started\n" and not killed.restarted
    job = _pid(tmp_path / "job.pid")
    wait_for(lambda: not _alive(job), 10, what="the process the python call started to die with it")
    after = sh.shell("echo $$ $kept $PWD", timeout=10).stdout
    assert after == f"{shell} yes {tmp_path}\n", "a python call's timeout must not touch the shell"
    assert _warm_pid(sh) == warm


def test_a_killed_warm_interpreter_costs_one_call_and_is_replaced(sh: GuestClient) -> None:
    warm = _warm_pid(sh)
    lost = sh.shell("import os, time; os.kill(os.getppid(), 9); time.sleep(30)", python=True, timeout=20)
    assert lost.exit_code == 255 and "the python process was lost" in lost.stdout and not lost.timed_out
    assert not _alive(warm)
    assert _warm_pid(sh) not in (warm, int(sh.shell("echo $$", timeout=10).stdout))
    assert sh.shell("print(6 * 7)", python=True, timeout=10).stdout == "42\n"


def test_a_shell_that_lost_its_python_handler_says_so_instead_of_skipping_the_code(sh: GuestClient) -> None:
    sh.shell("__wg_py() { :; }", timeout=10)  # a command may redefine the shell's own functions
    skipped = sh.shell("print('ran')", python=True, timeout=10)
    assert skipped.exit_code == 255 and "did not hand the python code over" in skipped.stdout
    assert "ran\n" not in skipped.stdout
