"""The raw buffers of Arrow binary and text arrays, for whole-batch work in numpy (no value made a Python object)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

BYTE_TYPES = (pa.binary(), pa.string(), pa.large_binary(), pa.large_string())  # what `value_bytes` reads


def value_bytes(column: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """(offsets, data) of a binary or text array: value i is ``data[offsets[i]:offsets[i + 1]]`` (a NULL is
    an empty range). Zero-copy views of the array's buffers; a chunked array is combined first."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if not len(column):
        return np.zeros(1, np.int64), np.empty(0, np.uint8)
    wide = column.type in (pa.large_binary(), pa.large_string())  # 64-bit offsets
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int64 if wide else np.int32)
    data = column.buffers()[2]
    return (
        offsets[column.offset : column.offset + len(column) + 1],
        np.frombuffer(data, np.uint8) if data is not None else np.empty(0, np.uint8),
    )
