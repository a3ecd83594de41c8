"""The one module that talks to delta-spark's JVM classes: raw mode's commits through delta-spark.

:class:`SparkTableLog` is the delta-spark implementation of :class:`parka.lake.TableLog`
(the other is delta-rs'); the commit protocol, written once in the committer, sees only that
interface. Through py4j, on the driver:

* ``DeltaLog.forTable(spark, uri)`` holds the table; :meth:`SparkTableLog.refresh` starts an
  ``OptimisticTransaction`` on its latest snapshot, and every read for the next commit goes
  through it: ``txnVersion(appId)`` records the app id, so a concurrent commit carrying a
  ``txn`` of that app id makes this one fail (``ConcurrentTransactionException``) instead of
  landing on top of it.
* :meth:`SparkTableLog.commit_add_files` commits ``AddFile`` actions (Kafka coordinates in
  their ``tags``) and one ``SetTransaction`` per Kafka partition, built from their JSON with
  ``Action.fromJson``, as a ``WRITE`` (append) whose ``userMetadata`` holds parka's commit
  info. delta-spark itself then assigns row ids (row tracking), in-commit timestamps and domain
  metadata, checks the protocol and writes checkpoints, as its own writer would.
* Schema changes (new columns, new nested fields, widened types with their ``delta.typeChanges``,
  relaxed nullability: :func:`parka.lake.delta.evolve_schema_json`) join that commit as a
  metadata update (``updateMetadata``): one version, with delta-spark's conflict checks.
* A table :meth:`SparkEngine.create` makes is created by the first commit, with its data (the
  ``metaData`` through ``updateMetadataForNewTable``, what ``CREATE TABLE`` does without its
  catalog check): one version, where a commit of its own would cost about a CPU-second more.

Exceptions leave as parka's::

    DeltaConcurrentModificationException (ConcurrentAppendException, ConcurrentTransactionException,
    MetadataChangedException, ProtocolChangedException...)  ->  CommitConflict (refresh, decide again)
    any other JVM or py4j failure                            ->  CommitError

Storage settings are the session's Hadoop configuration (``fs.*``, s3a), not delta-rs storage
options: the engine ignores those.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote

import pyarrow as pa
from parka.lake.delta import (
    RsEngine,
    RsTableLog,
    arrow_schema_of_json,
    check_commit,
    check_partition_columns,
    check_schema,
    check_writable,
    evolve_schema_json,
    logged_files,
    schema_json,
)

from parka.errors import CommitConflict, CommitError, ParkaError
from parka.evolution import TYPE_WIDENING_KEY

from ._jvm import jvm_class

__all__ = ["SparkEngine", "SparkTableLog"]

_CONFLICT = "org.apache.spark.sql.delta.DeltaConcurrentModificationException"


def _java_classes(exc: BaseException) -> list[str]:
    """The class names, most specific first, of the JVM exception inside a py4j error (a raw
    ``Py4JJavaError``, or one pyspark converted, which keeps it as ``_origin``)."""
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    names: list[str] = []
    try:
        cls = throwable.getClass() if throwable is not None else None
        while cls is not None:
            names.append(str(cls.getName()))
            cls = cls.getSuperclass()
    except Exception:  # the gateway is gone: no class to tell
        return names
    return names


def _message(exc: BaseException) -> str:
    throwable = getattr(exc, "java_exception", None) or getattr(exc, "_origin", None)
    text = str(throwable.toString()) if throwable is not None else f"{type(exc).__name__}: {exc}"
    return text.strip().splitlines()[0] if text.strip() else type(exc).__name__


@contextmanager
def _translating(what: str) -> Iterator[None]:
    try:
        yield
    except ParkaError:
        raise
    except Exception as exc:
        if _CONFLICT in _java_classes(exc):
            raise CommitConflict(f"{what}: a concurrent commit won ({_message(exc)})") from exc
        raise CommitError(f"{what}: {_message(exc)}") from exc


def log_path(path: str) -> str:
    """A data file's path as the Delta log holds it: URL-encoded (readers decode it once)."""
    return quote(path, safe="/=")


class SparkTableLog:
    """One table's log in delta-spark; see the module docstring. Not thread-safe."""

    def __init__(self, spark: Any, uri: str, delta_log: Any, storage_options: Mapping[str, str] | None = None) -> None:
        self.spark = spark
        self.uri = uri
        self._jvm = spark.sparkContext._jvm
        self._log = delta_log
        self._storage_options = dict(storage_options or {})
        self._txn: Any = None  # the transaction reads go through; None once it committed
        self._version = -1
        self._metadata: dict[str, Any] = {}
        self._schema_changed = False
        # A table this handle creates: its metaData, committed with the first data (one version
        # instead of two: a commit of its own costs delta-spark about a CPU-second). None once
        # the table exists.
        self._pending: dict[str, Any] | None = None
        self._read_app_ids: list[str] = []
        # delta-rs' read of the same version, for what delta-spark answers only with Spark jobs
        self._reader: tuple[int, RsTableLog | None] | None = None

    # -- reads ---------------------------------------------------------------------------------

    def _current(self) -> Any:
        if self._txn is None:
            self.refresh()
        return self._txn

    def refresh(self) -> int:
        with _translating("cannot read the Delta log"):
            txn = self._log.startTransaction()
            version = int(txn.readVersion())
            metadata = json.loads(str(txn.metadata().json()))["metaData"] if version >= 0 else {}
        pending = self._pending
        if pending is not None and version < 0:
            # What CREATE TABLE does, without its catalog check (which refuses any existing
            # directory, and a Spark query's checkpoint lives in this one): the session's
            # defaults choose the protocol and table features.
            with _translating(f"cannot create a Delta table at {self.uri}"):
                txn.updateMetadataForNewTable(self._action({"metaData": pending}))
            metadata = pending
        elif pending is not None:
            self._adopt(pending, metadata)
        self._txn, self._version, self._metadata, self._schema_changed = txn, version, metadata, False
        self._read_app_ids = []
        if metadata:
            fields = json.loads(metadata["schemaString"])["fields"]
            check_writable(metadata.get("configuration") or {}, [f.get("metadata") or {} for f in fields])
        return version

    def _adopt(self, pending: Mapping[str, Any], found: Mapping[str, Any]) -> None:
        """Another writer created the table this handle was about to create: take it if it is
        the one this handle would have made (the data it holds was fitted to that)."""
        same_schema = json.loads(found["schemaString"]) == json.loads(pending["schemaString"])
        same_partitioning = list(found.get("partitionColumns") or []) == list(pending["partitionColumns"])
        if not (same_schema and same_partitioning):
            raise CommitError(
                f"another writer created the Delta table at {self.uri} with another schema or partitioning "
                "while this one was creating it; nothing was committed: restart to fit the data to that table"
            )
        self._pending = None

    def version(self) -> int:
        """The snapshot's version; -1 while the table is still to be created by the next commit."""
        if self._txn is None and self._version < 0:
            self.refresh()
        return self._version

    def _rs(self) -> RsTableLog | None:
        """delta-rs' read of exactly the version this transaction read (``parka.lake``'s
        :meth:`RsEngine.read_at`; this module imports no deltalake), or None when delta-rs
        cannot read the table. delta-spark answers ``txnVersion`` and the list of files from a
        reconstruction of the table's state, a few Spark jobs (more than a CPU-second) per new
        snapshot, i.e. per commit; delta-rs reads the same log natively in milliseconds: why
        this engine keeps a delta-rs reader, read-only."""
        self._current()  # a transaction, and the version it read
        if self._reader is None or self._reader[0] != self._version:
            self._reader = (self._version, RsEngine().read_at(self.uri, self._version, self._storage_options))
        return self._reader[1]

    def txn_version(self, app_id: str) -> int | None:
        """The ``txn`` version of ``app_id`` in the version this transaction read. The app id is
        registered as read by the transaction either way, so that delta-spark's conflict check
        fails a commit if another one moved it meanwhile."""
        txn = self._current()
        self._read_app_ids.append(app_id)
        if self._version < 0:  # a table still to be created: no txn yet
            with _translating(f"cannot read the txn version of '{app_id}'"):
                txn.readTxn().addOne(app_id)
            return None
        reader = self._rs()
        with _translating(f"cannot read the txn version of '{app_id}'"):
            if reader is not None:
                txn.readTxn().addOne(app_id)  # what txnVersion() records, without its Spark jobs
                return reader.txn_version(app_id)
            found = int(txn.txnVersion(app_id))
        return None if found < 0 else found

    def arrow_schema(self) -> pa.Schema:
        self._current()
        schema: pa.Schema = arrow_schema_of_json(self._metadata["schemaString"])
        return schema

    def partition_columns(self) -> list[str]:
        self._current()
        return [str(c) for c in self._metadata.get("partitionColumns") or []]

    def configuration(self) -> dict[str, str]:
        self._current()
        return {str(k): str(v) for k, v in (self._metadata.get("configuration") or {}).items() if v is not None}

    def referenced_files(self) -> set[str]:
        if self.version() < 0:
            return set()
        reader = self._rs()
        if reader is not None:
            return reader.referenced_files()
        from pyspark.sql import DataFrame

        with _translating("cannot list the table's add actions"):
            files = DataFrame(self._current().snapshot().allFiles().toDF(), self.spark).select("path")
            paths = files.toArrow().column("path").to_pylist()
        return {unquote(p) for p in paths}

    def logged_files(self) -> set[str]:
        # The log's files hold the tombstones; delta-spark would answer with Spark jobs.
        if self.version() < 0:
            return set()
        return logged_files(self.uri, self._storage_options)

    # -- writes --------------------------------------------------------------------------------

    def add_columns(self, fields: Collection[pa.Field]) -> None:
        txn = self._current()
        widening = str((self._metadata.get("configuration") or {}).get(TYPE_WIDENING_KEY, "")).lower() == "true"
        merged = evolve_schema_json(self._metadata["schemaString"], fields, widening=widening)
        if merged is None:
            return
        if self._schema_changed:  # delta-spark takes one metadata update per transaction
            raise CommitError("add_columns twice before a commit: make all schema changes at once")
        metadata = {**self._metadata, "schemaString": merged}
        if self._pending is not None:  # not created yet: create it with these columns
            self._pending = metadata
            read = list(self._read_app_ids)
            self.refresh()
            for app_id in read:
                self.txn_version(app_id)
            return
        with _translating("cannot add columns"):
            txn.updateMetadata(self._action({"metaData": metadata}), False)
        self._metadata, self._schema_changed = metadata, True

    def commit_add_files(
        self, files: Collection[Any], *, txns: Mapping[str, int], commit_info: Mapping[str, Any] | None = None
    ) -> int:
        txn = self._current()
        if not files and not txns and not self._schema_changed:
            return self._version  # a table still to be created stays so: nothing to create it with
        check_commit(files, txns, self.partition_columns())
        now_ms = int(time.time() * 1000)
        adds = [
            {
                "path": log_path(f.path),
                "partitionValues": dict(f.partition_values),
                "size": f.size,
                "modificationTime": now_ms,
                "dataChange": True,
                "stats": f.stats,
                "tags": dict(f.tags) or None,
            }
            for f in files
        ]
        txn_actions = [{"appId": app_id, "version": v, "lastUpdated": now_ms} for app_id, v in txns.items()]
        jvm = self._jvm
        actions = self._add_files(adds)  # a java.util.List, then the txn actions after the files
        for t in txn_actions:
            actions.add(self._action({"txn": t}))
        user_metadata = json.dumps(dict(commit_info), sort_keys=True) if commit_info else None
        write = jvm_class(jvm, "org.apache.spark.sql.delta.DeltaOperations$Write")
        option = jvm_class(jvm, "scala.Option")
        converters = jvm_class(jvm, "scala.jdk.javaapi.CollectionConverters")
        operation = write(
            jvm_class(jvm, "org.apache.spark.sql.SaveMode").Append, option.empty(), option.empty(),
            option.apply(user_metadata),
        )  # fmt: skip
        read_version = self._version
        self._txn = None  # used up, whatever happens
        with _translating(f"commit on version {read_version} failed"):
            version = int(txn.commit(converters.asScala(actions).toList(), operation))
        self._version, self._pending = version, None
        return version

    def checkpoint(self) -> None:
        if self._pending is not None:
            return
        with _translating("cannot write a checkpoint"):
            none = jvm_class(self._jvm, "scala.Option").empty()
            snapshot = self._log.update(False, none, none)
            if int(snapshot.checkpointProvider().version()) < int(snapshot.version()):
                self._log.checkpoint(snapshot, none)

    def _action(self, action: Mapping[str, Any]) -> Any:
        return jvm_class(self._jvm, "org.apache.spark.sql.delta.actions.Action").fromJson(json.dumps(action))

    def _add_files(self, adds: Sequence[Mapping[str, Any]]) -> Any:
        """``AddFile`` actions from their JSON, parsed in one call by the mapper delta-spark's
        own ``Action.fromJson`` uses (one ``fromJson`` per file costs a few ms each through py4j:
        most of a 200-file commit). Returns a ``java.util.ArrayList``."""
        if not adds:
            return jvm_class(self._jvm, "java.util.ArrayList")()
        mapper = jvm_class(self._jvm, "org.apache.spark.sql.delta.util.JsonUtils").mapper()
        add_file = self._action({"add": adds[0]}).getClass()
        list_type = mapper.getTypeFactory().constructCollectionType(
            jvm_class(self._jvm, "java.util.ArrayList")().getClass(), add_file
        )
        return mapper.readValue(json.dumps(list(adds)), list_type)


class SparkEngine:
    """:class:`parka.lake.LogEngine` of delta-spark, in ``spark``'s JVM."""

    name = "delta-spark"
    check_columns = staticmethod(check_schema)  # Delta's pure rules, as the delta-rs engine's
    checkpoint_beside_commits = False  # a call into the driver's JVM, on the commit path as before

    def __init__(self, spark: Any) -> None:
        self.spark = spark

    def _delta_log(self, uri: str) -> Any:
        jvm = self.spark.sparkContext._jvm
        with _translating(f"cannot open the Delta log at {uri}"):
            return jvm_class(jvm, "org.apache.spark.sql.delta.DeltaLog").forTable(self.spark._jsparkSession, uri)

    def open(self, uri: str, storage_options: Mapping[str, str] | None = None) -> SparkTableLog | None:
        handle = SparkTableLog(self.spark, uri, self._delta_log(uri), storage_options)
        return handle if handle.refresh() >= 0 else None

    def create(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        partition_by: Collection[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> SparkTableLog:
        check_partition_columns(schema, partition_by)
        metadata = {
            "id": str(uuid.uuid4()),
            "format": {"provider": "parquet", "options": {}},
            "schemaString": schema_json(schema),
            "partitionColumns": list(partition_by),
            "configuration": {},
            "createdTime": int(time.time() * 1000),
        }
        handle = SparkTableLog(self.spark, uri, self._delta_log(uri), storage_options)
        if handle.refresh() >= 0:
            raise CommitConflict(f"a Delta table was created at {uri} concurrently")
        handle._pending = metadata  # created by the first commit_add_files, with its data
        handle.refresh()
        return handle
