"""The object-store arms of the ingest benchmark: where on the store they run, and
the floor's sink.

* :class:`ObjectStoreRoot`: an ``s3://bucket/prefix`` and the storage options ``parka ingest``
  takes for an ``s3://`` table (``--storage-option`` / ``PARKA_STORAGE_OPTIONS``: endpoint, keys,
  ``aws_allow_http``...); every run gets a fresh path under it.
* :class:`PutSink`: :func:`benchmarks.clients.fetch_raw`'s sink for the floor on the store: each
  fetched value PUT as an object of its own, ``threads`` PUTs in flight (``parka ingest``'s
  ``--write-threads`` default, :data:`WRITE_THREADS`), done when all are acknowledged. The PUTs
  go through the very client parka's data files go through (:func:`parka.lake.object_store`,
  obstore), so the floor and ``parka ingest`` share the client's costs.
* :func:`stored` and :func:`remove_all`: what a run left under its path, and its removal.
* :func:`add_s3_arguments`, :func:`s3_root` and :func:`masked_command`: ``--s3`` and the storage
  options on a benchmark's command line (``benchmarks.ingest_throughput``, ``benchmarks.suite``),
  and that command line as results.json records it, the options' values masked.
"""

from __future__ import annotations

import argparse
import dataclasses
import uuid
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import obstore as obs
from obstore.store import ObjectStore
from parka.consumer import IngestSettings
from parka.lake import object_store

__all__ = [
    "WRITE_THREADS",
    "ObjectStoreRoot",
    "PutSink",
    "add_s3_arguments",
    "masked_command",
    "remove_all",
    "s3_root",
    "stored",
]


def _default_write_threads() -> int:
    default = next(f.default for f in dataclasses.fields(IngestSettings) if f.name == "write_threads")
    if not isinstance(default, int):
        raise TypeError(f"IngestSettings.write_threads has no integer default: {default!r}")
    return default


WRITE_THREADS = _default_write_threads()
"""Data files ``parka ingest`` writes at once by default (``--write-threads``)."""


@dataclass(frozen=True)
class ObjectStoreRoot:
    """Where the object-store arms run: ``uri`` (``s3://bucket/prefix``) with ``parka ingest``'s
    storage options for it. Raises ``ValueError`` for a URI that is not ``s3://bucket[/prefix]``."""

    uri: str
    storage_options: dict[str, str] = field(default_factory=dict, repr=False)  # may hold keys

    def __post_init__(self) -> None:
        parsed = urlparse(self.uri)
        if parsed.scheme != "s3" or not parsed.netloc:
            raise ValueError(f"--s3 takes s3://bucket[/prefix], not {self.uri!r}")

    def fresh(self, what: str) -> str:
        """A path under the root no run used before."""
        return f"{self.uri.rstrip('/')}/{what}-{uuid.uuid4().hex[:10]}"

    def store(self, uri: str) -> ObjectStore:
        """parka's client for the files under ``uri`` (a path under the root)."""
        return object_store(uri, self.storage_options)

    def described(self) -> dict[str, Any]:
        """What results.json records of it: no credentials."""
        endpoint = next((v for k, v in self.storage_options.items() if k.lower() == "aws_endpoint_url"), None)
        return {"uri": self.uri, "endpoint": endpoint, "write_threads": WRITE_THREADS}


class PutSink:
    """Each value PUT to ``store`` as an object of its own, ``threads`` PUTs in flight; ``finish``
    returns once all are acknowledged and raises the first PUT's error. ``close`` drops the PUTs
    not started (after a failed fetch) and waits for those running."""

    def __init__(self, store: ObjectStore, *, threads: int = WRITE_THREADS) -> None:
        self.store = store
        self._pool = ThreadPoolExecutor(threads, thread_name_prefix="bench-put")
        self._puts: list[Future[Any]] = []

    def take(self, name: str, value: bytes) -> None:
        self._puts.append(self._pool.submit(obs.put, self.store, name, value))

    def finish(self) -> None:
        wait(self._puts)
        for put in self._puts:
            put.result()

    def close(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def stored(store: ObjectStore) -> tuple[int, int]:
    """Objects under the store's path and their bytes."""
    sizes = [meta["size"] for chunk in obs.list(store) for meta in chunk]
    return len(sizes), sum(sizes)


def remove_all(store: ObjectStore) -> None:
    """Delete every object under the store's path (a Delta table's log included)."""
    paths = [meta["path"] for chunk in obs.list(store) for meta in chunk]
    if paths:
        obs.delete(store, paths)


def add_s3_arguments(parser: Any) -> None:
    """``--s3 URI`` and the storage options, as ``parka ingest`` reads them (``--storage-option``
    or ``PARKA_STORAGE_OPTIONS``), on ``parser``: a :class:`parka.ops.settings.SettingsParser` made
    with ``allow_abbrev=False``, so :func:`masked_command` finds every storage option."""
    from parka.ops.settings import STORAGE_OPTIONS

    parser.add_argument(
        "--s3",
        metavar="URI",
        help="also run parka ingest and fetch + PUT on this object store (s3://bucket/prefix), with the "
        "storage options below (endpoint, keys, aws_allow_http=true for plain HTTP)",
    )
    parser.add_settings(
        [STORAGE_OPTIONS], title="object store (as parka ingest takes them; keys belong in the variable)"
    )


def s3_root(parser: argparse.ArgumentParser, args: argparse.Namespace) -> ObjectStoreRoot | None:
    """The store ``--s3`` names, or None; a URI it cannot take is the parser's usage error."""
    try:
        return ObjectStoreRoot(args.s3, args.storage_options) if args.s3 else None
    except ValueError as exc:
        parser.error(str(exc))


def masked_command(argv: list[str]) -> list[str]:
    """The command line as results.json records it: the storage options' values masked."""
    out: list[str] = []
    for arg in argv:
        if out and out[-1] == "--storage-option":
            arg = arg.partition("=")[0] + "=***"
        elif arg.startswith("--storage-option="):
            arg = "--storage-option=" + arg.removeprefix("--storage-option=").partition("=")[0] + "=***"
        out.append(arg)
    return out
