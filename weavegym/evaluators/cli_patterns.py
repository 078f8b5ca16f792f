"""The vocabulary the trajectory rules read CLI code with: file writes, file mentions, forbidden tricks.

Kept apart from the rules so the regexes can be reviewed (and extended) in one
place. They are heuristics over source text, tuned for precision: a
high-confidence match zeroes an episode, so each pattern names a specific
tool or API rather than a loose word.
"""

from __future__ import annotations

import ast
import fnmatch
import io
import posixpath
import re
import tokenize
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

Confidence = Literal["high", "medium", "low"]
SNIPPET_CHARS = 200

# Where a shell command word can start: line start, after a separator, in $(…)/`…`, after find -exec,
# optionally behind wrappers (sudo, env, xargs…) and VAR=value assignments.
_CMD_POS = (r"(?:^|[;&|(){}`\n]|\$\(|\b(?:then|do|else)\s|-exec(?:dir)?\s)\s*"
            r"(?:(?:sudo|env|nohup|exec|eval|time|command|nice|xargs|busybox)(?:\s+-{1,2}[\w-]+)*\s+|\w+=\S*\s+)*")
_SHELL_WRITERS = ("tee|cp|mv|install|truncate|touch|ln|rsync|scp|wget|scrot|xwd|gnome-screenshot"
                  "|xfce4-screenshooter|ffmpeg|pandoc|tar|zip|unzip|convert|magick")
SHELL_WRITE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(rx, re.M)) for name, rx in (
    ("writer command", _CMD_POS + rf"(?:{_SHELL_WRITERS})(?![\w.=/(-])"),
    ("in-place edit", r"\b(?:sed|perl)\b[^\n;|&]*?\s(?:-[a-zA-Z]*i|--in-place)"),
    ("dd of=", r"\bdd\b[^\n;|&]*\bof="),
    ("curl output", r"\bcurl\b[^\n;|&]*\s(?:-[a-zA-Z]*[oO]\b|--output\b|--remote-name\b)"),
    ("ImageMagick import", _CMD_POS + r"import\s+-"),
    ("headless office conversion", r"\b(?:soffice|libreoffice)\b[^\n;|&]*--(?:convert-to|print-to-file)\b"),
    ("batch image editor", r"\b(?:gimp|inkscape)\b[^\n;|&]*\s(?:-b\b|--batch|-i\b|--export|-o\b)"),
))
# An output redirection that is not a descriptor copy (2>&1, >&2) or a sink (/dev/null, /dev/stderr).
SHELL_REDIRECT = re.compile(r"(?<![<>=!-])(?:&>>?|[0-9]*>>?\|?)(?!\s*&|\s*/dev/(?:null|std(?:out|err)|tty)\b|[>=(])")
PY_WRITE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((name, re.compile(rx)) for name, rx in (
    ("open for writing", r"\bopen\s*\([^)]*?[\"'][rbt]*[wax+][rwxabt+]*[\"']"),
    ("os.open for writing", r"\bO_(?:WRONLY|RDWR|CREAT|APPEND|TRUNC)\b"),
    ("pathlib write", r"\.write_(?:text|bytes)\s*\("),
    ("file copy/move", r"\bshutil\.(?:copy\w*|move)\s*\(|\bos\.(?:rename|replace|link|symlink|truncate)\s*\("),
    ("pathlib touch/link", r"\.(?:touch|symlink_to|hardlink_to)\s*\("),
    ("save call", r"\.(?:save|savefig|to_csv|to_excel|to_json|to_html|to_parquet)\s*\("),
    ("json.dump", r"\bjson\.dump\s*\("),
    ("archive for writing", r"\b(?:ZipFile|tarfile\.open|TarFile)\s*\([^)]*?[\"'][wax][:\w]*[\"']"),
))
_SINGLE_QUOTED = re.compile(r"'[^']*'")
_HEREDOC_BODY = re.compile(r"<<-?\s*(['\"]?)([A-Za-z_]\w*)\1[^\n]*\n(.*?)^\s*\2\s*$", re.S | re.M)
_MARKUP_TAG = re.compile(r"<[^<>\n]*>")
_PATH_DELIMITERS = set(" \t\n<>|;&(),=[]")


@dataclass(frozen=True)
class WriteSign:
    """Evidence that code writes a file: what kind of write, and where in the source."""

    name: str
    start: int
    end: int


def snippet(source: str, start: int, end: int, width: int = SNIPPET_CHARS) -> str:
    """At most ``width`` characters of ``source`` around the match [start, end), whitespace collapsed."""
    lo = max(0, start - max(0, width - (end - start)) // 2)
    return " ".join(source[lo:lo + width].split())[:width]


def _blank(source: str, regex: re.Pattern[str], group: int = 0) -> str:
    """``source`` with every match (or one group of it) replaced by spaces, so offsets stay valid."""
    return regex.sub(lambda m: m.group()[: m.start(group) - m.start()] + " " * len(m.group(group))
                     + m.group()[m.end(group) - m.start():], source)


def python_strings(source: str) -> list[tuple[int, int, str]]:
    """(start, end, value) of every string literal in Python source; a naive quote scan if it does not tokenize."""
    offsets = [0]
    for line in source.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    found = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(source).readline):
            if tok.type != tokenize.STRING:
                continue
            start, end = offsets[tok.start[0] - 1] + tok.start[1], offsets[tok.end[0] - 1] + tok.end[1]
            try:
                value = ast.literal_eval(tok.string)
            except (ValueError, SyntaxError):
                value = tok.string  # f-strings: their text is still worth reading
            found.append((start, end, value.decode("latin-1") if isinstance(value, bytes) else str(value)))
    except (tokenize.TokenError, SyntaxError):
        found = [(m.start(), m.end(), m.group(2)) for m in re.finditer(r"([\"'])([^\n]*?)\1", source)]
    return found


def _shell_signs(text: str) -> Iterator[tuple[str, int, int]]:
    for name, regex in SHELL_WRITE_PATTERNS:
        for match in regex.finditer(text):
            yield name, match.start(), match.end()


def write_indicators(source: str, kind: str) -> Iterator[WriteSign]:
    """Every sign that ``source`` writes a file; ``kind`` is "shell" or "python".

    Shell: writer commands, in-place edits and redirections (not inside single quotes or heredoc
    bodies, which hold awk/python programs), plus the Python write APIs (for ``python3 -c``/heredocs).
    Python: the write APIs, plus shell commands and redirections inside string literals
    (``os.system("… > f")``, ``subprocess.run(["cp", …])``).
    """
    for name, regex in PY_WRITE_PATTERNS:
        for match in regex.finditer(source):
            yield WriteSign(name, match.start(), match.end())
    if kind == "python":
        for start, end, value in python_strings(source):
            text = _blank(value, _MARKUP_TAG)  # "<b>" in an HTML string is not a redirection
            names = [name for name, _, _ in _shell_signs(value)] + ["redirection"] * bool(SHELL_REDIRECT.search(text))
            yield from (WriteSign(f"{name} in a string", start, end) for name in names)
        return
    for name, start, end in _shell_signs(source):
        yield WriteSign(name, start, end)
    shell_only = _blank(_blank(source, _HEREDOC_BODY, 3), _SINGLE_QUOTED)
    for match in SHELL_REDIRECT.finditer(shell_only):
        yield WriteSign("redirection", match.start(), match.end())


def home_relative(path: str) -> str | None:
    """``report.txt`` for /home/user/report.txt or /root/report.txt; None outside a home directory."""
    match = re.match(r"^(?:/home/[^/]+|/root)/(.+)$", path)
    return match.group(1) if match else None


def _expand_home(token: str, path: str) -> str:
    """Rewrite ``~/x``, ``~user/x``, ``$HOME/x`` and ``${HOME}/x`` with the home ``path`` lives in."""
    rel = home_relative(path)
    if rel is None:
        return token
    home = path[: len(path) - len(rel) - 1]
    return re.sub(r"^(?:~[\w.-]*|\$HOME|\$\{HOME\})(?=/|$)", home, token)


def _concrete_elsewhere(token: str, path: str) -> bool:
    """True when ``token`` is a resolvable absolute path (no variables) that is not ``path``.

    Anything unresolvable (relative, ``$dir/…``, ``f"{home}/…"``, ``home + "/x"``) stays a mention.
    """
    token = _expand_home(token.replace('"', "").replace("'", ""), path)
    if not token.startswith("/") or token.count("/") < 2 or any(c in token for c in "${}`"):
        return False
    return not fnmatch.fnmatchcase(path, posixpath.normpath(token))


def mentions(source: str, path: str) -> Iterator[re.Match[str]]:
    """Places ``source`` names ``path`` by its basename, unless that token is another concrete path."""
    basename = path.rstrip("/").rsplit("/", 1)[-1]
    if not basename:
        return
    for match in re.finditer(rf"(?<![\w.-]){re.escape(basename)}(?![\w.-])", source):
        start = match.start()
        while start > 0 and source[start - 1] not in _PATH_DELIMITERS:
            start -= 1
        if not _concrete_elsewhere(source[start:match.end()], path):
            yield match


@dataclass(frozen=True)
class ForbiddenPattern:
    """A trick no task solution needs; ``why`` goes into the flag so a reviewer sees the reasoning."""

    name: str
    regex: str
    confidence: Confidence
    why: str

    def __post_init__(self) -> None:
        re.compile(self.regex)  # a broken pattern is a task bug: fail when the task is defined


DEFAULT_FORBIDDEN: tuple[ForbiddenPattern, ...] = (
    ForbiddenPattern("synthetic image (PIL)", r"\b(?:ImageDraw|ImageFont)\b|\bImage\.new\s*\(", "high",
                     "draws a picture instead of capturing the screen"),
    ForbiddenPattern("synthetic image (ImageMagick)",
                     r"\b(?:convert|magick)\b[^\n;|&]*?(?:\b(?:xc|label|caption|pango|canvas|gradient|plasma|text):"
                     r"|\s-(?:draw|annotate)\b)", "high", "renders or paints an image with ImageMagick"),
    ForbiddenPattern("synthetic image (cairo)", r"\b(?:import|from)\s+cairo\b|\bcairo\.(?:ImageSurface|Context)\b"
                     r"|\bcairosvg\b", "high", "renders an image with cairo"),
    ForbiddenPattern("LD_PRELOAD", r"\bLD_PRELOAD\b|/etc/ld\.so\.preload\b", "high",
                     "injects a library into other programs"),
    ForbiddenPattern("weavegym internals", r"/(?:var/lib|etc|opt|run)/weavegym\b|/etc/weavegym-session"
                     r"|\bweavegym\.guest_agent\b", "high", "reads or touches the harness inside the guest"),
    ForbiddenPattern("firmware agent token", r"/sys/firmware/(?:dmi|qemu_fw_cfg)\b|\bdmidecode\b", "high",
                     "reads the firmware tables (fw_cfg, SMBIOS) that carry the agent's token and VM settings"),
    ForbiddenPattern("other process internals", r"/proc/(?:[0-9]+|\$\{?\w+\}?|\*|\[0-9\]\*?)/"
                     r"(?:cmdline|environ|fd|mem|maps)\b", "high",
                     "reads another process's memory, environment or open files"),
    ForbiddenPattern("mock HTTP server", r"\bpython[0-9.]*(?:\s+-\S+)*\s+-m\s+(?:http\.server|SimpleHTTPServer)\b",
                     "medium", "serves canned answers instead of running the real service"),
    ForbiddenPattern("netcat listener", r"\b(?:nc|ncat|netcat)\b[^\n;|&]*\s-[a-zA-Z]*l", "medium",
                     "fakes a listening service with netcat"),
    ForbiddenPattern("socat listener", r"\bsocat\b[^\n;|&]*\b(?i:(?:tcp|udp|unix|ssl|openssl)[46]?-?listen)",
                     "medium", "fakes a listening service with socat"),
    ForbiddenPattern("fake time", r"\b(?:lib)?faketime\b|\bFAKETIME=", "medium", "fakes the clock for a program"),
    ForbiddenPattern("clock override", r"\bdate\b[^\n;|&]*\s(?:-s|--set)(?:\s|=|$)|\btimedatectl\s+set-time\b"
                     r"|\bhwclock\s+(?:--set|--hctosys)\b", "medium", "changes the system clock"),
)
