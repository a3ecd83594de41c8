"""Iceberg's bucket transform on Arrow arrays: ``(murmur3_x86_32(bytes) & 0x7FFFFFFF) % N`` of each
value's canonical bytes (the Iceberg spec's "Bucket Transform Details"), vectorized with numpy.

The bytes hashed, as Iceberg's spec (and pyiceberg's ``BucketTransform``) has them:

* integers of any width, dates, times, timestamps: the value as a little-endian 64-bit integer,
  in days for a date and in microseconds for a time or a timestamp (a nanosecond timestamp is
  floored to microseconds first, as Iceberg does, so both precisions bucket alike);
* strings: their UTF-8 bytes; binary and fixed-size binary: the bytes.

Why here and not pyiceberg's: pyiceberg 0.12 buckets an Arrow array only through the optional
``pyiceberg-core`` (Rust) package, and the producer, which cuts segments where a partition value
changes, depends on neither. Its scalar transform is what the tests compare against, value by value.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["bucket", "bucket_problem", "murmur3_32"]

_C1 = np.uint32(0xCC9E2D51)
_C2 = np.uint32(0x1B873593)
_MICROS = {"s": 1_000_000, "ms": 1_000, "us": 1, "ns": 1}


def bucket_problem(t: pa.DataType) -> str | None:
    """What is wrong with bucketing a column of type ``t`` (plain, not a dictionary), or ``None``."""
    if pa.types.is_uint64(t):
        return "not uint64 (Iceberg has no unsigned 64-bit type)"
    if pa.types.is_integer(t) or pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t) or _is_bytes(t):
        return None
    return "an integer, a date, a time, a timestamp, a string or binary"


def bucket(values: pa.Array, num_buckets: int) -> pa.Array:
    """Iceberg's ``bucket[num_buckets]`` of each of ``values`` (int32; nulls stay null).

    Raises:
        TypeError: a type :func:`bucket_problem` refuses.
    """
    problem = bucket_problem(values.type)
    if problem is not None:
        raise TypeError(f"bucket() needs {problem}, not {values.type}")
    bytes_ = _is_bytes(values.type)
    hashed = _hash_bytes(values.cast(pa.large_binary())) if bytes_ else _hash_longs(_as_long(values))
    out = (hashed & np.uint32(0x7FFFFFFF)).astype(np.int64) % num_buckets
    return pa.array(out.astype(np.int32), pa.int32(), mask=_nulls(values))


def murmur3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of ``data`` as a signed 32-bit integer (Java's and ``mmh3.hash``'s):
    the vectorized hash on one value, for tests and callers with a single value."""
    return int(_hash_bytes(pa.array([data], pa.large_binary()), seed).astype(np.int32)[0])


def _is_bytes(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_string_view(t)
        or pa.types.is_binary(t)
        or pa.types.is_large_binary(t)
        or pa.types.is_binary_view(t)
        or pa.types.is_fixed_size_binary(t)
    )


def _nulls(values: pa.Array) -> np.ndarray | None:
    if values.null_count == 0:
        return None
    return np.asarray(values.is_null().to_numpy(zero_copy_only=False), dtype=bool)


def _as_long(values: pa.Array) -> np.ndarray:
    """The 64-bit integer Iceberg hashes for each value (nulls: 0, masked out later)."""
    t = values.type
    if pa.types.is_date32(t) or pa.types.is_time32(t):
        values = values.view(pa.int32())
    elif pa.types.is_date64(t) or pa.types.is_time64(t) or pa.types.is_timestamp(t):
        values = values.view(pa.int64())
    longs = np.asarray(pc.fill_null(values.cast(pa.int64()), 0).to_numpy(), dtype=np.int64)
    if pa.types.is_date64(t):
        return np.floor_divide(longs, 86_400_000)  # milliseconds to days since the epoch
    if pa.types.is_time(t) or pa.types.is_timestamp(t):
        if t.unit == "ns":
            return np.floor_divide(longs, 1000)  # floored, as Iceberg's nanos-to-micros
        return longs * _MICROS[t.unit]
    return longs


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint32(r)) | (x >> np.uint32(32 - r))


def _mix_k(k: np.ndarray) -> np.ndarray:
    return _rotl(k * _C1, 15) * _C2


def _mix_h(h: np.ndarray, k: np.ndarray) -> np.ndarray:
    return _rotl(h ^ _mix_k(k), 13) * np.uint32(5) + np.uint32(0xE6546B64)


def _finish(h: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    h = h ^ lengths.astype(np.uint32)
    h ^= h >> np.uint32(16)
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _hash_longs(longs: np.ndarray) -> np.ndarray:
    """murmur3_x86_32 (seed 0) of each value's 8 little-endian bytes: two blocks, no tail."""
    u = longs.astype(np.int64).view(np.uint64)
    low = (u & np.uint64(0xFFFFFFFF)).astype(np.uint32)
    high = (u >> np.uint64(32)).astype(np.uint32)
    h = _mix_h(_mix_h(np.zeros(len(u), np.uint32), low), high)
    return _finish(h, np.full(len(u), 8, np.uint32))


def _hash_bytes(values: pa.Array, seed: int = 0) -> np.ndarray:
    """murmur3_x86_32 of each value of a ``large_binary`` array (nulls hash their empty bytes).

    Block ``j`` of every value long enough is mixed in one numpy step; values are visited
    longest first, so each step works on a prefix of them: O(total bytes) work in
    (longest value / 4) steps."""
    n = len(values)
    if n == 0:
        return np.zeros(0, np.uint32)
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, np.int64, count=n + 1, offset=values.offset * 8)
    data = np.frombuffer(data_buf, np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    starts = offsets[:-1]
    lengths = offsets[1:] - starts
    blocks = lengths // 4
    order = np.argsort(-blocks, kind="stable")
    by_blocks = blocks[order]
    ordered_starts = starts[order]
    h = np.full(n, np.uint32(seed), np.uint32)
    for j in range(int(by_blocks[0])):
        m = int(np.searchsorted(-by_blocks, -j, side="left"))  # values with more than j blocks
        at = ordered_starts[:m] + 4 * j
        k = (
            data[at].astype(np.uint32)
            | (data[at + 1].astype(np.uint32) << np.uint32(8))
            | (data[at + 2].astype(np.uint32) << np.uint32(16))
            | (data[at + 3].astype(np.uint32) << np.uint32(24))
        )
        h[order[:m]] = _mix_h(h[order[:m]], k)
    tails = lengths % 4
    tail_at = starts + 4 * blocks
    k = np.zeros(n, np.uint32)
    for i in range(3):
        has = tails > i
        k[has] |= data[tail_at[has] + i].astype(np.uint32) << np.uint32(8 * i)
    has_tail = tails > 0
    h[has_tail] ^= _mix_k(k[has_tail])
    return _finish(h, lengths)
