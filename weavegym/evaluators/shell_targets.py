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
_READ_FROM = re.compile(r"(?:^|[^<])\d*<\s*[\"']?[^\s\"'<>|;&()]*$")


def _indirect(source: str, seg: Segment, mention: re.Match[str]) -> bool:
    """The name is handed on rather than used where it stands: in a variable, a $(…), a loop, eval, or xargs.

    Its target role is then unknowable from the text, so the caller falls back to "any write counts". A name a
    $(…) reads from with '<' is not handed on: the command sees its bytes, never the name
    (``echo "$(sha256sum < ~/minutes.odt)" >> filing.txt`` is how anyone records a checksum).
    """
    opener = source[:seg.start].rstrip(" \t")
    before = source[seg.start:mention.start()]
    substituted = opener.endswith(("$(", "`")) and not _READ_FROM.search(before)
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
