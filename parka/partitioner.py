"""Kafka's key partitioners, reproduced so a keyed record lands where it would without parka.

``murmur2`` is the Java client's default (``Utils.murmur2``, seed 0x9747b28c, then
``& 0x7fffffff`` and modulo the partition count), which librdkafka calls ``murmur2_random``.
``consistent`` is librdkafka's CRC32 of the key. The ``*_random`` variants send records
without a key to a random partition; parka makes that sticky per segment instead (see
``ParquetProducer``), as the Java client's sticky partitioner does for batches.

Both a scalar form and a numpy-vectorised form (for ``produce_batch``) are provided; the
vectorised form groups keys by length so it does no per-record Python work.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["crc32_partitions", "murmur2", "murmur2_partitions", "partition_for_key", "partitions_for_keys"]

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's 32-bit murmur2 hash of ``data`` (unsigned)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length // 4
    for i in range(n4):
        k = int.from_bytes(data[4 * i : 4 * i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    tail = 4 * n4
    if rest == 3:
        h ^= data[tail + 2] << 16
    if rest >= 2:
        h ^= data[tail + 1] << 8
    if rest >= 1:
        h ^= data[tail]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def _murmur2_fixed(mat: np.ndarray) -> np.ndarray:
    """murmur2 of each row of ``mat`` (uint8, shape (n, length)), vectorised over rows."""
    n, length = mat.shape
    m = np.uint64(_M)
    mask = np.uint64(_MASK)
    h = np.full(n, (_SEED ^ length) & _MASK, dtype=np.uint64)
    n4 = length // 4
    if n4:
        words = np.ascontiguousarray(mat[:, : 4 * n4]).view("<u4").astype(np.uint64)
        for i in range(n4):
            k = (words[:, i] * m) & mask
            k ^= k >> np.uint64(24)
            k = (k * m) & mask
            h = (h * m) & mask
            h ^= k
    rest = length & 3
    tail = 4 * n4
    if rest == 3:
        h ^= mat[:, tail + 2].astype(np.uint64) << np.uint64(16)
    if rest >= 2:
        h ^= mat[:, tail + 1].astype(np.uint64) << np.uint64(8)
    if rest >= 1:
        h ^= mat[:, tail].astype(np.uint64)
        h = (h * m) & mask
    h ^= h >> np.uint64(13)
    h = (h * m) & mask
    h ^= h >> np.uint64(15)
    return h


def murmur2_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Partition of each key (binary or string array, no nulls) under Kafka's murmur2 rule."""
    keys = keys.cast(pa.binary()) if not pa.types.is_binary(keys.type) else keys
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32)[keys.offset : keys.offset + len(keys) + 1]
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8) if keys.buffers()[2] else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    out = np.empty(len(keys), dtype=np.int64)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        starts = offsets[rows]
        idx = starts[:, None] + np.arange(int(length), dtype=np.int64)[None, :]
        mat = data[idx] if length else np.empty((len(rows), 0), np.uint8)
        out[rows] = (_murmur2_fixed(mat) & np.uint64(0x7FFFFFFF)).astype(np.int64) % num_partitions
    return out


def crc32_partitions(keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Partition of each key under librdkafka's ``consistent`` (CRC32) rule."""
    py = keys.cast(pa.binary()).to_pylist()
    return np.fromiter((zlib.crc32(k) % num_partitions for k in py), dtype=np.int64, count=len(py))


def partition_for_key(partitioner: str, key: bytes, num_partitions: int) -> int:
    """Partition for one key under ``partitioner`` (a librdkafka name)."""
    if partitioner.startswith("murmur2"):
        return (murmur2(key) & 0x7FFFFFFF) % num_partitions
    return zlib.crc32(key) % num_partitions


def partitions_for_keys(partitioner: str, keys: pa.Array, num_partitions: int) -> np.ndarray:
    """Vectorised :func:`partition_for_key` over an Arrow array of keys without nulls."""
    fn: Callable[[pa.Array, int], np.ndarray] = (
        murmur2_partitions if partitioner.startswith("murmur2") else crc32_partitions
    )
    if pc.any(pc.is_null(keys)).as_py():
        raise ValueError("keys contain nulls")
    return fn(keys, num_partitions)
