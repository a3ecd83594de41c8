"""Data files under a Delta table's root: where they live (local or an object store, from the
table URI and its storage options), writing one so that no partial file ever carries its final
name, one flush per commit, deleting and listing; and, for the orphan cleanup, the Delta log's
files as bytes (:func:`list_log`, :func:`read_file`): what they mean is
``lake/delta/_logscan.py``'s business. The one write that must not replace a file is
:func:`create_log_file` (a Delta commit parka writes itself, ``lake/delta/_dv_commit.py``: put if
absent); everything else of the log is delta-rs'.

A local table is plain files (temporary name + rename, one ``syncfs`` per commit). Every other
URI (``s3://``, ``s3a://``, ``az://``, ``abfss://``, ``gs://``...) goes through obstore, the
Python binding of the Rust ``object_store`` crate delta-rs writes the Delta log with, built in
one place (:func:`_object_store`) from the very storage options delta-rs gets, after
:func:`parka.config.storage_options_for` (which makes S3 commits safe): one set of
credentials, one endpoint, for the data files and the log.

Everything the filesystem or the store raises leaves as :class:`~parka.errors.CommitError`.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import datetime as dt
import functools
import logging
import os
import uuid
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlparse

import obstore as obs
import pyarrow as pa
import pyarrow.parquet as pq
from obstore.exceptions import (
    AlreadyExistsError,
    BaseError,
    NotFoundError,
    PreconditionError,
    UnknownConfigurationKeyError,
)
from obstore.store import ObjectStore, from_url

from parka.config import storage_options_for
from parka.crash import crash_point, crash_point_armed
from parka.errors import CommitError

log = logging.getLogger("parka.storage")

__all__ = [
    "FileExists",
    "FileInfo",
    "check_relative",
    "create_log_file",
    "delete_files",
    "existing_files",
    "list_files",
    "list_log",
    "log_file_exists",
    "make_durable",
    "object_store",
    "read_columns",
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


# object_store's client settings (ClientConfigKey): obstore takes them apart from the store's
# own keys, without the ``aws_`` / ``azure_`` / ``google_`` prefix that delta-rs also accepts.
_CLIENT_KEYS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "http2_keep_alive_interval",
        "http2_keep_alive_timeout",
        "http2_keep_alive_while_idle",
        "http2_max_frame_size",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "proxy_ca_certificate",
        "proxy_excludes",
        "randomize_addresses",
        "read_timeout",
        "timeout",
        "user_agent",
    }
)
_BOOL_CLIENT_KEYS = frozenset(
    {"allow_http", "allow_invalid_certificates", "http1_only", "http2_only", "http2_keep_alive_while_idle"}
)


@dataclass(frozen=True)
class _Root:
    """Where a table's files live: a local directory (``store`` None), or an object store whose
    paths are relative to the table root."""

    store: ObjectStore | None
    local: str = ""


def _client_key(key: str) -> str | None:
    for prefix in ("", "aws_", "azure_", "google_"):
        if key.startswith(prefix) and key[len(prefix) :] in _CLIENT_KEYS:
            return key[len(prefix) :]
    return None


def _known_key(url: str, key: str, value: str) -> bool:
    """Whether object_store takes ``key`` for ``url``'s store (probed alone: a known key that is
    not enough on its own, like an access key without its secret, fails otherwise)."""
    try:
        from_url(url, config={key: value})  # type: ignore[call-overload]
    except UnknownConfigurationKeyError:
        return False  # delta-rs' own key (or another store's): delta-rs alone reads it
    except BaseError:
        return True
    except BaseException as exc:  # obstore panics on a client key it cannot hand back
        if type(exc).__name__ != "PanicException":
            raise
        raise CommitError(f"storage option {key!r}: obstore cannot take it ({exc})") from None
    return True


@functools.lru_cache(maxsize=32)
def _object_store(url: str, options: tuple[tuple[str, str], ...]) -> ObjectStore:
    """The one place parka builds an object store: obstore (the Rust ``object_store`` crate that
    delta-rs uses) from the same storage options delta-rs gets. Keys object_store does not know
    (delta-rs' own, like ``aws_s3_allow_unsafe_rename``) are left to delta-rs, as delta-rs
    itself skips keys it does not know. Cached: one HTTP connection pool per table."""
    config: dict[str, str] = {}
    client: dict[str, Any] = {}
    for key, value in options:
        name = key.lower()
        client_key = _client_key(name)
        if client_key is not None:
            client[client_key] = value.strip().lower() == "true" if client_key in _BOOL_CLIENT_KEYS else value
            continue
        if _known_key(url, name, value):
            config[name] = value
    return from_url(url, config=config or None, client_options=client or None)  # type: ignore[arg-type]


def _root(uri: str, storage_options: Mapping[str, str] | None) -> _Root:
    """Where the table at ``uri`` keeps its files."""
    parsed = urlparse(uri)
    if len(parsed.scheme) <= 1 or parsed.scheme == "file":  # a local path, a drive letter, file://
        return _Root(None, os.path.abspath(unquote(parsed.path) if parsed.scheme == "file" else uri))
    options = storage_options_for(uri, storage_options)
    url = "s3" + uri[3:] if parsed.scheme == "s3a" else uri  # delta-rs' alias; object_store says s3
    try:
        return _Root(_object_store(url.rstrip("/"), tuple(sorted(options.items()))))
    except (BaseError, ValueError) as exc:
        raise CommitError(f"no object store for {parsed.scheme}:// ({exc})") from exc


def object_store(uri: str, storage_options: Mapping[str, str] | None = None) -> ObjectStore:
    """The obstore store parka reads and writes the files under ``uri`` with, paths relative to
    ``uri``: the same client, built from the same options (:func:`_object_store`), so a caller
    that must share parka's client costs (a benchmark's floor) uses this one.

    Raises:
        ValueError: ``uri`` is a local path, which no object store serves.
        CommitError: no object store for its scheme, or options it cannot take.
    """
    root = _root(uri, storage_options)
    if root.store is None:
        raise ValueError(f"{uri!r} is a local path, not an object store URI (s3://, az://, gs://...)")
    return root.store


def write_data_file(
    table_uri: str,
    relative_path: str,
    data: bytes | Sequence[bytes],
    storage_options: Mapping[str, str] | None = None,
) -> int:
    """Write ``data`` (bytes, or parts written one after the other) as ``relative_path`` under
    the table root; returns its size in bytes.

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
    parts = [data] if isinstance(data, bytes) else data
    root = _root(table_uri, storage_options)
    try:
        if root.store is None:
            _write_local(os.path.join(root.local, *relative_path.split("/")), parts)
        else:
            obs.put(root.store, relative_path, _upload_body(data))
    except (BaseError, OSError) as exc:
        raise CommitError(f"cannot write data file {relative_path}: {exc}") from exc
    return sum(len(p) for p in parts)


class FileExists(CommitError):
    """:func:`create_log_file` found the file there already (another writer's)."""


def _log_path(name: str) -> str:
    """``_delta_log/<name>``; ``ValueError`` unless ``name`` is a plain file name."""
    if not name or "/" in name or name in (".", ".."):
        raise ValueError(f"not a file name of the Delta log: {name!r}")
    return f"_delta_log/{name}"


def create_log_file(table_uri: str, name: str, data: bytes, storage_options: Mapping[str, str] | None = None) -> None:
    """Write ``data`` as ``_delta_log/<name>`` only if no file has that name, atomically:
    another writer's file is never replaced, and no reader sees a partial file. A local file is
    written and flushed under a temporary name, then hard-linked to its name (the link fails when
    the name exists) and its directory flushed; an object store gets a conditional PUT
    (``If-None-Match: *``; S3 through ``aws_conditional_put=etag``, which
    :func:`parka.config.storage_options_for` sets).

    Raises:
        FileExists: the file is there already.
        ValueError: ``name`` is not a plain file name.
        CommitError: the write failed (the file may or may not be there: read it back to tell).
    """
    relative_path = _log_path(name)
    root = _root(table_uri, storage_options)
    try:
        if root.store is not None:
            obs.put(root.store, relative_path, data, mode="create")
            return
        target = os.path.join(root.local, *relative_path.split("/"))
        directory = os.path.dirname(target)
        os.makedirs(directory, exist_ok=True)
        temp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temp, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fsync(fh.fileno())
            os.link(temp, target)
        finally:
            with suppress(OSError):
                os.unlink(temp)
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except (FileExistsError, AlreadyExistsError, PreconditionError):  # S3: 412 on If-None-Match
        raise FileExists(f"{relative_path} exists already") from None
    except (BaseError, OSError) as exc:
        raise CommitError(f"cannot write {relative_path}: {exc}") from exc


PUT_CHUNK_SIZE = 5 * 2**20
"""obstore's ``put`` chunk size (its default): a larger file goes up as a multipart upload of
parts this size."""


def _upload_body(data: bytes | Sequence[bytes]) -> bytes | Sequence[bytes]:
    """What :func:`write_data_file` hands obstore's ``put``: the bytes, or a file of parts whole
    when it fits in one PUT; a larger file as its parts, which obstore packs into the parts of
    its multipart upload. Joining a 128 MiB stitched file first cost a fresh 128 MiB buffer per
    file: 0.18 of 1.60 CPU-s per 268 MB in ``parka ingest`` into s3proxy, and 7 % of its
    throughput (``benchmarks/results/2026-11-26-stream-uploads``)."""
    if isinstance(data, bytes):
        return data
    return data if sum(len(p) for p in data) > PUT_CHUNK_SIZE else b"".join(data)


LOCAL_WRITE_ATTEMPTS = 3


def _write_local(target: str, parts: Sequence[bytes]) -> None:
    """Write ``parts`` to a hidden temporary file next to ``target``, one after the other, then
    rename it.

    Another writer's orphan cleanup deletes temporary files whose offsets the table already
    has, taking them for a crash's leftovers (it cannot tell a live write from a dead one). When
    that happens to this write between its open and its rename (a Spark task writing offsets
    ``parka ingest`` committed first), the rename finds no file: the write starts over under a
    new temporary name, up to :data:`LOCAL_WRITE_ATTEMPTS` times. The file is covered anyway,
    so the commit drops it; failing the write instead failed the writer's whole batch.
    """
    directory = os.path.dirname(target)
    for attempt in range(1, LOCAL_WRITE_ATTEMPTS + 1):
        os.makedirs(directory, exist_ok=True)
        temp = os.path.join(directory, f".{os.path.basename(target)}.{uuid.uuid4().hex}.tmp")
        try:
            with open(temp, "wb") as fh:
                _write_parts(fh, parts)
            os.replace(temp, target)
            return
        except FileNotFoundError:
            if os.path.exists(temp) or attempt == LOCAL_WRITE_ATTEMPTS:
                with suppress(OSError):
                    os.unlink(temp)
                raise
            log.info(
                "the temporary file of %s was deleted while written (another writer's orphan cleanup); "
                "writing it again",
                os.path.basename(target),
            )
        except BaseException:
            with suppress(OSError):
                os.unlink(temp)
            raise


def _write_parts(fh: Any, parts: Sequence[bytes]) -> None:
    if not crash_point_armed("mid-write"):
        fh.writelines(parts)
        return
    half, written = sum(len(p) for p in parts) // 2, 0
    for part in parts:
        if written <= half < written + len(part):
            fh.write(part[: half - written])
            fh.flush()
            crash_point("mid-write")  # a test's kill -9 in the middle of a write
            fh.write(part[half - written :])
        else:
            fh.write(part)
        written += len(part)


def make_durable(table_uri: str, storage_options: Mapping[str, str] | None = None) -> None:
    """Flush data files written since the last call to stable storage, before a commit names them.

    Local tables: one ``syncfs`` of the table's file system (Linux), else ``os.sync``; object
    stores: nothing to do. Raises :class:`CommitError` when the flush fails, so the commit that
    would reference unflushed files is not made.
    """
    root = _root(table_uri, storage_options)
    if root.store is not None:
        return
    try:
        fd = os.open(root.local, os.O_RDONLY)
    except OSError as exc:
        raise CommitError(f"cannot open table directory {root.local} to flush it: {exc}") from exc
    try:
        if _LIBC is not None and hasattr(_LIBC, "syncfs"):
            if _LIBC.syncfs(fd) != 0:
                err = ctypes.get_errno()
                raise CommitError(f"syncfs of {root.local} failed: {os.strerror(err)}")
        else:
            os.sync()
    finally:
        os.close(fd)


def _on_each(
    table_uri: str, relative_paths: Collection[str], storage_options: Mapping[str, str] | None,
    local: Callable[[str], object], remote: Callable[[ObjectStore, str], object], verb: str,
) -> list[str]:  # fmt: skip
    """``local(full path)`` or ``remote(store, path)`` on each path; returns those it did (not the missing)."""
    root = _root(table_uri, storage_options)
    done = []
    for path in relative_paths:
        check_relative(path)
        try:
            if root.store is None:
                local(os.path.join(root.local, *path.split("/")))
            else:
                remote(root.store, path)
        except (FileNotFoundError, NotFoundError):
            continue
        except (BaseError, OSError) as exc:
            raise CommitError(f"cannot {verb} {path}: {exc}") from exc
        done.append(path)
    return done


def existing_files(
    table_uri: str, relative_paths: Collection[str], storage_options: Mapping[str, str] | None = None
) -> list[str]:
    """Those of ``relative_paths`` under the table root that exist (a HEAD each on an object store).

    Raises:
        ValueError: a path that is not a clean relative path.
        CommitError: a lookup failed for another reason than the file's absence.
    """
    return _on_each(table_uri, relative_paths, storage_options, os.stat, obs.head, "look up")


def delete_files(
    table_uri: str, relative_paths: Collection[str], storage_options: Mapping[str, str] | None = None
) -> None:
    """Delete files under the table root; files already gone are fine.

    Raises:
        ValueError: a path that is not a clean relative path.
        CommitError: a deletion failed.
    """
    _on_each(table_uri, relative_paths, storage_options, os.unlink, obs.delete, "delete")


def _local_files(base: str, root: str) -> Iterator[FileInfo]:
    for directory, _, names in os.walk(base):
        for name in names:
            full = os.path.join(directory, name)
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue  # deleted while listing
            path = os.path.relpath(full, root).replace(os.sep, "/")
            yield FileInfo(path, st.st_size, dt.datetime.fromtimestamp(st.st_mtime, dt.timezone.utc))


def list_files(
    table_uri: str, storage_options: Mapping[str, str] | None = None, *, prefix_dirs: Collection[str] = ()
) -> list[FileInfo]:
    """Files under the table root, or under its ``prefix_dirs``, sorted by path.

    ``_delta_log`` is never listed; temporary files of interrupted writes are.

    Raises:
        CommitError: the listing failed.
    """
    root = _root(table_uri, storage_options)
    found: dict[str, FileInfo] = {}
    for prefix in prefix_dirs or ("",):
        prefix = prefix.strip("/")
        try:
            if root.store is None:
                infos: Iterable[FileInfo] = _local_files(os.path.join(root.local, *prefix.split("/")), root.local)
            else:
                infos = [
                    FileInfo(meta["path"], meta["size"], meta["last_modified"])
                    for chunk in obs.list(root.store, f"{prefix}/" if prefix else None)
                    for meta in chunk
                ]
            for info in infos:
                if info.path.split("/")[0] != "_delta_log":
                    found[info.path] = info
        except (BaseError, OSError) as exc:
            raise CommitError(f"cannot list {prefix or 'the table root'}: {exc}") from exc
    return [found[path] for path in sorted(found)]


def list_log(table_uri: str, storage_options: Mapping[str, str] | None = None, *, from_version: int = 0) -> list[str]:
    """The names of the files directly in the table's ``_delta_log`` folder, sorted; with
    ``from_version``, only those of that version and later (and the ``_``-named ones, such as
    ``_last_checkpoint``). On an object store that listing starts at the version's key (a LIST
    with a start offset): its requests do not grow with the versions before it, which log
    cleanup deletes only after their retention.

    Raises:
        CommitError: the listing failed.
    """
    root = _root(table_uri, storage_options)
    start = f"{from_version:020d}"
    try:
        if root.store is None:
            base = os.path.join(root.local, "_delta_log")
            with os.scandir(base) as entries:
                return sorted(e.name for e in entries if e.is_file() and (from_version <= 0 or e.name >= start))
        if from_version <= 0:
            listed = obs.list_with_delimiter(root.store, "_delta_log/")
            return sorted(meta["path"].rsplit("/", 1)[-1] for meta in listed["objects"])
        # keys after the offset, in order (those of the version itself included: they are longer)
        names = []
        for chunk in obs.list(root.store, "_delta_log/", offset=f"_delta_log/{start}", chunk_size=1000):
            for meta in chunk:
                name = meta["path"].removeprefix("_delta_log/")
                if "/" not in name:  # not _sidecars/ nor _commits/
                    names.append(name)
        return sorted(names)
    except FileNotFoundError:
        return []
    except (BaseError, OSError) as exc:
        raise CommitError(f"cannot list the Delta log of {table_uri}: {exc}") from exc


def log_file_exists(table_uri: str, name: str, storage_options: Mapping[str, str] | None = None) -> bool:
    """Whether ``_delta_log/<name>`` exists: one ``stat``, or a HEAD on an object store (where
    :func:`list_log` lists a folder).

    Raises:
        ValueError: ``name`` is not a plain file name.
        CommitError: the lookup failed for another reason than the file's absence.
    """
    relative_path = _log_path(name)
    root = _root(table_uri, storage_options)
    try:
        if root.store is None:
            os.stat(os.path.join(root.local, relative_path))
        else:
            obs.head(root.store, relative_path)
    except (FileNotFoundError, NotFoundError):
        return False
    except (BaseError, OSError) as exc:
        raise CommitError(f"cannot look up {relative_path} of {table_uri}: {exc}") from exc
    return True


def read_file(
    table_uri: str, relative_path: str, storage_options: Mapping[str, str] | None = None, *, raise_missing: bool = False
) -> bytes:
    """The bytes of a file under the table root (``_delta_log/...`` included).

    Raises:
        FileNotFoundError: the file is missing, with ``raise_missing`` (for a caller that tells
            a deleted file from a failure).
        CommitError: the file is missing (without ``raise_missing``) or cannot be read.
    """
    root = _root(table_uri, storage_options)
    try:
        if root.store is None:
            with open(os.path.join(root.local, *relative_path.split("/")), "rb") as fh:
                return fh.read()
        return obs.get(root.store, relative_path).bytes().to_bytes()
    except (FileNotFoundError, NotFoundError):
        if raise_missing:
            raise FileNotFoundError(relative_path) from None
        raise CommitError(f"cannot read {relative_path}: no such file") from None
    except (BaseError, OSError) as exc:
        raise CommitError(f"cannot read {relative_path}: {exc}") from exc


def read_columns(
    table_uri: str, relative_path: str, columns: Sequence[str], storage_options: Mapping[str, str] | None = None
) -> pa.Table | None:
    """Top-level ``columns`` of a Parquet file under the table root; ``None`` when the file lacks
    one of them. A local file is read for those columns' chunks alone, a remote one whole.

    Raises:
        CommitError: the file is missing or is not Parquet.
    """
    root = _root(table_uri, storage_options)
    try:
        source: Any
        if root.store is None:
            source = os.path.join(root.local, *relative_path.split("/"))
        else:
            source = pa.BufferReader(obs.get(root.store, relative_path).bytes().to_bytes())
        parquet = pq.ParquetFile(source)
        if not set(columns) <= set(parquet.schema_arrow.names):
            return None
        return parquet.read(columns=list(columns))
    except (BaseError, OSError, pa.ArrowException) as exc:
        raise CommitError(f"cannot read {', '.join(columns)} of {relative_path}: {exc}") from exc


_FOOTER_GUESS = 64 * 1024  # one request reads most footers whole


def _remote_footer(store: ObjectStore, path: str) -> pq.FileMetaData:
    """The footer from the file's last bytes: one ranged GET, a second when the footer is larger."""
    tail = obs.get(store, path, options={"range": {"suffix": _FOOTER_GUESS}}).bytes().to_bytes()
    if len(tail) < 12 or tail[-4:] != b"PAR1":
        raise CommitError(f"{path} is not a Parquet file (no PAR1 at its end)")
    need = int.from_bytes(tail[-8:-4], "little") + 8
    if need > len(tail):
        tail = obs.get(store, path, options={"range": {"suffix": need}}).bytes().to_bytes()
    # the metadata reader needs only the footer, its length and the magic behind it
    return pq.read_metadata(pa.BufferReader(b"PAR1" + tail[-need:]))


def read_parquet_footer(
    table_uri: str, relative_path: str, storage_options: Mapping[str, str] | None = None
) -> pq.FileMetaData:
    """A data file's Parquet footer, reading only its end (not the whole file).

    Raises:
        CommitError: the file is missing or has no readable footer.
    """
    root = _root(table_uri, storage_options)
    try:
        if root.store is None:
            return pq.read_metadata(os.path.join(root.local, *relative_path.split("/")))
        return _remote_footer(root.store, relative_path)
    except (FileNotFoundError, NotFoundError) as exc:
        raise FileGone(f"cannot read the Parquet footer of {relative_path}: the file is gone ({exc})") from exc
    except (pa.ArrowException, BaseError, OSError) as exc:
        raise CommitError(f"cannot read the Parquet footer of {relative_path}: {exc}") from exc


class FileGone(CommitError):
    """A data file that was there is not (:func:`read_parquet_footer`)."""
