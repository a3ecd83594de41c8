"""Deletion vectors of a Delta table (the protocol's "Deletion Vectors" section): which rows of a
data file are deleted, so that a commit can delete rows without rewriting their files.

A deletion vector is a set of row positions (0-based, in the file's row order) in the protocol's
``RoaringBitmapArray`` format: the magic number ``1681511377`` (int32, little-endian), the number
of 32-bit buckets (int64), then per bucket its high 32 bits (int32) and a 32-bit Roaring bitmap in
the portable serialization (pyroaring's). Its :class:`Descriptor` (the ``deletionVector`` of an
``add`` or ``remove`` action) says where the bytes are:

* ``i``: inline, in the log: Z85 of the bytes (padded to a multiple of 4; ``sizeInBytes`` says how
  many are real). What :func:`store_all` writes for a small vector (up to :data:`INLINE_MAX_BYTES`).
* ``u``: in a file under the table root named from a UUID, ``<prefix>/deletion_vector_<uuid>.bin``
  (``pathOrInlineDv`` is the prefix and the UUID's 20-character Z85). The file is a format byte
  (1), then per vector its size (int32, big-endian), its bytes and their CRC-32 (int32,
  big-endian); ``offset`` is where the size is. :func:`store_all` writes a commit's vectors into
  one file, through the same file layer as the data files (written whole under its name, durable
  with the commit's flush).
* ``p``: a file by absolute path; read, never written.

A file's logical rows are its rows minus its deletion vector; the log tells files apart by path and
vector (:meth:`Descriptor.unique_id`), so a ``remove`` must carry the vector of the ``add`` it removes.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
from pyroaring import BitMap64

from parka.errors import CommitError

from .. import _storage

__all__ = [
    "INLINE_MAX_BYTES",
    "MAGIC",
    "Descriptor",
    "decode",
    "encode",
    "load",
    "store_all",
    "z85_decode",
    "z85_encode",
]

MAGIC = 1681511377
"""The ``RoaringBitmapArray`` format's magic number (int32, little-endian, first in the bytes)."""

INLINE_MAX_BYTES = 1024
"""The largest vector :func:`store_all` puts in the log itself; a larger one goes to a file of its own
(the log is read by every reader's table open, and every checkpoint repeats it)."""

_FILE_FORMAT = 1
_UUID_CHARS = 20
_Z85 = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}
_Z85_ARRAY = np.frombuffer(_Z85, dtype=np.uint8)


def z85_encode(data: bytes) -> str:
    """Z85 (ZeroMQ's Base85, Delta's ``Base85Codec``) of ``data`` zero-padded to a multiple of 4 bytes."""
    data += b"\0" * (-len(data) % 4)
    words = np.frombuffer(data, dtype=">u4").astype(np.uint64)
    digits = np.stack([words // 85**i % 85 for i in range(4, -1, -1)], axis=1)  # most significant first
    return _Z85_ARRAY[digits.ravel()].tobytes().decode("ascii")


def z85_decode(text: str, size: int | None = None) -> bytes:
    """The bytes of Z85 ``text``, the first ``size`` of them when given.

    Raises:
        ValueError: ``text`` is not Z85 (a length not a multiple of 5, a character outside the alphabet).
    """
    raw = text.encode("ascii")
    if len(raw) % 5:
        raise ValueError(f"Z85 text of {len(raw)} characters (not a multiple of 5)")
    out = bytearray()
    try:
        for i in range(0, len(raw), 5):
            word = 0
            for c in raw[i : i + 5]:
                word = word * 85 + _Z85_VALUE[c]
            out += word.to_bytes(4, "big")
    except (KeyError, OverflowError) as exc:
        raise ValueError(f"not Z85 text: {text[:40]!r}") from exc
    return bytes(out if size is None else out[:size])


def encode(rows: Iterable[int]) -> bytes:
    """The ``RoaringBitmapArray`` bytes of the row positions ``rows`` (any order, repeats allowed):
    the magic number, then CRoaring's portable 64-bit serialization (pyroaring's ``BitMap64``),
    which is the protocol's bucket list byte for byte.

    Raises:
        ValueError: a negative position.
    """
    return _encode(rows)[0]


def _encode(rows: Iterable[int]) -> tuple[bytes, int]:
    """:func:`encode`'s bytes and the number of distinct rows they hold."""
    positions = rows if isinstance(rows, np.ndarray) else np.fromiter(rows, dtype=np.int64)
    if positions.size and int(positions.min()) < 0:
        raise ValueError(f"a row position is negative: {int(positions.min())}")
    bitmap = BitMap64(positions.astype(np.uint64))
    return struct.pack("<i", MAGIC) + bitmap.serialize(), len(bitmap)


def decode(data: bytes) -> np.ndarray:
    """The sorted row positions (int64) of ``RoaringBitmapArray`` bytes.

    Raises:
        ValueError: not that format (the magic number, a truncated or malformed bitmap).
    """
    if len(data) < 12:
        raise ValueError(f"a deletion vector of {len(data)} bytes (at least 12: magic number, bucket count)")
    (magic,) = struct.unpack_from("<i", data)
    if magic != MAGIC:
        raise ValueError(f"not a deletion vector: magic number {magic}, not {MAGIC}")
    try:
        bitmap = BitMap64.deserialize(data[4:])
    except ValueError as exc:
        raise ValueError(f"a deletion vector's bitmap is malformed: {exc}") from exc
    return np.array(bitmap.to_array(), dtype=np.int64)


@dataclass(frozen=True)
class Descriptor:
    """A ``deletionVector`` of the log: where the vector is, its size and how many rows it deletes."""

    storage_type: str
    path_or_inline_dv: str
    size_in_bytes: int
    cardinality: int
    offset: int | None = None

    @classmethod
    def from_json(cls, value: Mapping[str, Any]) -> Descriptor:
        """From the log's JSON object (or a checkpoint's struct, as a mapping).

        Raises:
            ValueError: a field is missing or of a wrong type, or an unknown storage type.
        """
        try:
            found = cls(
                str(value["storageType"]),
                str(value["pathOrInlineDv"]),
                int(value["sizeInBytes"]),
                int(value["cardinality"]),
                None if value.get("offset") is None else int(value["offset"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a deletion vector descriptor: {dict(value)!r} ({exc})") from exc
        if found.storage_type not in ("i", "u", "p"):
            raise ValueError(f"deletion vector storage type {found.storage_type!r} (the protocol knows i, u and p)")
        return found

    def to_json(self) -> dict[str, Any]:
        """The log's JSON object; ``offset`` only for a vector in a file."""
        out: dict[str, Any] = {
            "storageType": self.storage_type,
            "pathOrInlineDv": self.path_or_inline_dv,
            "sizeInBytes": self.size_in_bytes,
            "cardinality": self.cardinality,
        }
        if self.offset is not None:
            out["offset"] = self.offset
        return out

    def unique_id(self) -> str:
        """What the log tells vectors apart by (with the file's path): storage type, path or
        inline bytes, and ``@offset`` for a vector in a file."""
        at = "" if self.offset is None else f"@{self.offset}"
        return f"{self.storage_type}{self.path_or_inline_dv}{at}"

    def relative_path(self) -> str | None:
        """The vector file under the table root (storage type ``u``); ``None`` otherwise."""
        if self.storage_type != "u":
            return None
        prefix, encoded = self.path_or_inline_dv[:-_UUID_CHARS], self.path_or_inline_dv[-_UUID_CHARS:]
        name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
        return f"{prefix}/{name}" if prefix else name


def store_all(
    table_uri: str,
    vectors: Mapping[str, Iterable[int]],
    storage_options: Mapping[str, str] | None = None,
    *,
    inline_max_bytes: int | None = None,
) -> dict[str, Descriptor]:
    """Deletion vectors of the row positions ``vectors`` names (by data file): each inline when
    its bytes fit in ``inline_max_bytes`` (default :data:`INLINE_MAX_BYTES`), the others one
    after the other in one new file under the table root, each at its own offset (as
    delta-spark writes a commit's vectors: one write per commit, not one per data file). The
    file is written whole; durable once :func:`parka.lake._storage.make_durable` ran, as the data
    files before the commit that names it.

    Raises:
        ValueError: a vector of no rows, or a negative position.
        CommitError: the file cannot be written.
    """
    limit = INLINE_MAX_BYTES if inline_max_bytes is None else inline_max_bytes
    out: dict[str, Descriptor] = {}
    name = uuid.uuid4()
    body = [bytes([_FILE_FORMAT])]
    offset = 1
    for path, rows in vectors.items():
        data, cardinality = _encode(rows)
        if not cardinality:
            raise ValueError(f"a deletion vector of no rows for {path} (a file without deleted rows has none)")
        if len(data) <= limit:
            out[path] = Descriptor("i", z85_encode(data), len(data), cardinality)
            continue
        out[path] = Descriptor("u", z85_encode(name.bytes), len(data), cardinality, offset=offset)
        body += [struct.pack(">i", len(data)), data, struct.pack(">I", zlib.crc32(data))]
        offset += 4 + len(data) + 4
    if len(body) > 1:
        _storage.write_data_file(table_uri, f"deletion_vector_{name}.bin", body, storage_options)
    return out


def load(table_uri: str, descriptor: Descriptor, storage_options: Mapping[str, str] | None = None) -> np.ndarray:
    """The sorted row positions (int64) ``descriptor`` deletes.

    Raises:
        CommitError: the vector's file cannot be read, or its bytes do not match the descriptor
            (size, checksum, cardinality, format), named with the descriptor.
    """
    try:
        if descriptor.storage_type == "i":
            data = z85_decode(descriptor.path_or_inline_dv, descriptor.size_in_bytes)
        else:
            data = _from_file(table_uri, descriptor, storage_options)
        rows = decode(data)
    except ValueError as exc:
        raise CommitError(f"deletion vector {descriptor.unique_id()[:60]}: {exc}") from exc
    if rows.size != descriptor.cardinality:
        raise CommitError(
            f"deletion vector {descriptor.unique_id()[:60]} holds {rows.size} rows, "
            f"its descriptor says {descriptor.cardinality}"
        )
    return rows


def _from_file(table_uri: str, descriptor: Descriptor, storage_options: Mapping[str, str] | None) -> bytes:
    relative = descriptor.relative_path()
    if relative is None:  # 'p': an absolute path
        raise ValueError(f"a deletion vector by absolute path ({descriptor.path_or_inline_dv}) is not read by parka")
    start = descriptor.offset or 0
    raw = _storage.read_file(table_uri, relative, storage_options)
    if not raw or raw[0] != _FILE_FORMAT:
        raise ValueError(f"{relative} is not a deletion vector file of format {_FILE_FORMAT}")
    end = start + 4 + descriptor.size_in_bytes + 4
    if end > len(raw):
        raise ValueError(f"{relative} ends at byte {len(raw)}, before the vector's end at {end}")
    (size,) = struct.unpack_from(">i", raw, start)
    if size != descriptor.size_in_bytes:
        raise ValueError(f"{relative} says {size} bytes at offset {start}, the descriptor {descriptor.size_in_bytes}")
    data = raw[start + 4 : start + 4 + size]
    (crc,) = struct.unpack_from(">I", raw, start + 4 + size)
    if zlib.crc32(data) != crc:
        raise ValueError(f"{relative}: the vector at offset {start} fails its CRC-32")
    return data
