"""The warm interpreter behind the long-lived shell's ``python`` calls (run with ``python3 -c``, as an account).

A fresh ``python3`` costs about 155 ms under TCG before it runs a line, most of it the interpreter's own
start (``-S`` saves only 30 ms). This program pays that once: it starts like any ``python3 -c`` would
(same flags, ``site``, ``sys.path``), imports nothing more, and then forks a child per request. The child
takes the shell's directory, umask and exported environment, becomes ``python3 -``'s ``__main__``, runs the
code and exits through the normal interpreter shutdown (atexit handlers, thread joins, stdio flushes), so
it behaves as the fresh ``python3 -`` the shell would have started.

Where a fork could differ from a fresh start, the program says ``fallback`` instead and the shell starts a
real ``python3``: when a variable read at start-up (``PYTHON*``, ``LC_*``, ``LANG``, ``HOME``) differs,
when ``python3`` on the shell's ``PATH`` is another interpreter, or when a site directory changed since this
program started (``pip install --user``, a new ``.pth``). One thing is shared by every child: the hash seed
of ``str`` and ``bytes``, drawn once at start-up.

Protocol, on two pipes whose numbers are the arguments: a request is ``<length>\\n`` and then that many
bytes, NUL-separated fields ``cwd, umask (octal), code, NAME=value...``. Replies are lines: ``ready`` once at
start, then per request ``pid <child>`` and ``exit <code>`` (``128 + signal`` for a killed child, as a shell
reports it) or ``fallback <reason>``. Nothing here may import a module that a fresh interpreter would not
have: the children would inherit it.
"""

import os
import sys

# Read by the interpreter while it starts, so a child cannot take a new value from its environment.
_STARTUP_VARIABLES = ("LANG", "HOME")
_STARTUP_PREFIXES = ("PYTHON", "LC_")


def _startup_view(env):
    return {k: v for k, v in env.items() if k in _STARTUP_VARIABLES or k.startswith(_STARTUP_PREFIXES)}


def _site_dirs():
    import site  # imported at start-up already (no -S): this costs nothing and adds nothing
    dirs = [*site.getsitepackages(), site.getusersitepackages()]
    stamps = []
    for d in dirs:
        try:
            stamps.append((d, os.stat(d).st_mtime_ns))
        except OSError:
            stamps.append((d, None))
    return stamps


def _interpreter_key(path):
    # Its folder resolved, not the file: a venv's bin/python3 links to the system's, and is another interpreter.
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def _which_python3(path):
    for d in path.split(os.pathsep):
        candidate = os.path.join(d or ".", "python3")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return _interpreter_key(os.path.abspath(candidate))
    return None


def _read_exactly(fd, n):
    chunks = []
    while n > 0:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def _read_line(fd):
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            raise EOFError
        line += byte
    return line[:-1]


def _why_not(env, start_env, start_sites, executable):
    if _startup_view(env) != _startup_view(start_env):
        return "env"
    if _which_python3(env.get("PATH", "")) != executable:
        return "interpreter"
    if _site_dirs() != start_sites:
        return "site"
    return ""


def _serve(requests, replies):
    """Fork a child per request and report on it; returns only in a child, with what it must run."""
    start_env, start_sites = dict(os.environ), _site_dirs()
    executable = _interpreter_key(sys.executable)
    os.write(replies, b"ready\n")
    while True:
        try:
            payload = _read_exactly(requests, int(_read_line(requests)))
        except (EOFError, ValueError):
            os._exit(0)  # the agent closed the pipe (or broke the protocol): nothing more to serve
        cwd, umask, code, *entries = payload.split(b"\0")
        env = dict(os.fsdecode(e).partition("=")[::2] for e in entries if b"=" in e)
        reason = _why_not(env, start_env, start_sites, executable)
        if reason:
            os.write(replies, b"fallback " + reason.encode() + b"\n")
            continue
        pid = os.fork()
        if pid == 0:
            os.close(requests)
            os.close(replies)
            return os.fsdecode(cwd), int(umask, 8), code.decode("utf-8", "surrogateescape"), env
        os.write(replies, b"pid %d\n" % pid)
        _, status = os.waitpid(pid, 0)
        code_out = os.waitstatus_to_exitcode(status)
        os.write(replies, b"exit %d\n" % (128 - code_out if code_out < 0 else code_out))


def _become_python3_stdin(cwd, umask, env):
    """The child's set-up: what ``python3 -`` started by the shell would have had."""
    os.setpgid(0, 0)  # a group of its own: the agent kills it (and what it started) at the deadline
    os.umask(umask)
    try:
        os.chdir(cwd)
    except OSError:
        pass  # the shell's directory is gone; python3 would have started in it all the same
    os.environ.clear()
    os.environ.update(env)
    import time  # a built-in module: tzset makes localtime follow the shell's TZ
    time.tzset()
    sys.argv[:] = ["-"]
    main = type(sys)("__main__")
    main.__dict__.update(__file__="<stdin>", __cached__=None, __loader__=sys.modules["__main__"].__loader__,
                         __spec__=None, __package__=None, __annotations__={}, __builtins__=__builtins__)
    sys.modules["__main__"] = main
    return main


def _run(code, main):
    try:
        exec(compile(code, "<stdin>", "exec"), main.__dict__)
    except SystemExit:
        raise
    except BaseException as exc:  # reported as the interpreter would, without this program's frames
        tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
        sys.excepthook(type(exc), exc.with_traceback(tb), tb)  # the hook prints the exception's own traceback
        if isinstance(exc, KeyboardInterrupt):
            import signal
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        sys.exit(1)


if __name__ == "__main__":
    _cwd, _umask, _code, _env = _serve(int(sys.argv[1]), int(sys.argv[2]))
    _main = _become_python3_stdin(_cwd, _umask, _env)
    del _cwd, _umask, _env
    _run(_code, _main)
