"""The Unicode text space of observations and actions (the spaces themselves are laid out in space_layout.py).

Terminal output and task instructions are arbitrary Unicode, which :class:`gymnasium.spaces.Text` can only
express by materialising a million-character set per space (and per vector-env worker). :class:`UnicodeText`
keeps the same interface with lazy stand-ins instead, so flattening and AsyncVectorEnv's shared memory
still work: a character's index is simply its code point.
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterator
from typing import Any

import numpy as np
from gymnasium.spaces import Text
from numpy.typing import NDArray

N_CODE_POINTS = 0x110000
_INVALID = re.compile("[\x00\ud800-\udfff]")  # NUL and surrogates: not text, and not encodable as UTF-8
_SAMPLE_ALPHABET: tuple[str, ...] = tuple(string.ascii_letters + string.digits + string.punctuation + " éßü中文😀")


def is_valid_char(char: object) -> bool:
    """One character that UnicodeText accepts: any code point except NUL and the surrogates."""
    return isinstance(char, str) and len(char) == 1 and _INVALID.match(char) is None


class _CodePoints:
    """``character_list`` stand-in: ``[i] == chr(i)`` for every code point, without storing any of them."""

    __slots__ = ()

    def __len__(self) -> int:
        return N_CODE_POINTS

    def __getitem__(self, index: int) -> str:
        i = int(index)  # numpy integers come from flattened arrays
        if not 0 <= i < N_CODE_POINTS:
            raise IndexError(f"code point {i} is out of range")
        return chr(i)

    def __iter__(self) -> Iterator[str]:
        return map(chr, range(N_CODE_POINTS))

    def __contains__(self, char: object) -> bool:
        return isinstance(char, str) and len(char) == 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _CodePoints)

    def __hash__(self) -> int:
        return hash(_CodePoints)

    def __repr__(self) -> str:
        return "<all code points>"


class _UnicodeCharset:
    """``character_set`` stand-in: membership is "valid character"; ``len`` is the flatten padding value.

    Gymnasium pads flattened text with ``len(character_set)`` and reads back only indices below it, so the
    length must exceed every code point even though NUL and the surrogates are not members.
    """

    __slots__ = ()

    def __len__(self) -> int:
        return N_CODE_POINTS

    def __contains__(self, char: object) -> bool:
        return is_valid_char(char)

    def __iter__(self) -> Iterator[str]:
        return (ch for ch in map(chr, range(1, N_CODE_POINTS)) if is_valid_char(ch))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _UnicodeCharset)

    def __hash__(self) -> int:
        return hash(_UnicodeCharset)

    def __repr__(self) -> str:
        return "<Unicode without NUL and surrogates>"


class _ValidCharacters:
    """``characters`` stand-in: the valid characters in code point order (``[0]`` seeds placeholder strings)."""

    __slots__ = ()
    _SURROGATES = 0xE000 - 0xD800

    def __len__(self) -> int:
        return N_CODE_POINTS - 1 - self._SURROGATES

    def __getitem__(self, index: int) -> str:
        i = int(index)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"character index {index} is out of range")
        code = i + 1  # skip NUL
        return chr(code if code < 0xD800 else code + self._SURROGATES)

    def __iter__(self) -> Iterator[str]:
        return iter(_UnicodeCharset())

    def __contains__(self, char: object) -> bool:
        return is_valid_char(char)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _ValidCharacters)

    def __hash__(self) -> int:
        return hash(_ValidCharacters)

    def __str__(self) -> str:
        return "<Unicode without NUL and surrogates>"

    __repr__ = __str__


class UnicodeText(Text):
    """A :class:`~gymnasium.spaces.Text` space over all of Unicode except NUL and surrogates, in O(1) memory.

    ``sample()`` draws from a small printable alphabet and caps the length at ``sample_max_length``, because a
    uniformly random million-code-point string of up to ``max_length`` characters is slow and unreadable.
    """

    def __init__(
        self,
        max_length: int,
        *,
        min_length: int = 1,
        sample_max_length: int = 32,
        seed: int | np.random.Generator | None = None,
    ) -> None:
        super().__init__(max_length, min_length=min_length, charset="a", seed=seed)  # reuse its length checks
        if not np.issubdtype(type(sample_max_length), np.integer) or sample_max_length < 0:
            raise ValueError(f"sample_max_length must be a non-negative integer, got {sample_max_length!r}")
        self.sample_max_length = int(sample_max_length)
        # Replace the base class's materialised tables with the lazy stand-ins (they are what gets pickled).
        self._char_set = _UnicodeCharset()  # type: ignore[assignment]
        self._char_list = _CodePoints()  # type: ignore[assignment]
        self._char_index = {}
        self._char_str = _ValidCharacters()  # type: ignore[assignment]

    @property
    def character_set(self) -> _UnicodeCharset:  # type: ignore[override]
        """Supports ``in`` and ``len()`` like the base class's frozenset."""
        return _UnicodeCharset()

    @property
    def character_list(self) -> _CodePoints:  # type: ignore[override]
        """Indexable like the base class's tuple: ``character_list[i] == chr(i)``."""
        return _CodePoints()

    @property
    def characters(self) -> _ValidCharacters:  # type: ignore[override]
        """The valid characters in order; gymnasium only indexes it to build placeholder strings."""
        return _ValidCharacters()

    def character_index(self, char: str) -> np.int32:
        """The code point, so no index table is needed; KeyError (like the base class) for an invalid char."""
        if not is_valid_char(char):
            raise KeyError(char)
        return np.int32(ord(char))

    def contains(self, x: Any) -> bool:
        """Whether ``x`` is a str of allowed length with no NUL and no lone surrogate."""
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length and _INVALID.search(x) is None

    def sample(
        self,
        mask: tuple[int | None, NDArray[np.int8] | None] | None = None,
        probability: tuple[int | None, NDArray[np.float64] | None] | None = None,
    ) -> str:
        """A short random string; a mask or probability array (one entry per code point) picks the characters."""
        if mask is not None and probability is not None:
            raise ValueError("Only one of `mask` or `probability` can be provided")
        length, weights = None, None
        if mask is not None:
            length, weights = self._validate_mask(mask, np.int8, "mask")
        elif probability is not None:
            length, weights = self._validate_mask(probability, np.float64, "probability")
        if length is None:
            high = max(self.min_length, min(self.max_length, self.sample_max_length))
            length = int(self.np_random.integers(self.min_length, high + 1))
        if weights is None:
            picks = self.np_random.integers(0, len(_SAMPLE_ALPHABET), size=length)
            return "".join(_SAMPLE_ALPHABET[i] for i in picks)
        codes = np.flatnonzero(weights)
        codes = codes[(codes != 0) & ((codes < 0xD800) | (codes > 0xDFFF))]
        if codes.size == 0:
            if length == 0 or self.min_length == 0:
                return ""
            raise ValueError("the mask allows no valid character, so no string of the minimum length exists")
        p = weights[codes].astype(np.float64)
        return "".join(map(chr, self.np_random.choice(codes, size=length, p=p / p.sum())))

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, UnicodeText) and (self.min_length, self.max_length) == (
            other.min_length,
            other.max_length,
        )

    @property
    def is_np_flattenable(self) -> bool:
        """Flattens to one int32 code point per character, padded to ``max_length``."""
        return True


def sanitize_text(text: str, max_length: int) -> str:
    """Make guest output a member of a UnicodeText space: NUL and lone surrogates become U+FFFD, then truncate.

    Terminal output can hold any bytes, so the env must pass it through this before putting it in an observation.
    """
    return _INVALID.sub("\ufffd", text)[:max_length]


# Registers UnicodeText's shared-memory readers/writers with gymnasium (see envs/shared_text.py).
from weavegym.envs import shared_text as _shared_text  # noqa: E402, F401
