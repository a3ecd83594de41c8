"""Data files under a Delta table's root: where they live (local or an object store, from the
table URI and its storage options), writing one so that no partial file ever carries its final
name, one flush per commit, deleting and listing; and, for the orphan cleanup, the Delta log's
files as bytes (:func:`list_log`, :func:`read_file`): what they mean is
``consumer/_logscan.py``'s business. Nothing here writes the Delta log.

Everything the filesystem raises leaves as :class:`~parka.errors.CommitError`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import os
import uuid
from collections.abc import Collection, Mapping
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from parka._crash import crash_point, crash_point_armed
from parka.errors import CommitError

__all__ = [
    "FileInfo",
    "check_relative",
    "delete_files",
    "list_files",
    "list_log",
    "make_durable",
    "read_file",
    "read_parquet_footer",
    "write_data_file",
]

_libc_name = ctypes.util.find_library("c")
_LIBC = ctypes.CDLL(_libc_name, use_errno=True) if _libc_name else None


@dataclass(frozen=True)
class FileInfo:
    """A file under the table root: ``path`` relative to the root, size in bytes, mtime (UTC)."""

    path: str
    size: int
    mtime: dt.datetime | None


def check_relative(path: str) -> None:
    """Raise ``ValueError`` unless ``path`` is a clean data file path relative to the table root."""
    parts = path.split("/")
    if not path or "://" in path or parts[0] == "_delta_log" or any(p in ("", ".", "..") for p in parts):
        raise ValueError(f"not a clean data file path relative to the table root: {path!r}")


_S3_OPTIONS = {
    "aws_access_key_id": "access_key",
    "aws_secret_access_key": "secret_key",
    "aws_session_token": "session_token",
    "aws_region": "region",
}


def _s3_kwargs(storage_options: Mapping[str, str]) -> dict[str, str]:
    """``S3FileSystem`` arguments from deltalake's common AWS storage options (keys in any case)."""
    options = {k.lower(): v for k, v in storage_options.items()}
    kwargs = {arg: options[key] for key, arg in _S3_OPTIONS.items() if key in options}
    endpoint = options.get("aws_endpoint_url") or options.get("aws_endpoint")
    if endpoint:
        parsed = urlparse(endpoint if "://" in endpoint else "https://" + endpoint)
        kwargs.update(endpoint_override=parsed.netloc + parsed.path.rstrip("/"), scheme=parsed.scheme)
    return kwargs


def _filesystem(uri: str, storage_options: Mapping[str, str] | None) -> tuple[pafs.FileSystem, str]:
    """The filesystem holding the table at ``uri``, and the table root in it (no trailing slash)."""
    parsed = urlparse(uri)
    if len(parsed.scheme) <= 1 or parsed.scheme == "file":  # a local path, a drive letter, file://
        return pafs.LocalFileSystem(), os.path.abspath(unquote(parsed.path) if parsed.scheme == "file" else uri)
    kwargs = _s3_kwargs(storage_options) if storage_options and parsed.scheme in ("s3", "s3a") else {}
    try:
        if kwargs:
            return pafs.S3FileSystem(**kwargs), (parsed.netloc + parsed.path).rstrip("/")
        filesystem, path = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CommitError(f"no filesystem for {parsed.scheme}:// ({exc})") from exc
    return filesystem, path.rstrip("/")


def write_data_file(
    table_uri: str, relative_path: str, data: bytes, storage_options: Mapping[str, str] | None = None
) -> int:
    """Write ``data`` as ``relative_path`` under the table root; returns its size in bytes.

    A local file is written under a hidden temporary name and renamed, so a crash never leaves a
    partial file under the final name (at worst a ``.*.tmp`` that :func:`list_files` shows). It
    is not fsynced here: call :func:`make_durable` once before the commit that references it (one
    sync per commit instead of one per file, 5x the write rate on this project's machines). An
    object store publishes an object only once it is whole and durable.

    Raises:
        ValueError: ``relative_path`` is not a clean relative path.
        CommitError: the write failed.
    """
    check_relative(relative_path)
    filesystem, root = _filesystem(table_uri, storage_options)
    try:
        if isinstance(filesystem, pafs.LocalFileSystem):
            _write_local(os.path.join(root, *relative_path.split("/")), data)
        else:
            with filesystem.open_output_stream(f"{root}/{relative_path}") as sink:
                sink.write(data)
    except (pa.ArrowException, OSError) as exc:
        raise CommitError(f"cannot write data file {relative_path}: {exc}") from exc
    return len(data)


def _write_local(target: str, data: bytes) -> None:
    directory = os.path.dirname(target)
    os.makedirs(directory, exist_ok=True)
    temp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temp, "wb") as fh:
            half = len(data) // 2
            fh.write(data[:half])
            if crash_point_armed("mid-write"):
                fh.flush()
                crash_point("mid-write")  # a test's kill -9 in the middle of a write
            fh.write(data[half:])
        os.replace(temp, target)
    except BaseException:
        with suppress(OSError):
            os.unlink(temp)
        raise


def make_durable(table_uri: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Flush data files written since the last call to stable storage, before a commit names them.

    Local tables: one ``syncfs`` of the table's file system (Linux), else ``os.sync``; object
    stores: nothing to do. Raises :class:`CommitError` when the flush fails, so the commit that
    would reference unflushed files is not made.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    if not isinstance(filesystem, pafs.LocalFileSystem):
        return
    try:
        fd = os.open(root, os.O_RDONLY)
    except OSError as exc:
        raise CommitError(f"cannot open table directory {root} to flush it: {exc}") from exc
    try:
        if _LIBC is not None and hasattr(_LIBC, "syncfs"):
            if _LIBC.syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise CommitError(f"syncfs of {root} failed: {os.strerror(err)}")
        else:
            os.sync()
    finally:
        os.close(fd)


def delete_files(
    table_uri: str, relative_paths: Collection[str], storage_options: Mapping[str, str] | None = None
) -> None:
    """Delete files under the table root; files already gone are fine.

    Raises:
        ValueError: a path that is not a clean relative path.
        CommitError: a deletion failed.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    for path in relative_paths:
        check_relative(path)
        try:
            filesystem.delete_file(f"{root}/{path}")
        except FileNotFoundError:
            continue
        except (pa.ArrowException, OSError) as exc:
            raise CommitError(f"cannot delete {path}: {exc}") from exc


def list_files(
    table_uri: str, storage_options: Mapping[str, str] | None = None, *, prefix_dirs: Collection[str] = ()
) -> list[FileInfo]:
    """Files under the table root, or under its ``prefix_dirs``, sorted by path.

    ``_delta_log`` is never listed; temporary files of interrupted writes are.

    Raises:
        CommitError: the listing failed.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    found: dict[str, FileInfo] = {}
    for prefix in prefix_dirs or ("",):
        base = f"{root}/{prefix.strip('/')}".rstrip("/")
        try:
            infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
        except (pa.ArrowException, OSError) as exc:
            raise CommitError(f"cannot list {prefix or 'the table root'}: {exc}") from exc
        for info in infos:
            path = info.path[len(root) + 1 :]
            if info.type == pafs.FileType.File and path.split("/")[0] != "_delta_log":
                mtime = info.mtime
                if mtime is not None and mtime.tzinfo is None:
                    mtime = mtime.replace(tzinfo=dt.timezone.utc)
                found[path] = FileInfo(path, info.size or 0, mtime)
    return [found[path] for path in sorted(found)]


def list_log(table_uri: str, storage_options: Mapping[str, str] | None = None) -> list[str]:
    """The names of the files directly in the table's ``_delta_log`` folder, sorted.

    Raises:
        CommitError: the listing failed.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    base = f"{root}/_delta_log"
    try:
        infos = filesystem.get_file_info(pafs.FileSelector(base, recursive=False, allow_not_found=True))
    except (pa.ArrowException, OSError) as exc:
        raise CommitError(f"cannot list the Delta log of {table_uri}: {exc}") from exc
    return sorted(info.base_name for info in infos if info.type == pafs.FileType.File)


def read_file(
    table_uri: str, relative_path: str, storage_options: Mapping[str, str] | None = None, *, raise_missing: bool = False
) -> bytes:
    """The bytes of a file under the table root (``_delta_log/...`` included).

    Raises:
        FileNotFoundError: the file is missing, with ``raise_missing`` (for a caller that tells
            a deleted file from a failure).
        CommitError: the file is missing (without ``raise_missing``) or cannot be read.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    try:
        with filesystem.open_input_file(f"{root}/{relative_path}") as source:
            data: bytes = source.read()
    except FileNotFoundError:
        if raise_missing:
            raise
        raise CommitError(f"cannot read {relative_path}: no such file") from None
    except (pa.ArrowException, OSError) as exc:
        raise CommitError(f"cannot read {relative_path}: {exc}") from exc
    return data


def read_parquet_footer(
    table_uri: str, relative_path: str, storage_options: Mapping[str, str] | None = None
) -> pq.FileMetaData:
    """A data file's Parquet footer, reading only its end (not the whole file).

    Raises:
        CommitError: the file is missing or has no readable footer.
    """
    filesystem, root = _filesystem(table_uri, storage_options)
    try:
        with filesystem.open_input_file(f"{root}/{relative_path}") as source:
            return pq.read_metadata(source)
    except (pa.ArrowException, OSError) as exc:
        raise CommitError(f"cannot read the Parquet footer of {relative_path}: {exc}") from exc
