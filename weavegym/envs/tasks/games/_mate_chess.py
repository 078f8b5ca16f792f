"""Just enough chess for Weave-Games-7 (no TASK): legal moves, check and mate, SAN read back from a PGN, and a
mate-in-two search that proves a problem sound (a forced mate in two, one key move, no mate in one).

Positions are (board, white_to_move, ep) with board a dict {(file 0-7, rank 0-7): FEN letter}. Castling is never
legal here (the problems carry no castling rights, and the FEN the checker accepts must say '-'); en passant is,
because a black double step can be answered by it.
"""

from __future__ import annotations

import re

from weavegym.envs.tasks.games.engine_move import BISHOP, KING, KNIGHT, ROOK, attacked

Square = tuple[int, int]
Board = dict[Square, str]
Move = tuple[Square, Square, str]  # from, to, promotion letter (upper case) or ''

SAN_MOVE = re.compile(r"([KQRBN])?([a-h])?([1-8])?x?([a-h][1-8])(?:=?([QRBN]))?")


class Position:
    def __init__(self, board: Board, white: bool, ep: Square | None = None) -> None:
        self.board, self.white, self.ep = board, white, ep

    @classmethod
    def from_fen(cls, fen: str) -> Position:
        parts = fen.split()
        if len(parts) < 2:
            raise ValueError(f"not a FEN: {fen!r}")
        rows = parts[0].split("/")
        if len(rows) != 8:
            raise ValueError(f"a FEN has 8 ranks: {fen!r}")
        board: Board = {}
        for row, text in enumerate(rows):
            col = 0
            for ch in text:
                if ch.isdigit():
                    col += int(ch)
                elif ch in "KQRBNPkqrbnp":
                    board[(col, 7 - row)] = ch
                    col += 1
                else:
                    raise ValueError(f"bad FEN letter {ch!r}")
            if col != 8:
                raise ValueError(f"rank {8 - row} of {fen!r} is not 8 squares")
        if parts[1] not in ("w", "b"):
            raise ValueError(f"bad side to move in {fen!r}")
        ep = None
        if len(parts) > 3 and parts[3] != "-":
            ep = square(parts[3])
        return cls(board, parts[1] == "w", ep)

    def placement(self) -> str:
        rows = []
        for rank in range(7, -1, -1):
            row, empty = "", 0
            for file in range(8):
                ch = self.board.get((file, rank))
                if ch is None:
                    empty += 1
                    continue
                row += (str(empty) if empty else "") + ch
                empty = 0
            rows.append(row + (str(empty) if empty else ""))
        return "/".join(rows)

    def fen(self) -> str:
        ep = name(self.ep) if self.ep else "-"
        return f"{self.placement()} {'w' if self.white else 'b'} - {ep} 0 1"

    def king(self, white: bool) -> Square | None:
        want = "K" if white else "k"
        return next((sq for sq, ch in self.board.items() if ch == want), None)

    def attacked(self, at: Square, by_white: bool) -> bool:
        """Whether the side ``by_white`` attacks ``at`` (Weave-Games-2's attack test, on the same board shape)."""
        return attacked(self.board, at, by_white)

    def in_check(self, white: bool | None = None) -> bool:
        side = self.white if white is None else white
        king = self.king(side)
        return king is not None and self.attacked(king, not side)

    def pseudo_moves(self) -> list[Move]:
        found: list[Move] = []
        white, board = self.white, self.board
        for (x, y), ch in list(board.items()):
            if ch.isupper() != white:
                continue
            piece = ch.upper()
            if piece == "P":
                step, home, last = (1, 1, 7) if white else (-1, 6, 0)
                targets = []
                if 0 <= y + step < 8 and (x, y + step) not in board:
                    targets.append((x, y + step))
                    if y == home and (x, y + 2 * step) not in board:
                        targets.append((x, y + 2 * step))
                for dx in (-1, 1):
                    to = (x + dx, y + step)
                    target = board.get(to)
                    if 0 <= to[0] < 8 and ((target is not None and target.isupper() != white) or to == self.ep):
                        targets.append(to)
                for to in targets:
                    found.extend(((x, y), to, p) for p in ("QRBN" if to[1] == last else ("",)))
                continue
            if piece in "NK":
                steps = [(x + dx, y + dy) for dx, dy in (KNIGHT if piece == "N" else KING)]
                for to in steps:
                    target = board.get(to)
                    if 0 <= to[0] < 8 and 0 <= to[1] < 8 and (target is None or target.isupper() != white):
                        found.append(((x, y), to, ""))
                continue
            for dx, dy in {"R": ROOK, "B": BISHOP, "Q": ROOK + BISHOP}[piece]:
                cx, cy = x + dx, y + dy
                while 0 <= cx < 8 and 0 <= cy < 8:
                    target = board.get((cx, cy))
                    if target is not None and target.isupper() == white:
                        break
                    found.append(((x, y), (cx, cy), ""))
                    if target is not None:
                        break
                    cx, cy = cx + dx, cy + dy
        return found

    def play(self, move: Move) -> Position:
        src, dst, promo = move
        board = dict(self.board)
        piece = board.pop(src)
        ep = None
        if piece.upper() == "P":
            if dst == self.ep and dst not in board:
                board.pop((dst[0], src[1]), None)  # en passant takes the pawn beside
            if abs(dst[1] - src[1]) == 2:
                ep = (src[0], (src[1] + dst[1]) // 2)
            if promo:
                piece = promo if self.white else promo.lower()
        board[dst] = piece
        return Position(board, not self.white, ep)

    def legal_moves(self) -> list[Move]:
        return [m for m in self.pseudo_moves() if not self.play(m).in_check(self.white)]

    def is_mate(self) -> bool:
        return self.in_check() and not self.legal_moves()

    def san_move(self, san: str) -> Move | None:
        """The one legal move the SAN ``san`` names (check marks and annotations ignored), else None."""
        text = re.sub(r"[+#!?]+$", "", san.strip())
        found = SAN_MOVE.fullmatch(text)
        if found is None:
            return None
        letter, file_, rank, target, promo = found.groups()
        to, piece = square(target), letter or "P"
        matches = [m for m in self.legal_moves() if m[1] == to and self.board[m[0]].upper() == piece
                   and (file_ is None or m[0][0] == ord(file_) - 97) and (rank is None or m[0][1] == int(rank) - 1)
                   and m[2] == (promo or "")]
        return matches[0] if len(matches) == 1 else None


def square(text: str) -> Square:
    if not re.fullmatch(r"[a-h][1-8]", text):
        raise ValueError(f"not a square: {text!r}")
    return ord(text[0]) - 97, int(text[1]) - 1


def name(sq: Square) -> str:
    return f"{chr(97 + sq[0])}{sq[1] + 1}"


def coordinate(move: Move) -> str:
    return name(move[0]) + name(move[1]) + move[2].lower()


def parse_coordinate(text: str) -> Move | None:
    found = re.fullmatch(r"([a-h][1-8])-?([a-h][1-8])([qrbn]?)", text.strip().lower())
    return None if found is None else (square(found.group(1)), square(found.group(2)), found.group(3).upper())


def mates_in_one(pos: Position) -> list[Move]:
    return [m for m in pos.legal_moves() if pos.play(m).is_mate()]


def mate_in_two_keys(pos: Position) -> list[Move]:
    """The side to move's first moves that mate in two by force (a mate in one counts too)."""
    keys = []
    for move in pos.legal_moves():
        after = pos.play(move)
        replies = after.legal_moves()
        if not replies:
            if after.in_check():
                keys.append(move)
            continue
        if all(mates_in_one(after.play(reply)) for reply in replies):
            keys.append(move)
    return keys


def problem_problem(fen: str) -> str:
    """'' when ``fen`` is a sound mate-in-two problem (legal, the side not to move not in check, no mate in one,
    exactly one key that forces mate in two), else what is wrong."""
    pos = Position.from_fen(fen)
    for white in (True, False):
        if sum(1 for ch in pos.board.values() if ch == ("K" if white else "k")) != 1:
            return "each side needs one king"
    if any(ch in "Pp" and sq[1] in (0, 7) for sq, ch in pos.board.items()):
        return "a pawn on the first or last rank"
    if pos.in_check(not pos.white):
        return "the side not to move is in check"
    if mates_in_one(pos):
        return "it has a mate in one"
    keys = mate_in_two_keys(pos)
    return "" if len(keys) == 1 else f"{len(keys)} keys: {[coordinate(k) for k in keys]}"


def key_move(fen: str) -> str:
    keys = mate_in_two_keys(Position.from_fen(fen))
    return coordinate(keys[0]) if len(keys) == 1 else ""


def mirror_files(fen: str) -> str:
    """The position reflected left to right (a to h): the same play on the other wing."""
    rows = fen.split()[0].split("/")
    return " ".join(["/".join(row[::-1] for row in rows), *fen.split()[1:]])


def flip_colours(fen: str) -> str:
    """The colour-reversed position (ranks flipped, colours swapped, the other side to move)."""
    parts = fen.split()
    placement = "/".join(reversed(parts[0].split("/"))).swapcase()
    return f"{placement} {'b' if parts[1] == 'w' else 'w'} - - 0 1"


def replay(fen: str, sans: list[str]) -> tuple[Position | None, str]:
    """The position after the SAN moves from ``fen`` (None and what is wrong when one is not legal)."""
    pos = Position.from_fen(fen)
    for number, san in enumerate(sans, 1):
        move = pos.san_move(san)
        if move is None:
            return None, f"move {number} ({san!r}) is not a legal move"
        pos = pos.play(move)
    return pos, ""
