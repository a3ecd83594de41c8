"""Spark decode mode into an Apache Iceberg table: segments decoded into records in Spark
(``mapInArrow``, as for Delta: :mod:`._decode`) and written by Iceberg's own Spark writer
(Iceberg's Spark runtime jar), one commit per micro-batch that carries parka's offsets in its
snapshot summary, so that ``parka ingest`` and Spark raw mode continue a table decode mode
filled, and decode mode one they filled (same app id).

The table is the one pyiceberg opens (:class:`parka.lake.IcebergEngine`), given to Spark as a
catalog of the same name (:func:`use_catalog`). Before the query starts, the driver creates a
missing table from the stream's schema, or makes an existing one take it
(:meth:`parka.lake.LandingSession.evolve_to`: raw mode's rule, pyiceberg's ``union_by_name``;
reserved columns always, new user columns with ``--schema-evolution merge``), and a new query
(no checkpoint yet) starts after the table's ``txn`` versions.

Exactly once, per micro-batch, on the driver (``foreachBatch``: :class:`IcebergBatches`):

1. The Kafka source wrote the batch's offset ranges to the checkpoint's offset log before running
   it; a restart replays the last planned batch with the same ranges.
2. One aggregation gives each Kafka partition's first and last offset in the batch. The table is
   read: its current snapshot S and its ``txn`` state (``parka.txns`` in the snapshot summaries,
   app ids ``<app id>-<partition>``: :mod:`parka.lake.iceberg`).
3. Messages at or below their partition's ``txn`` version are in the table already (an earlier
   attempt of this batch, another query or ``parka ingest`` with this app id) and are dropped;
   when nothing is left, the batch is done.
4. The rest are decoded and written by Iceberg's Spark writer as one snapshot whose summary holds
   the state read in 2 with each partition's last offset over it (write options
   ``snapshot-property.*``: :meth:`parka.lake.IcebergTableLog.commit_summary`). The write is an
   overwrite by the filter ``false`` at isolation level ``serializable`` from S: an append (Iceberg
   records it as one) that Iceberg refuses when any data file was added after S, so another
   writer's commit is never rebased past; Iceberg's own retries rebase it only over snapshots that
   added no data (a schema change). A refused commit is a conflict: Iceberg deletes the files it
   wrote and the batch goes back to 2, through the committer's one retry
   (:meth:`parka.lake.Committer.retry`: its backoff, its limit).
5. Only then does Spark mark the batch done in its checkpoint.

A crash before 4 commits nothing (the replay starts over); after it, the replay finds every
message at or below the ``txn`` (3). A segment the table cannot take fails its batch before
anything is committed, as for Delta: decode mode has no dead letters.
"""

from __future__ import annotations

import functools
import logging
import operator
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from parka.lake import Committer, LandingSession

from parka.errors import CommitConflict, CommitError, ConfigError, ParkaError, SchemaMismatchError

from ._arrow import KAFKA_COLUMNS
from ._jvm import jvm_class
from ._options import ICEBERG_CATALOG_CLASS, ICEBERG_CATALOG_IDENTITY, iceberg_catalog_conf, lake_storage_options
from ._query import LandingRun, kafka_stream, resume_from_table, with_trigger
from ._reader import decode, spark_schema
from ._session import SparkSetupError, iceberg_packages, jvm_cause, translate
from ._stream_schema import stream_decoder

if TYPE_CHECKING:
    from ._settings import SparkIngestSettings

__all__ = ["IcebergBatches", "spark_table_name", "start_decode_iceberg", "use_catalog"]

log = logging.getLogger("parka.spark_ingest")

# what Iceberg raises when a commit lost a race (the validation of step 4, or the catalog's own check)
_CONFLICTS = (
    "org.apache.iceberg.exceptions.ValidationException",
    "org.apache.iceberg.exceptions.CommitFailedException",
)


def spark_table_name(catalog: str, identifier: str) -> str:
    """The Spark SQL name of the table ``identifier`` (``namespace.name``) in the Spark catalog
    ``catalog``, each part quoted."""
    return ".".join("`" + part.replace("`", "``") + "`" for part in (catalog, *identifier.split(".")))


def use_catalog(spark: Any, name: str, properties: Mapping[str, str]) -> None:
    """Make ``name`` a Spark catalog of this session on the catalog pyiceberg opens with
    ``properties`` (:func:`._options.iceberg_catalog_conf`; Spark reads a catalog's settings when
    it is first used, so they are set at run time). Settings the session already has win, except
    where the catalog is (its class, ``type``, ``uri``, ``warehouse``): a session whose catalog
    ``name`` is another catalog is refused. A Spark catalog configured in the session for a
    catalog type parka has no mapping for is used as it is.

    Raises:
        ConfigError: the session's catalog ``name`` is another catalog, or there is none and
            ``properties`` have no Spark mapping.
        SparkSetupError: the session lacks Iceberg's Spark runtime (or the SQLite JDBC driver).
    """
    prefix = f"spark.sql.catalog.{name}"
    try:
        conf = iceberg_catalog_conf(name, properties)
    except ConfigError:
        if spark.conf.get(prefix, None) is None:
            raise
        log.info("Spark catalog %s: as this session configures it", name)
        conf = {}
    missing: dict[str, str] = {}
    for key, value in conf.items():
        current = spark.conf.get(key, None)
        if current is None:
            missing[key] = value
        elif current != value and key.removeprefix(prefix) in ICEBERG_CATALOG_IDENTITY:
            raise ConfigError(
                key,
                current,
                value,
                reason=f"this Spark session's catalog {name!r} is another catalog than the one pyiceberg opens "
                f"as {name!r} (a session keeps a catalog's settings from its first use); name the catalog "
                "otherwise, or set the same",
            )
    needed = {ICEBERG_CATALOG_CLASS: "Iceberg's Spark runtime"}
    if any(v.startswith("jdbc:sqlite:") for v in conf.values()):
        needed["org.sqlite.JDBC"] = "the SQLite JDBC driver"
    jvm = spark.sparkContext._jvm
    loader = jvm_class(jvm, "java.lang.Thread").currentThread().getContextClassLoader()
    for class_name, what in needed.items():
        try:
            jvm_class(jvm, "java.lang.Class").forName(class_name, False, loader)
        except Exception as exc:  # py4j's error for a ClassNotFoundException
            raise SparkSetupError(
                f"this Spark session has no {what} ({class_name}), which decode mode into Iceberg writes "
                f"with: start it with the packages {','.join(iceberg_packages(conf))} (--packages)"
            ) from exc
    for key, value in missing.items():
        spark.conf.set(key, value)


def start_decode_iceberg(
    spark: Any, s: SparkIngestSettings, options: dict[str, str], on_commit: Callable[[float], None] | None = None
) -> tuple[Any, str, LandingRun]:
    """Start a decode-mode query into the Iceberg table ``s.table_uri`` of catalog ``s.catalog``
    (see the module docstring); returns it, where its schema came from, and its run.

    Raises:
        ConfigError, SparkSetupError: see :func:`use_catalog`; ``partition_by`` contradicts the
            table's.
        SchemaMismatchError: the stream's schema does not fit the table.
        CommitError: the catalog or the table cannot be read, or the table not created.
    """
    from parka.lake import IcebergEngine  # the iceberg extra: only when asked for

    assert s.catalog is not None
    engine = IcebergEngine(s.catalog, s.catalog_options, s.storage_options)
    use_catalog(spark, s.catalog, engine.properties)
    committer = Committer(
        engine,
        table_uri=s.table_uri,
        topic=s.topic,
        app_id=s.app_id,  # None: the table's (LandingSession.settle_app_id)
        partition_by=s.partition_by,
        merge=s.schema_evolution == "merge",
        storage_options=lake_storage_options(s.storage_options),
        on_commit=on_commit,
    )
    session = LandingSession(committer)
    existing = committer.table
    decoder, schema, source = stream_decoder(spark, s, options, None if existing is None else existing.arrow_schema())
    if existing is not None:
        session.evolve_to(decoder.output_schema)
        resume_from_table(spark, s, options, session)
    else:
        committer.ensure_table(decoder.output_schema)
    batches = IcebergBatches(LandingRun(session), spark_table_name(s.catalog, s.table_uri), schema, s)
    writer = kafka_stream(spark, options).writeStream.queryName(s.app).option("checkpointLocation", s.checkpoint)
    return with_trigger(writer.foreachBatch(batches), s).start(), source, batches.run


class IcebergBatches:
    """``foreachBatch``'s function: steps 2 to 4 of the module docstring for each micro-batch,
    counted in the run's committer stats (commits, segments, records, conflicts). ``table_name``
    is the table's Spark name, ``schema`` the stream's user schema."""

    def __init__(self, run: LandingRun, table_name: str, schema: pa.Schema, s: SparkIngestSettings) -> None:
        self.run = run
        self.table_name = table_name
        self.schema = schema
        self.reserved = s.reserved
        self.metadata = s.metadata

    def __call__(self, df: Any, batch_id: int) -> None:
        # On the driver (Spark calls it back through py4j), once per micro-batch.
        try:
            self.land(df.select(*KAFKA_COLUMNS), batch_id)
        except ParkaError as exc:
            self.run.failure = exc
            raise

    def land(self, kafka: Any, batch_id: int) -> None:
        """Land the batch of Kafka rows ``kafka``, exactly once: its partitions' offset ranges,
        then :meth:`land_ranges` (which raises what it says)."""
        from pyspark.sql import functions as F

        ranges = {
            int(r["partition"]): (int(r["first"]), int(r["last"]))
            for r in kafka.groupBy("partition")
            .agg(F.min("offset").alias("first"), F.max("offset").alias("last"))
            .collect()
        }
        self.land_ranges(kafka, ranges, batch_id)

    def land_ranges(self, kafka: Any, ranges: Mapping[int, tuple[int, int]], batch_id: int) -> None:
        """Land ``kafka``, whose Kafka partitions' offsets span ``ranges`` (partition -> first,
        last), in attempts of the committer's retry (:meth:`parka.lake.Committer.retry`: each on
        the table read afresh, a conflict counted and tried again after a backoff), counted in its
        stats when one committed (:meth:`parka.lake.Committer.count_commit`).

        Raises:
            SegmentError, SegmentDecodeError, SchemaMismatchError: a segment the table cannot
                take (nothing of the batch is committed).
            CommitConflict: conflicts that did not resolve.
            CommitError: the write or the table failed otherwise.
        """
        if not ranges:
            return
        committer = self.run.session.committer
        started = committer.clock()
        written = committer.retry(lambda txn: self._attempt(kafka, ranges, txn, batch_id), ranges)
        if written is None:
            log.info("batch %d: the table has all of it already", batch_id)
            return
        segments, records = written
        committer.count_commit(segments=segments, records=records, started=started)
        log.debug("batch %d: %d segments, %d records", batch_id, segments, records)

    def _attempt(
        self, kafka: Any, ranges: Mapping[int, tuple[int, int]], txn: Mapping[int, int | None], batch_id: int
    ) -> tuple[int, int] | None:
        """Steps 3 and 4 on the table's ``txn`` versions ``txn``, read in 2; returns the segments
        and records written, or ``None`` when the table has the whole batch already.

        Raises:
            CommitConflict: another commit won (:meth:`_append`).
        """
        committer = self.run.session.committer
        done = {p: -1 if v is None else v for p, v in txn.items()}  # -1: nothing of it yet
        last = {p: hi for p, (_, hi) in ranges.items() if hi > done[p]}
        if not last:
            return None
        covered = [(p, v) for p, v in done.items() if v >= ranges[p][0]]
        rows = kafka
        if covered:
            from pyspark.sql import functions as F

            have = functools.reduce(
                operator.or_, [(F.col("partition") == p) & (F.col("offset") <= v) for p, v in covered]
            )
            rows = kafka.where(~have)
        return self._append(rows, committer, {committer.app_txn(p): o for p, o in last.items()}, batch_id)

    def _append(self, rows: Any, committer: Committer, txns: Mapping[str, int], batch_id: int) -> tuple[int, int]:
        """Decode ``rows`` and append them to the table as last read, with ``txns`` over its
        ``txn`` state, validated against its current snapshot; returns the segments and records
        written.

        Raises:
            CommitConflict: a data file was added after that snapshot.
            SegmentError, SegmentDecodeError, SchemaMismatchError: a segment that does not fit.
            CommitError: any other failure of the write.
        """
        from parka.lake import IcebergTableLog
        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        table = committer.table
        assert isinstance(table, IcebergTableLog), "the table was opened or created before the query started"
        info = {"parka.app_id": committer.app_id, "parka.topic": committer.topic, "parka.spark_batch": batch_id}
        options = {f"snapshot-property.{k}": v for k, v in table.commit_summary(txns, info).items()}
        options["isolation-level"] = "serializable"
        snapshot = table.iceberg.current_snapshot()
        if snapshot is not None:  # an empty table: Iceberg validates against its whole history
            options["validate-from-snapshot-id"] = str(snapshot.snapshot_id)
        read, made = Observation(), Observation()
        records = decode(
            rows.observe(read, F.count(F.lit(1)).alias("n")),
            self.schema,
            reserved=self.reserved,
            metadata=self.metadata,
        )
        records = _aligned(records.observe(made, F.count(F.lit(1)).alias("n")), table.arrow_schema())
        try:
            records.writeTo(self.table_name).options(**options).overwrite(F.lit(False))
        except Exception as exc:  # py4j's and pyspark's errors, as Spark relays the JVM's
            lost = jvm_cause(exc, _CONFLICTS)
            if lost is not None:
                raise CommitConflict(f"commit to {self.table_name} lost a race: {lost}") from exc
            found = translate(exc)
            if found is not None:
                raise found from None
            cause = jvm_cause(exc, ("Exception:", "Error:")) or str(exc).strip().split("\n", 1)[0]
            raise CommitError(f"Iceberg's Spark writer failed on {self.table_name}: {cause}") from exc
        return int(read.get["n"]), int(made.get["n"])


def _aligned(records: Any, table: pa.Schema) -> Any:
    """``records`` as the table's columns, in its order: a column the stream lacks (one another
    writer added, the reserved ones when they are dropped) is null.

    Raises:
        SchemaMismatchError: the stream has a column the table lacks (dropped after the query
            started).
    """
    from pyspark.sql import functions as F

    extra = [c for c in records.columns if c not in table.names]
    if extra:
        raise SchemaMismatchError(
            f"the table has no column(s) {', '.join(extra)} any more; restart the query", field=extra[0]
        )
    have = set(records.columns)
    return records.select(
        *(
            F.col("`" + f.name.replace("`", "``") + "`")
            if f.name in have
            else F.lit(None).cast(spark_schema(pa.schema([f.with_nullable(True)]))[0].dataType).alias(f.name)
            for f in table
        )
    )
