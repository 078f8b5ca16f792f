"""Gnumeric workbooks read on the host (no TASK here): cells, formulas, and plain arithmetic formulas evaluated.

A .gnumeric file is gzip-compressed XML (namespace http://www.gnumeric.org/v10.dtd). Each cell is a
``<gnm:Cell Row= Col=>`` element (0-based); a constant has a ``ValueType`` (40 a number, 60 a string), a
formula has its text ("=C2-B2") and an ``ExprID``. A formula Gnumeric shares between cells (a fill or a
paste) is written once, with its text, where it first occurs; the other cells carry only its ``ExprID``, and
their references are the first cell's shifted by the offset, so ``cells`` writes each one out in full.
Gnumeric does not store what a formula evaluates to, so ``evaluate`` computes the arithmetic a variance
column needs (cell references, numbers, + - * / and brackets) and refuses anything else.
"""

from __future__ import annotations

import ast
import operator
import re
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass

NS = {"gnm": "http://www.gnumeric.org/v10.dtd"}
REF = re.compile(r"(\$?)([A-Z]{1,3})(\$?)([0-9]+)")
MAX_XML = 8_000_000  # a workbook of a few rows is a few KB; a gzip bomb stops here


@dataclass(frozen=True)
class Cell:
    """One cell: ``value`` is the constant's text, or the formula's text (with "=") when ``formula``."""

    row: int
    col: int
    value: str
    formula: bool
    value_type: int | None


def column_name(col: int) -> str:
    name = ""
    col += 1
    while col:
        col, rest = divmod(col - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def column_index(name: str) -> int:
    index = 0
    for char in name:
        index = index * 26 + ord(char) - ord("A") + 1
    return index - 1


def shift(formula: str, rows: int, cols: int) -> str:
    """The formula with its relative references moved by (rows, cols); $-anchored parts stay."""
    def moved(match: re.Match[str]) -> str:
        col = match[2] if match[1] else column_name(column_index(match[2]) + cols)
        row = match[4] if match[3] else str(int(match[4]) + rows)
        return f"{match[1]}{col}{match[3]}{row}"
    return REF.sub(moved, formula)


def read_workbook(data: bytes) -> dict[str, dict[tuple[int, int], Cell]]:
    """The cells of every sheet, by sheet name and (row, col). Raises ValueError when it is no Gnumeric file."""
    try:
        if data[:2] == b"\x1f\x8b":  # Gnumeric's default; an uncompressed file (a preference) is read as it is
            inflate = zlib.decompressobj(wbits=31)
            data = inflate.decompress(data, MAX_XML)
            if inflate.unconsumed_tail:
                raise ValueError(f"its XML is over {MAX_XML} bytes")
        root = ET.fromstring(data)
    except (zlib.error, ET.ParseError) as exc:
        raise ValueError(f"not a Gnumeric workbook: {exc}") from None
    if root.tag != f"{{{NS['gnm']}}}Workbook":
        raise ValueError(f"not a Gnumeric workbook: the root element is {root.tag}")
    sheets: dict[str, dict[tuple[int, int], Cell]] = {}
    for sheet in root.iterfind("gnm:Sheets/gnm:Sheet", NS):
        name = sheet.findtext("gnm:Name", "", NS)
        shared: dict[str, tuple[int, int, str]] = {}
        cells: dict[tuple[int, int], Cell] = {}
        for element in sheet.iterfind("gnm:Cells/gnm:Cell", NS):
            row, col = int(element.get("Row", "-1")), int(element.get("Col", "-1"))
            text, expr = element.text or "", element.get("ExprID")
            value_type = element.get("ValueType")
            if expr is not None and text.startswith("="):
                shared.setdefault(expr, (row, col, text))
            elif expr is not None and expr in shared:
                first_row, first_col, first = shared[expr]
                text = shift(first, row - first_row, col - first_col)
            cells[(row, col)] = Cell(row, col, text, value_type is None and text.startswith("="),
                                     int(value_type) if value_type else None)
        sheets[name] = cells
    return sheets


def references(formula: str) -> set[str]:
    """The cells a formula names, as plain "C2" (anchors dropped)."""
    return {f"{m[2]}{m[4]}" for m in REF.finditer(formula.upper())}


_OPS: Mapping[type, Callable[[float, float], float]] = {ast.Add: operator.add, ast.Sub: operator.sub,
                                                        ast.Mult: operator.mul, ast.Div: operator.truediv}


def evaluate(formula: str, cells: Mapping[tuple[int, int], Cell]) -> float:
    """A formula of cell references, numbers, + - * / and brackets, on the sheet's constants.

    Raises ValueError for anything else (a function, another sheet, a reference to a text or a formula), so a
    checker reports what it could not compute instead of guessing.
    """
    if not formula.startswith("="):
        raise ValueError(f"{formula!r} is not a formula")

    def constant(match: re.Match[str]) -> str:
        cell = cells.get((int(match[4]) - 1, column_index(match[2])))
        if cell is None or cell.formula or cell.value_type != 40:
            raise ValueError(f"{match[0]} holds no number")
        return f"({float(cell.value)!r})"

    try:
        tree = ast.parse(REF.sub(constant, formula[1:].upper()), mode="eval")
    except SyntaxError:
        raise ValueError(f"{formula!r} is not plain arithmetic") from None

    def walk(node: ast.AST) -> float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -walk(node.operand) if isinstance(node.op, ast.USub) else walk(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](walk(node.left), walk(node.right))
        raise ValueError(f"{formula!r} is not plain arithmetic")

    try:
        return walk(tree)
    except ZeroDivisionError:
        raise ValueError(f"{formula!r} divides by zero") from None
