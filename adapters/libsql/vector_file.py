"""The vector file: a persisted copy of an index's cached vectors, memory-mapped on open.

Loading 100,000 vectors from SQL rows takes about a second; mapping this file
takes milliseconds, so a new process (a CLI call, a serverless worker) answers
its first query near the warm speed. The file is only a cache: the database
stays the truth, and the store uses a file only when its header matches the
catalog (see `LibSQLVectorStore._snapshot`). It is written whole under a
temporary name, flushed to disk and renamed, so a reader sees a whole file or
none; a file that is cut short, corrupt or of another layout reads as None.

Layout: 8 bytes of magic, the header's length (8 bytes, little-endian), the
header (JSON: the caller's fields and where each array lies), then the arrays,
each at an offset aligned to 64 bytes.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

MAGIC = b"RSVECS02"
ABANDONED = 600
"""Seconds after which a temporary file is taken for a killed write's (a write takes seconds)."""
_ALIGN = 64


def _aligned(size: int) -> int:
    """`size` rounded up to a multiple of `_ALIGN`: where the next part of the file starts
    (the arrays after the 16 bytes of magic and length and the header, each array
    after the one before)."""
    return -(-size // _ALIGN) * _ALIGN


@dataclass(frozen=True)
class Reordered:
    """The rows of `array` in `order`, written a slice at a time: never a whole copy."""

    array: npt.NDArray[Any]
    order: npt.NDArray[np.intp]

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.array.dtype

    @property
    def shape(self) -> tuple[int, ...]:
        return (len(self.order), *self.array.shape[1:])

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape)) * self.array.dtype.itemsize

    def slices(self) -> Iterator[npt.NDArray[Any]]:
        for start in range(0, len(self.order), _SLICE_ROWS):
            yield self.array[self.order[start : start + _SLICE_ROWS]]


Array = npt.NDArray[Any] | Reordered
_SLICE_ROWS = 8192


def write(path: Path, header: dict[str, Any], arrays: Mapping[str, Array], like: Path) -> None:
    """Write the header and arrays to `path`, atomically, readable by whoever can read
    `like` (the database file)."""
    layout: list[dict[str, Any]] = []
    offsets: list[int] = []
    end = 0
    for name, array in arrays.items():
        layout.append({"name": name, "dtype": array.dtype.str, "shape": array.shape, "at": end})
        offsets.append(end)
        end += _aligned(array.nbytes)
    text = json.dumps({**header, "arrays": layout}, separators=(",", ":")).encode()
    start = _aligned(16 + len(text))
    path.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f"{path.name}.", suffix=".part")
    try:
        os.chmod(temporary, like.stat().st_mode & 0o666)
        with os.fdopen(handle, "wb") as out:
            out.write(MAGIC + len(text).to_bytes(8, "little") + text)
            for offset, array in zip(offsets, arrays.values(), strict=True):
                out.seek(start + offset)
                for part in array.slices() if isinstance(array, Reordered) else [array]:
                    out.write(np.ascontiguousarray(part).data.cast("B"))
            out.truncate(start + end)
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _remove_abandoned(path: Path) -> None:
    """Delete the temporary files of writes that were killed (older than ABANDONED)."""
    for part in path.parent.glob(f"{path.name}.*.part"):
        with contextlib.suppress(OSError):
            if part.stat().st_mtime < time.time() - ABANDONED:
                part.unlink()


def read(path: Path) -> tuple[dict[str, Any], dict[str, npt.NDArray[Any]]] | None:
    """The header and the arrays (read-only maps of the file), or None when the file
    is missing or not a whole file of this layout."""
    try:
        # one open file for the header and every map: another process may replace
        # the file meanwhile, and a map of the new one under the old header would
        # put other rows at the header's positions
        with path.open("rb") as file:
            if file.read(8) != MAGIC:
                return None
            length = int.from_bytes(file.read(8), "little")
            header = json.loads(file.read(length))
            if not isinstance(header, dict):
                return None
            start = _aligned(16 + length)
            size = os.fstat(file.fileno()).st_size
            arrays: dict[str, npt.NDArray[Any]] = {}
            for entry in header.pop("arrays"):
                dtype, shape = np.dtype(entry["dtype"]), tuple(entry["shape"])
                offset = start + entry["at"]
                if offset + dtype.itemsize * int(np.prod(shape)) > size:
                    return None
                arrays[entry["name"]] = np.memmap(file, dtype, mode="r", offset=offset, shape=shape)
        return header, arrays
    except (OSError, ValueError, KeyError, TypeError):
        return None
