"""librdkafka's partitioners, reproduced so a record lands where ``confluent_kafka.Producer`` puts it.

ParquetProducer picks each record's partition itself (a segment belongs to one partition), so it
must pick exactly as librdkafka would for the same ``partitioner`` setting:

=====================  =========================================================================
``partitioner``        keyed record
=====================  =========================================================================
``consistent_random``  CRC-32 of the key (librdkafka's default); an empty key is unkeyed
``consistent``         CRC-32 of the key, the empty key included
``murmur2_random``     the Java client's ``Utils.murmur2`` (seed 0x9747b28c), ``& 0x7fffffff``:
                       what Java producers do, so it is the setting to share keys with them
``murmur2``            the same
``fnv1a_random``       FNV-1a (32 bit, as Sarama's default: absolute value of the signed hash)
``fnv1a``              the same
``random``             no hashing: like an unkeyed record
=====================  =========================================================================

then modulo the partition count. A record without key (``None``) is *sticky*: librdkafka keeps
one partition for such records for ``sticky.partitioning.linger.ms``; parka keeps one per segment
(see ``ParquetProducer``). With ``random`` librdkafka picks a partition per message; parka picks
one per segment, since a segment cannot span partitions.

Each hash has a scalar form and a vectorised one over an Arrow array of keys; the vectorised
forms group keys by length, so they do no per-key Python work beyond a C-level map.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = [
    "PARTITIONERS",
    "STICKY",
    "fnv1a",
    "murmur2",
    "partition_for_key",
    "partitions_for_keys",
]

PARTITIONERS = (
    "consistent_random",
    "consistent",
    "murmur2_random",
    "murmur2",
    "fnv1a_random",
    "fnv1a",
    "random",
)
STICKY = -1
"""What :func:`partition_for_key` and :func:`partitions_for_keys` give for a record that takes the sticky partition."""

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF
_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193


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


def fnv1a(data: bytes) -> int:
    """librdkafka's ``rd_fnv1a``: 32-bit FNV-1a, then the absolute value of it read as a signed int."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    return (-h) & _MASK if h & 0x80000000 else h


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
    return h & np.uint64(0x7FFFFFFF)


def _fnv1a_fixed(mat: np.ndarray) -> np.ndarray:
    """:func:`fnv1a` of each row of ``mat`` (uint8, shape (n, length)), vectorised over rows."""
    n, length = mat.shape
    prime = np.uint64(_FNV_PRIME)
    mask = np.uint64(_MASK)
    h = np.full(n, _FNV_OFFSET, dtype=np.uint64)
    for j in range(length):
        h = ((h ^ mat[:, j].astype(np.uint64)) * prime) & mask
    negative = (h & np.uint64(0x80000000)) != 0
    h[negative] = (np.uint64(1 << 32) - h[negative]) & mask
    return h


def _by_length(keys: pa.Array, fixed: Callable[[np.ndarray], np.ndarray]) -> np.ndarray:
    """``fixed`` (a hash over an (n, length) byte matrix) of every key of a binary array without nulls."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    offsets = np.frombuffer(keys.buffers()[1], dtype=np.int32)[keys.offset : keys.offset + len(keys) + 1]
    data = np.frombuffer(keys.buffers()[2], dtype=np.uint8) if keys.buffers()[2] else np.empty(0, np.uint8)
    lengths = np.diff(offsets)
    out = np.empty(len(keys), dtype=np.uint64)
    for length in np.unique(lengths):
        rows = np.nonzero(lengths == length)[0]
        idx = offsets[rows][:, None] + np.arange(int(length), dtype=np.int64)[None, :]
        mat = data[idx] if length else np.empty((len(rows), 0), np.uint8)
        out[rows] = fixed(mat)
    return out


def _crc32_all(keys: pa.Array) -> np.ndarray:
    py = keys.to_pylist()
    return np.fromiter(map(zlib.crc32, py), dtype=np.uint64, count=len(py))


def _hash_kind(partitioner: str) -> str:
    if partitioner not in PARTITIONERS:
        raise ValueError(f"unknown partitioner {partitioner!r}; known: {', '.join(PARTITIONERS)}")
    return partitioner.removesuffix("_random")


def partition_for_key(partitioner: str, key: bytes | None, num_partitions: int) -> int:
    """Partition of one record with ``key`` under ``partitioner``, or :data:`STICKY`."""
    kind = _hash_kind(partitioner)
    if key is None or kind == "random" or (partitioner == "consistent_random" and not key):
        return STICKY
    if kind == "consistent":
        return zlib.crc32(key) % num_partitions
    if kind == "murmur2":
        return (murmur2(key) & 0x7FFFFFFF) % num_partitions
    return fnv1a(key) % num_partitions


def partitions_for_keys(partitioner: str, keys: pa.Array, num_partitions: int) -> np.ndarray:
    """:func:`partition_for_key` over an Arrow array of keys (binary or string, nulls allowed):
    an int64 array of partitions, :data:`STICKY` where the sticky partition applies."""
    kind = _hash_kind(partitioner)
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    if not pa.types.is_binary(keys.type):
        keys = keys.cast(pa.binary())
    out = np.full(len(keys), STICKY, dtype=np.int64)
    if kind == "random" or len(keys) == 0:
        return out
    hashed = pc.is_valid(keys)
    if partitioner == "consistent_random":
        hashed = pc.and_(hashed, pc.greater(pc.binary_length(keys), 0))
    mask = np.asarray(hashed.to_numpy(zero_copy_only=False), dtype=bool)
    if not mask.any():
        return out
    chosen = keys if mask.all() else keys.filter(hashed)
    if kind == "consistent":
        h = _crc32_all(chosen)
    elif kind == "murmur2":
        h = _by_length(chosen, _murmur2_fixed)
    else:
        h = _by_length(chosen, _fnv1a_fixed)
    out[mask] = (h % np.uint64(num_partitions)).astype(np.int64)
    return out
