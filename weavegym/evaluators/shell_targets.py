"""Which file a shell command writes: so reading a GUI-made file on the CLI is not mistaken for forging it.

``GuiArtifactViaCli`` used to flag any shell action that named a protected file
and wrote *anything*. A legitimate agent that exports a GUI-edited picture with
``convert edited.png out.jpg`` or lists an office file with ``unzip -l`` then
scored 0, which is a false negative reward for correct work. This module narrows
the judgement to the simple command that names the file and asks whether that
file is the command's *target*: the word after a redirection, the destination
of ``cp``/``convert``, an operand of ``tee``/``touch``/``sed -i``.

It stays conservative where shell is too dynamic to read: Python write APIs
anywhere in the action, and writers whose targets are hard to tell apart
(``mv``, ``tar``, ``rsync`` options, downloads), still count as writing every
file the command names.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from weavegym.evaluators.cli_patterns import (
    _HEREDOC_BODY,
    _SINGLE_QUOTED,
    PY_WRITE_PATTERNS,
    SHELL_REDIRECT,
    SHELL_WRITE_PATTERNS,
    WriteSign,
    _blank,
    write_indicators,
)

# The last operand is the destination; the others are only read.
_DESTINATION_LAST = frozenset(("cp", "install", "ln", "scp", "convert", "magick"))
# Every operand may be written.
_ALL_OPERANDS = frozenset(("tee", "touch", "truncate"))
# unzip only writes with none of these; otherwise the first operand is the archive it reads.
_UNZIP_READ_ONLY = re.compile(r"^-[a-zA-Z]*[lptvzZ]")
_SEPARATORS = re.compile(r"\|\||&&|[;|&\n]|\$\(|`|\)")


@dataclass(frozen=True)
class Segment:
    """One simple command of a shell action: its span in the source and its text."""

    start: int
    end: int
    text: str


def segment_around(source: str, start: int, end: int) -> Segment:
    """The simple command containing source[start:end], split at ; | & && || newlines and $( ` ).

    Separators inside single quotes or heredoc bodies (awk programs, Python) do not split.
    """
    blanked = _blank(_blank(source, _HEREDOC_BODY, 3), _SINGLE_QUOTED)
    lo = max((m.end() for m in _SEPARATORS.finditer(blanked, 0, start)), default=0)
    after = _SEPARATORS.search(blanked, end)
    hi = after.start() if after else len(source)
    return Segment(lo, hi, source[lo:hi])


_WORD = re.compile(r"""(?:"(?:\\.|[^"\\])*"|'[^']*'|\\.|[^\s"'\\])+""")
_REDIRECT_WORD = re.compile(r"^(?:[0-9]*|&)[<>]")


def _operands(text: str) -> list[tuple[str, int, int]]:
    """Raw words of ``text`` that are operands: (word without quotes, start, end); options and redirections dropped."""
    found, skip_next = [], False
    for match in _WORD.finditer(text):
        raw = match.group()
        if skip_next:
            skip_next = False
            continue
        if _REDIRECT_WORD.match(raw):
            skip_next = raw.rstrip("0123456789&") in (">", ">>", "<", "&>", "&>>", ">|")  # target is the next word
            continue
        word = raw.replace('"', "").replace("'", "")
        if not word.startswith("-"):
            found.append((word, match.start(), match.end()))
    return found


def _redirect_targets(seg: Segment) -> Iterator[tuple[int, int, WriteSign]]:
    """(start, end) spans of the words written by the segment's output redirections."""
    blanked = _blank(seg.text, _SINGLE_QUOTED)
    for match in SHELL_REDIRECT.finditer(blanked):
        rest = seg.text[match.end():]
        word = re.match(r"\s*(\"[^\"]*\"|'[^']*'|[^\s;|&<>]+)", rest)
        if word is None:
            continue
        lo = seg.start + match.end() + word.start(1)
        yield lo, lo + len(word.group(1)), WriteSign("redirection", seg.start + match.start(), seg.start + match.end())


def _operands_written(seg: Segment, args_at: int, command: str) -> list[tuple[int, int]] | None:
    """Source spans of the operands ``command`` writes (None: treat every word of the segment as written)."""
    tail = seg.text[args_at - seg.start:]
    operands = _operands(tail)
    spans = [(args_at + lo, args_at + hi) for _w, lo, hi in operands]
    if command in _ALL_OPERANDS:
        return spans
    if command in _DESTINATION_LAST:
        return spans[-1:]
    if command == "unzip":
        if any(_UNZIP_READ_ONLY.match(w.replace('"', "")) for w in _WORD.findall(tail)):
            return []
        return spans[1:]  # the archive is read; named members are extracted (written)
    return None


@dataclass(frozen=True)
class WriteJudgement:
    """Whether an action writes a protected file, with the evidence (``sign`` is None for a read)."""

    sign: WriteSign | None


_ASSIGNED = re.compile(r"(?:^|\s)(?:export\s+|local\s+|readonly\s+|declare\s+(?:-\w+\s+)*)?\w+=\S*$|\bfor\s+\w+\s+in\b")
_EXECUTES_INPUT = re.compile(r"^\s*\|\s*(?:sudo\s+)?(?:xargs|sh|bash|dash|zsh|parallel|while|source|\.)\b")


# The mention is in the word after a lone '<' (not '<<' or '<<<', whose words are text, nor '<>', which opens for
# writing too); ``before`` ends with that word's start ('~/', '"$HOME/', ...) when the mention is a basename.
# `case` and `esac` where a command starts (a frame's start, after ; & | ( or a newline, or then/do/else), so that
# `echo case` is not one.
_CASE_KEYWORD = re.compile(r"(?:case|esac)(?![\w.-])")
_COMMAND_START = re.compile(r"(?:^|[;&|(\n{]|(?:^|\s)(?:then|do|else))\s*$")
_READ_FROM = re.compile(r"(?:^|[^<])\d*<\s*[\"']?[^\s\"'<>|;&()]*$")


# A $(…) whose output cannot be a file's name: stat with a format that prints no name (%n, %N), or a digest or count
# cut down to its first field. Whatever it prints (digits, a hash, a mode) is text, so the name inside it is only
# read (``echo "size $(stat -c %s ~/part.stl)" >> bill.txt`` is how anyone records a size).
_NO_NAME_OPERANDS = r"(?P<operands>[^|;&<>`()\n]+?)"
_NAMELESS_OUTPUT = (
    re.compile(r"^stat\s+(?:-L\s+)?(?:-c\s*|--format=|--printf=)(?P<format>'[^']*'|\"[^\"]*\"|[^\s'\"]+)\s+"
               + _NO_NAME_OPERANDS + r"$"),
    re.compile(r"^(?:sha(?:1|224|256|384|512)sum|md5sum|b2sum|wc\s+-[clmw]+)\s+" + _NO_NAME_OPERANDS
               + r"\s*\|\s*(?:cut\s+-d\s*(?:' '|\" \"|\\ )\s*-f\s*1|cut\s+-c\s*1-\d+|awk\s+'\{\s*print\s+\$1\s*\}')$"),
)


def _substitution_body(source: str, pos: int) -> str | None:
    """The text of the innermost $(…) or `…` around ``source[pos]``, or None when it is in none.

    Quotes are tracked per nesting level (a $(…) inside double quotes starts a fresh quoting context); a plain
    ( … ) subshell, a $(( … )) or a case pattern's ``)`` inside a substitution does not close it. An unclosed one
    runs to the end.
    """
    # closer, body start, open quote, is a substitution, open `case` commands
    frames: list[list[Any]] = [[None, 0, "", False, 0]]
    target: int | None = None  # the index in frames of the substitution around pos, once pos is passed
    i = 0
    while i < len(source):
        if i >= pos and target is None:
            target = max((depth for depth, frame in enumerate(frames) if frame[3]), default=-1)
            if target < 0:
                return None
        c, top = source[i], frames[-1]
        step = 1
        if top[2] == "'":
            top[2] = "" if c == "'" else "'"
        elif c == "\\":
            step = 2
        elif source.startswith("$((", i):
            frames.append(["))", i + 3, "", False, 0])
            step = 3
        elif source.startswith("$(", i):
            frames.append([")", i + 2, "", True, 0])
            step = 2
        elif c == "`" and top[0] != "`":
            frames.append(["`", i + 1, "", True, 0])
        elif top[2] == '"' and c != "`":
            top[2] = "" if c == '"' else '"'
        elif c in "'\"":
            top[2] = c
        elif (keyword := _CASE_KEYWORD.match(source, i)) and _COMMAND_START.search(source[top[1]:i]):
            top[4] = top[4] + 1 if keyword.group() == "case" else max(0, top[4] - 1)
            step = len(keyword.group())
        elif c == "(":
            frames.append([")", i + 1, "", False, 0])
        elif c == ")" and top[4]:
            pass  # the end of a case pattern
        elif len(frames) > 1 and source.startswith(top[0], i):
            if len(frames) - 1 == target:
                return source[top[1]:i]
            frames.pop()
            step = len(top[0])
        i += step
    if target is None:
        target = max((depth for depth, frame in enumerate(frames) if frame[3]), default=-1)
    return source[frames[target][1]:] if target >= 0 else None


def _nameless_output(body: str) -> bool:
    """Whether the substitution ``body`` is one of ``_NAMELESS_OUTPUT``'s forms (a stat format without %n, %N)."""
    for regex in _NAMELESS_OUTPUT:
        match = regex.match(body.strip())
        if match and not re.search(r"%[nN]", match.groupdict().get("format") or ""):
            return True
    return False


def _indirect(source: str, seg: Segment, mention: re.Match[str]) -> bool:
    """The name is handed on rather than used where it stands: in a variable, a $(…), a loop, eval, or xargs.

    Its target role is then unknowable from the text, so the caller falls back to "any write counts". A name a
    $(…) reads from with '<' is not handed on: the command sees its bytes, never the name
    (``echo "$(sha256sum < ~/minutes.odt)" >> filing.txt`` is how anyone records a checksum); nor is one whose
    $(…) prints no name (``_NAMELESS_OUTPUT``). A name anywhere inside a $(…), not only in its first command,
    counts as inside it.
    """
    before = source[seg.start:mention.start()]
    body = _substitution_body(source, mention.start())
    substituted = body is not None and not _READ_FROM.search(before) and not _nameless_output(body)
    return (substituted or bool(_ASSIGNED.search(before)) or "eval" in seg.text.split()
            or bool(_EXECUTES_INPUT.match(source[seg.end:])))


def shell_writes(source: str, mention: re.Match[str]) -> WriteJudgement:
    """Whether the shell ``source`` writes the file it names at ``mention``."""
    for name, regex in PY_WRITE_PATTERNS:  # python3 -c / heredoc programs: not parsed, so conservative
        if (match := regex.search(source)) is not None:
            return WriteJudgement(WriteSign(name, match.start(), match.end()))
    seg = segment_around(source, mention.start(), mention.end())
    if _indirect(source, seg, mention):
        return WriteJudgement(next(write_indicators(source, "shell"), None))
    for lo, hi, sign in _redirect_targets(seg):
        if lo <= mention.start() and mention.end() <= hi:
            return WriteJudgement(sign)
    for name, regex in SHELL_WRITE_PATTERNS:
        for match in regex.finditer(seg.text):
            sign = WriteSign(name, seg.start + match.start(), seg.start + match.end())
            if name != "writer command":
                return WriteJudgement(sign)  # sed -i, dd of=, curl -o, soffice/gimp batch: conservative
            command = match.group().split()[-1].rsplit("/", 1)[-1]
            targets = _operands_written(seg, sign.end, command)
            if targets is None or any(lo <= mention.start() and mention.end() <= hi for lo, hi in targets):
                return WriteJudgement(sign)
    return WriteJudgement(None)
