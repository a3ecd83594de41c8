"""Stitching: Parquet files of one schema become one file, no page decoded or re-encoded.

Each source's row groups are copied byte for byte (column chunks with their dictionary pages,
data pages and page CRCs) one after the other; a new footer lists them all, with every file
offset shifted by where its bytes moved. Page indexes (column and offset indexes) are written
after the row groups, as Parquet writers place them, the offset indexes' page locations shifted.

Footers are read and written with fastparquet's Thrift implementation of the Parquet format
(``fastparquet.cencoding``; it keeps fields it does not know, such as size statistics, as they
were). Where copying is not known to be safe (encrypted files, bloom filters, column chunks that
are not one contiguous range, schemas or key-value metadata that differ) :class:`NotStitchable`
says why, and the caller writes the sources as files of their own.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import struct
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq


def _thrift_codec() -> Any:
    """``fastparquet.cencoding``, without the rest of fastparquet: its package ``__init__`` imports
    its writer and with it pandas, half a second of every ``parka ingest`` start, for a codec
    that needs only numpy. The extension is loaded from its file under its own name (importlib's
    recipe for importing a file directly) and registered, so a later ``import fastparquet`` uses
    this one; anything unexpected falls back to the plain import."""
    if "fastparquet.cencoding" in sys.modules:
        return sys.modules["fastparquet.cencoding"]
    try:
        package = importlib.util.find_spec("fastparquet")
        assert package is not None and package.submodule_search_locations
        spec = importlib.machinery.PathFinder.find_spec("cencoding", list(package.submodule_search_locations))
        assert spec is not None and spec.loader is not None
        spec.name = "fastparquet.cencoding"
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except Exception:  # any failure: the package's own import
        from fastparquet import cencoding

        return cencoding
    sys.modules["fastparquet.cencoding"] = module
    return module


cencoding = _thrift_codec()

__all__ = [
    "Footer",
    "NotStitchable",
    "Source",
    "encrypted_columns",
    "parts_metadata",
    "read_footer",
    "row_groups",
    "stitch",
    "stitch_parts",
]

MAGIC = b"PAR1"


class NotStitchable(Exception):
    """The sources cannot be stitched safely; the message says why."""


@dataclass(frozen=True)
class Footer:
    """A Parquet file's bytes and its parsed footer (``FileMetaData``)."""

    data: bytes
    meta: Any  # fastparquet ThriftObject "FileMetaData"

    @property
    def num_row_groups(self) -> int:
        return len(self.meta.row_groups or ())

    def row_group_bytes(self, index: int) -> int:
        """The bytes of row group ``index``'s column chunks (what stitching copies of it)."""
        return sum(c.meta_data.total_compressed_size for c in self.meta.row_groups[index].columns)


@dataclass(frozen=True)
class Source:
    """Row groups of one file to copy: ``row_groups`` indexes (``None``: all, in order)."""

    footer: Footer
    row_groups: Sequence[int] | None = None


def read_footer(data: bytes) -> Footer:
    """Parse a Parquet file's footer.

    Raises:
        NotStitchable: not a plain Parquet file (an encrypted footer, a bad magic or length).
    """
    if len(data) < 12 or data[:4] != MAGIC or data[-4:] != MAGIC:
        raise NotStitchable("not a plain Parquet file (magic bytes; an encrypted footer says PARE)")
    (length,) = struct.unpack("<I", data[-8:-4])
    if length <= 0 or length > len(data) - 12:
        raise NotStitchable(f"footer length {length} does not fit a file of {len(data)} bytes")
    try:
        meta = cencoding.from_buffer(data[-8 - length : -8], "FileMetaData")
    except Exception as exc:  # the Thrift reader raises plain errors on garbage
        raise NotStitchable(f"unreadable footer: {exc}") from exc
    return Footer(data, meta)


def encrypted_columns(data: bytes, thrift_size: int | None = None) -> frozenset[int]:
    """Indexes (footer column order) of the encrypted columns of a file with a plaintext footer;
    empty for a plain file or one whose footer is not readable here (the caller's own footer
    read reports that). ``thrift_size``: pyarrow's ``FileMetaData.serialized_size`` when the
    caller has it. A plaintext footer of an encrypted file is followed by its 28-byte signature
    inside the footer length; when the two are equal there is none, and the footer is not
    parsed again (about 0.1 ms for a 10,000-row segment: the ingestion hot path).

    Why not pyarrow: its ``FileMetaData`` gives no way to tell, and asking an encrypted column
    chunk for its metadata without the key aborts the process (pyarrow 26: an uncaught
    ``parquet::ParquetException`` from ``RowGroupMetaData.column``), so the caller must know
    which columns not to ask for.
    """
    if thrift_size is not None and len(data) >= 12 and struct.unpack("<I", data[-8:-4])[0] == thrift_size:
        return frozenset()
    try:
        meta = read_footer(data).meta
    except NotStitchable:
        return frozenset()
    if not _has(meta, _ENCRYPTION_ALGORITHM):
        return frozenset()
    return frozenset(i for rg in meta.row_groups or () for i, cc in enumerate(rg.columns or ()) if _has(cc, _CRYPTO))


# Thrift field ids of the encryption fields (parquet.thrift). fastparquet's Thrift classes lack
# the encryption structs: reading ``encryption_algorithm`` or ``crypto_metadata`` of an encrypted
# file raises KeyError('EncryptionAlgorithm'), so these look at the parsed fields by id.
_ENCRYPTION_ALGORITHM, _FOOTER_SIGNING_KEY = 8, 9  # FileMetaData
_CRYPTO, _ENCRYPTED_METADATA = 8, 9  # ColumnChunk


# Thrift field ids (parquet.thrift) of what stitching reads and moves. The hot loops work on the
# parsed dicts (a ThriftObject's ``contents``) by id: attribute access wraps every nested struct
# in a new object, and a commit stitches every segment's row groups (about a third of its CPU).
_ROW_GROUPS = 4  # FileMetaData
_RG_COLUMNS, _RG_NUM_ROWS, _RG_FILE_OFFSET, _RG_ORDINAL = 1, 3, 5, 7  # RowGroup
_CC_FILE_PATH, _CC_FILE_OFFSET, _CC_META = 1, 2, 3  # ColumnChunk
_CC_OFFSET_INDEX, _CC_OFFSET_INDEX_LENGTH, _CC_COLUMN_INDEX, _CC_COLUMN_INDEX_LENGTH = 4, 5, 6, 7
_MD_COMPRESSED_SIZE, _MD_DATA_PAGE, _MD_INDEX_PAGE, _MD_DICTIONARY_PAGE, _MD_BLOOM = 7, 9, 10, 11, 14  # ColumnMetaData


def _has(obj: Any, field_id: int) -> bool:
    return obj.contents.get(field_id) is not None


def _chunk_start(md: dict[int, Any]) -> int:
    """Where a column chunk's bytes start (``md``: its ``ColumnMetaData`` dict): its dictionary
    page, else its first data page."""
    data = start = md[_MD_DATA_PAGE]
    for other in (md.get(_MD_DICTIONARY_PAGE), md.get(_MD_INDEX_PAGE)):
        if other is not None and 0 < other < data:
            start = min(start, other)
    return int(start)


def _check_compatible(first: Any, other: Any) -> None:
    if _has(other, _ENCRYPTION_ALGORITHM) or _has(other, _FOOTER_SIGNING_KEY):
        raise NotStitchable("an encrypted file")
    for field_id, name, problem in (
        (2, "schema", "Parquet schemas differ"),
        (5, "key_value_metadata", "key-value metadata (the stored Arrow schema) differs"),
        (7, "column_orders", "column orders differ"),
    ):
        # equal parsed fields first (one C comparison); else fastparquet's own, looser, equality
        if other.contents.get(field_id) != first.contents.get(field_id) and getattr(other, name) != getattr(
            first, name
        ):
            raise NotStitchable(problem)


def _row_group_range(rg: dict[int, Any]) -> tuple[int, int]:
    """The one contiguous byte range ``[start, end)`` holding all of a row group's column chunks
    (``rg``: its ``RowGroup`` dict).

    Raises:
        NotStitchable: a chunk in another file, encrypted, with a bloom filter, or chunks that
            leave gaps or overlap (then their bytes are not all the row group's own).
    """
    spans = []
    for cc in rg[_RG_COLUMNS]:
        md = cc.get(_CC_META)
        if cc.get(_CC_FILE_PATH) is not None:
            raise NotStitchable("a column chunk stored in another file")
        if md is None or cc.get(_CRYPTO) is not None or cc.get(_ENCRYPTED_METADATA) is not None:
            raise NotStitchable("an encrypted column chunk")
        if md.get(_MD_BLOOM) is not None:
            raise NotStitchable("a bloom filter")
        start = _chunk_start(md)
        spans.append((start, start + md[_MD_COMPRESSED_SIZE]))
    spans.sort()
    for (_, end), (start, _) in pairwise(spans):
        if start != end:
            raise NotStitchable("column chunks are not one contiguous range")
    if not spans:
        raise NotStitchable("a row group without columns")
    return spans[0][0], spans[-1][1]


def row_groups(data: bytes) -> list[bytes]:
    """The stored bytes of each row group of a Parquet file, in order: what stitching copies
    from a segment into a data file (to check that a table holds its segments byte for byte).

    Raises:
        NotStitchable: see :func:`read_footer` and :func:`_row_group_range`.
    """
    footer = read_footer(data)
    out = []
    for index in range(footer.num_row_groups):
        start, end = _row_group_range(footer.meta.contents[_ROW_GROUPS][index])
        out.append(data[start:end])
    return out


def _shift(value: int, delta: int) -> int:
    """An offset moved by ``delta``; 0 (a writer's "none" for an optional offset) stays 0."""
    return value if value <= 0 else value + delta


def stitch(sources: Sequence[Source]) -> bytes:
    """One Parquet file holding the chosen row groups of ``sources``, in order: the
    :func:`stitch_parts` joined.

    Raises:
        NotStitchable: see :func:`stitch_parts`.
    """
    return b"".join(stitch_parts(sources))


def stitch_parts(sources: Sequence[Source]) -> list[bytes]:
    """The bytes of one Parquet file holding the chosen row groups of ``sources``, in order, as
    the parts to write one after the other (a writer need not join a whole file in memory): the
    magic, each row group, the page indexes, and last the footer, its length and the magic.

    The file's size is 4 + the copied row groups' bytes + the page indexes + the footer + 8.

    Raises:
        NotStitchable: see :func:`_check_compatible` and :func:`_row_group_range`; also a page
            index this module cannot place (an offset index it cannot read).
    """
    if not sources:
        raise ValueError("nothing to stitch")
    first = sources[0].footer.meta
    parts: list[bytes] = [MAGIC]
    pos = len(MAGIC)
    row_groups: list[dict[int, Any]] = []
    column_indexes: list[tuple[dict[int, Any], bytes]] = []  # (column chunk, bytes) written after the data
    offset_indexes: list[tuple[dict[int, Any], bytes]] = []
    num_rows = 0
    for source in sources:
        footer = source.footer
        _check_compatible(first, footer.meta)
        wanted = range(footer.num_row_groups) if source.row_groups is None else source.row_groups
        for index in wanted:
            rg = footer.meta.contents[_ROW_GROUPS][index]
            start, end = _row_group_range(rg)
            delta = pos - start
            parts.append(footer.data[start:end])
            pos += end - start
            out = _editable_copy(rg)
            if out.get(_RG_FILE_OFFSET) is not None:
                out[_RG_FILE_OFFSET] = start + delta
            if out.get(_RG_ORDINAL) is not None:
                out[_RG_ORDINAL] = len(row_groups)
            for cc in out[_RG_COLUMNS]:  # the copies: edits never reach the source's footer
                md = cc[_CC_META]
                md[_MD_DATA_PAGE] += delta
                for page in (_MD_DICTIONARY_PAGE, _MD_INDEX_PAGE):
                    if md.get(page) is not None:
                        md[page] = _shift(md[page], delta)
                if cc.get(_CC_FILE_OFFSET) is not None and cc[_CC_FILE_OFFSET] > 0:
                    cc[_CC_FILE_OFFSET] += delta
                if cc.get(_CC_COLUMN_INDEX) is not None:
                    o, n = cc[_CC_COLUMN_INDEX], cc[_CC_COLUMN_INDEX_LENGTH]
                    column_indexes.append((cc, footer.data[o : o + n]))
                if cc.get(_CC_OFFSET_INDEX) is not None:
                    o, n = cc[_CC_OFFSET_INDEX], cc[_CC_OFFSET_INDEX_LENGTH]
                    offset_indexes.append((cc, _shifted_offset_index(footer.data[o : o + n], delta)))
            row_groups.append(out)
            num_rows += out[_RG_NUM_ROWS]
    for cc, blob in column_indexes:
        cc[_CC_COLUMN_INDEX], cc[_CC_COLUMN_INDEX_LENGTH] = pos, len(blob)
        parts.append(blob)
        pos += len(blob)
    for cc, blob in offset_indexes:
        cc[_CC_OFFSET_INDEX], cc[_CC_OFFSET_INDEX_LENGTH] = pos, len(blob)
        parts.append(blob)
        pos += len(blob)
    meta = cencoding.ThriftObject("FileMetaData", dict(first.contents))
    meta.num_rows = num_rows
    meta[_ROW_GROUPS] = row_groups  # plain dicts, as the copies are
    footer_bytes = bytes(meta.to_bytes())
    parts += [footer_bytes, struct.pack("<I", len(footer_bytes)), MAGIC]
    return parts


def _editable_copy(rg: dict[int, Any]) -> dict[int, Any]:
    """A copy of a ``RowGroup`` dict whose offsets :func:`stitch` may change without touching the
    source: the row group, its column chunks and their ``ColumnMetaData`` are copied (the only
    levels holding offsets); statistics, paths and encodings stay shared, never edited. A deep
    copy cost about 4 ms per row group of the flights (half of ``parka ingest``'s CPU).
    """
    chunks = []
    for cc in rg[_RG_COLUMNS]:
        chunk = dict(cc)
        if chunk.get(_CC_META) is not None:
            chunk[_CC_META] = dict(chunk[_CC_META])
        chunks.append(chunk)
    return {**rg, _RG_COLUMNS: chunks}


def parts_metadata(parts: Sequence[bytes]) -> pq.FileMetaData:
    """The footer of a file :func:`stitch_parts` made, read from its last parts alone (the footer,
    its length and the magic): for the statistics, without joining the file."""
    return pq.read_metadata(pa.BufferReader(b"".join([MAGIC, *parts[-3:]])))


def _shifted_offset_index(blob: bytes, delta: int) -> bytes:
    """An ``OffsetIndex`` with every page location moved by ``delta`` bytes."""
    try:
        index = cencoding.from_buffer(blob, "OffsetIndex")
        for location in index.page_locations:
            location.offset = location.offset + delta
        return bytes(index.to_bytes())
    except Exception as exc:  # the Thrift reader raises plain errors on garbage
        raise NotStitchable(f"unreadable offset index: {exc}") from exc
