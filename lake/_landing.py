"""One landing session: what every daemon that lands a topic's raw segments in a table does
around the committer, written once. ``parka ingest`` (:mod:`parka.consumer`) and Spark raw mode
(:mod:`parka.spark_ext`) differ in how they read Kafka and write files; both

* name the app the same way (:func:`default_app_id` of the table; ``txn`` app ids
  ``<app_id>-<partition>`` and, in the dead-letter table, ``<app_id>-dlq-<partition>``:
  :mod:`._plan`), a table that holds progress under the older default keeping it
  (:meth:`LandingSession.settle_app_id`);
* start the same way (:meth:`LandingSession.start`): an existing table takes a schema given up
  front (new columns added through the committer, conflicts retried), or a missing one is
  created from it; orphans of interrupted commits are removed;
* resume each Kafka partition after the table's ``txn`` (:meth:`LandingSession.resume`);
* remove orphans again when they stop, in the table and in the dead-letter table.

Commits go through :attr:`LandingSession.committer` (:class:`parka.lake.Committer`), whatever
the engine (:class:`parka.lake.LogEngine`). The app id defaults to
``parka-<topic>-<hash of the table>`` (:func:`parka.lake.default_app_id`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping

import pyarrow as pa

from parka.errors import ConfigError, SchemaMismatchError
from parka.segment import RESERVED_FIELDS

from ._committer import Committer
from ._plan import FileName, app_txn_id, columns_text, fit_segment, legacy_app_id

__all__ = ["LandingSession", "given_schema_refused"]

log = logging.getLogger("parka.ingest")


def given_schema_refused(exc: SchemaMismatchError, table_uri: str, table: pa.Schema) -> ConfigError:
    """A schema given up front (``--schema``) that the existing table cannot take, as the
    configuration error it is (exit 2): it names the flag, why (``exc``) and the table's columns."""
    return ConfigError(
        "--schema",
        "the given schema",
        f"a schema the table {table_uri} can take; its columns: {columns_text(table)}",
        reason=str(exc),
    )


class LandingSession:
    """One topic landing in one table for one app id, through ``committer`` (which holds the
    engine, the table and the app id: :func:`default_app_id` unless given)."""

    def __init__(self, committer: Committer) -> None:
        self.committer = committer

    @property
    def app_id(self) -> str:
        return self.committer.app_id

    def start(self, schema: pa.Schema | None = None) -> str:
        """Before consuming: an existing table is made to take ``schema`` (when given,
        :meth:`evolve_to`) and its orphans are removed; a missing table is created from
        ``schema`` (with parka's reserved columns), or later from the first segment. Returns
        where the table's schema comes from: ``"table"``, ``"given"`` or ``"first segment"``.

        Raises:
            ConfigError: the existing table cannot take ``schema`` (:func:`given_schema_refused`),
                or a new table cannot be partitioned as asked by ``schema``'s columns.
            SchemaMismatchError: the table format cannot store ``schema``.
            CommitConflict, CommitError: a schema change or the cleanup failed.
        """
        committer = self.committer
        if committer.table is not None:
            if schema is not None:
                try:
                    self.evolve_to(schema)
                except SchemaMismatchError as exc:
                    raise given_schema_refused(exc, committer.table_uri, committer.table_schema()) from exc
            source = "table"
        elif schema is not None:
            given = pa.schema([*schema, *(f.with_nullable(True) for f in RESERVED_FIELDS)])
            committer.ensure_table(given, source="the given schema")
            source = "given"
        else:
            source = "first segment"
        self.remove_orphans()
        return source

    def evolve_to(self, schema: pa.Schema) -> bool:
        """Make the existing table take ``schema`` (one given up front) by the rule segments are
        held to (:func:`parka.lake.fit_segment`): with ``merge``, its new columns are added now,
        in a commit of their own, re-read and tried again on a conflict
        (:meth:`Committer.retry`, as :meth:`Committer.commit` is). Returns whether the schema
        changed.

        Raises:
            SchemaMismatchError: the table cannot take ``schema``.
            CommitConflict: conflicts that did not resolve.
        """
        c = self.committer
        assert c.table is not None, "only for an existing table"

        def attempt(_: Mapping[int, int | None]) -> bool:  # on the table re-read
            fit = fit_segment(c.table_schema(), schema, partition_by=c.partitioning, merge=c.merge)
            if fit.problem is not None:
                raise SchemaMismatchError(f"the table cannot take the given schema: {fit.problem}", field=fit.field)
            if not fit.new_fields:
                return False
            c.add_columns(fit.new_fields)
            log.info("table schema evolved to the given schema: %s", ", ".join(f.name for f in fit.new_fields))
            return True

        return c.retry(attempt, what="schema change")

    def settle_app_id(self, partitions: Iterable[int]) -> str:
        """The app id to land under, for the topic's ``partitions``, and the committer's from
        now on. A given app id is kept. A derived one (:func:`parka.lake.default_app_id` of the
        table) gives way to the default of earlier releases, ``parka-<topic>``
        (:func:`parka.lake.legacy_app_id`), when the table holds progress under that one and none
        under its own: an existing table keeps its ``txn`` app ids, so an upgrade neither reads
        anything again nor skips anything. A table that holds files of the topic but progress
        under neither was landed under another app id (or is reached by another address than
        before): the derived one would land the topic into it again, so it is refused.

        Raises:
            ConfigError: the table holds the topic's files under another app id (``--app-id``).
            CommitError: the table cannot be read.
        """
        c = self.committer
        parts = list(partitions)
        if c.app_id_given or any(v is not None for v in c.txn_versions(parts).values()) or c.table is None:
            return c.app_id
        legacy = legacy_app_id(c.topic)
        if any(c.table.txn_version(app_txn_id(legacy, p)) is not None for p in parts):
            log.info(
                "%s holds its progress under app id %s (txn ids %s-<partition>): kept", c.table_uri, legacy, legacy
            )
            c.app_id = legacy
        elif any((name := FileName.parse(f)) is not None and name.topic == c.topic for f in c.table.referenced_files()):
            raise ConfigError(
                "--app-id",
                f"{c.app_id} (the table's default)",
                "the app id the table's progress is under (each parka commit names it: parka.app_id)",
                reason=f"{c.table_uri} holds files of topic {c.topic} but no progress under {c.app_id} or the "
                f"earlier default {legacy}: it was landed under another app id, or reached by another address, "
                "and this one would land the topic into it again",
            )
        return c.app_id

    def resume(self, partitions: Iterable[int]) -> dict[int, int | None]:
        """Each partition's table ``txn`` version (``None``: nothing of it in the table yet):
        consuming continues at version + 1."""
        return self.committer.txn_versions(partitions)

    def remove_orphans(self) -> int:
        """Remove the files of commits that never happened (table and dead-letter table);
        returns how many. Logged when there were any.

        Raises:
            CommitError: listing, reading the log or deleting failed.
        """
        removed = self.committer.remove_orphans()
        if removed:
            log.info("removed %d orphan data file(s) of interrupted commits", removed)
        return removed
