"""Vector-env shared memory for ``UnicodeText``: a live batch of strings instead of a stale snapshot.

``AsyncVectorEnv(shared_memory=True)`` calls ``read_from_shared_memory`` once,
when it is built, and afterwards only deep-copies that result. For ``Box``
that result is a numpy view, so it tracks what the workers write; for ``Text``
gymnasium returns a tuple of strings decoded at that moment, so every later
text observation reads as the initial zeros (NUL characters). Registering
``UnicodeText`` here returns a view that decodes the shared buffer when it is
read or copied, and writes the UTF-32 code points in one numpy call.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
from gymnasium.vector.utils import read_from_shared_memory, write_to_shared_memory

from weavegym.envs.spaces import N_CODE_POINTS, UnicodeText


class SharedTextBatch(Sequence[str]):
    """The ``n`` strings in a shared int32 buffer (one row of code points per env, padded)."""

    def __init__(self, space: UnicodeText, shared_memory: Any, n: int) -> None:
        self._rows = np.frombuffer(shared_memory.get_obj(), dtype=np.int32).reshape(n, space.max_length)

    def __len__(self) -> int:
        return self._rows.shape[0]

    def __getitem__(self, index: int) -> str:  # type: ignore[override]
        row = self._rows[index]
        return row[row < N_CODE_POINTS].astype("<u4").tobytes().decode("utf-32-le")

    def __iter__(self) -> Iterator[str]:
        return (self[i] for i in range(len(self)))

    def __deepcopy__(self, memo: dict[int, Any]) -> tuple[str, ...]:
        return tuple(self)  # what AsyncVectorEnv hands out (copy=True): plain strings, as Text spaces expect

    def __eq__(self, other: object) -> bool:
        return tuple(self) == (tuple(other) if isinstance(other, Sequence) else other)

    def __repr__(self) -> str:
        return f"SharedTextBatch({tuple(self)!r})"


@read_from_shared_memory.register(UnicodeText)
def _read_unicode_text(space: UnicodeText, shared_memory: Any, n: int = 1) -> SharedTextBatch:
    return SharedTextBatch(space, shared_memory, n)


@write_to_shared_memory.register(UnicodeText)
def _write_unicode_text(space: UnicodeText, index: int, value: str, shared_memory: Any) -> None:
    codes = np.frombuffer(value.encode("utf-32-le"), dtype="<u4").astype(np.int32)
    row = np.frombuffer(shared_memory.get_obj(), dtype=np.int32)[index * space.max_length:
                                                                   (index + 1) * space.max_length]
    row[: len(codes)] = codes
    row[len(codes):] = N_CODE_POINTS  # padding, as gymnasium's own flatten uses len(character_set)
