"""The Apache Iceberg engine (pyiceberg): :class:`IcebergEngine` opens and creates the tables of
one catalog as :class:`~._table.IcebergTableLog` handles (how the commit protocol maps onto
Iceberg: :mod:`._table`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
from pyiceberg.catalog import Catalog, load_catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError

from parka.errors import Blocker, CommitConflict, CommitError, ConfigError, SchemaMismatchError, one_line
from parka.partitioning import parse_spec

from ._catalog import S3_PROPERTIES, catalog_properties
from ._partitions import data_schema, partition_fields
from ._schema import check_columns, plain_schema
from ._snapshots import CREATED_PROPERTIES, stage_without_copies
from ._table import NAME_MAPPING, IcebergTableLog

__all__ = ["IcebergEngine"]


def _load_catalog(name: str, properties: Mapping[str, str]) -> Catalog:
    """pyiceberg's ``load_catalog``, once more when a SQL catalog's first open raced another
    process's: both find the catalog's tables missing, both create them, and the second
    ``CREATE TABLE`` fails ("table iceberg_tables already exists"). The second open finds them."""
    try:
        return load_catalog(name, **properties)
    except Exception as exc:  # the database driver's own error, through SQLAlchemy
        if "already exists" not in str(exc):
            raise
        return load_catalog(name, **properties)


class IcebergEngine:
    """Opens and creates Iceberg tables in one catalog (``catalog``, with ``options`` over its
    configuration: :func:`catalog_properties`); a table's ``uri`` is its identifier,
    ``namespace.name``. ``storage_options`` (the daemons' ``--storage-option``, object_store's
    keys) also give pyiceberg's FileIO its S3 settings (``s3.endpoint``, ``s3.access-key-id``...)
    where the catalog's own properties do not."""

    name = "iceberg"
    check_columns = staticmethod(check_columns)  # Iceberg's types, not Delta's: a time column is fine
    checkpoint_beside_commits = False  # snapshot expiry is a commit: between the ingest's commits

    def __init__(
        self,
        catalog: str,
        options: Mapping[str, str] | None = None,
        storage_options: Mapping[str, str] | None = None,
    ) -> None:
        self.catalog_name = catalog
        properties = catalog_properties(catalog, options)
        for key, value in (storage_options or {}).items():
            target = S3_PROPERTIES.get(key.lower())
            if target is not None:
                properties.setdefault(target, value)
        self.properties = properties
        self._catalog: Catalog | None = None

    @property
    def catalog(self) -> Catalog:
        if self._catalog is None:
            try:
                catalog = _load_catalog(self.catalog_name, self.properties)
            except Exception as exc:  # pyiceberg raises what its backends raise
                raise CommitError(f"cannot open Iceberg catalog {self.catalog_name!r}: {exc}") from exc
            stage_without_copies(catalog)
            self._catalog = catalog
        return self._catalog

    def blocker(self) -> Blocker | None:
        """Whether the catalog answers (listing its namespaces), for the probe before consuming
        (the probe before consuming, ``table_probe``)."""
        try:
            self.catalog.list_namespaces()
        except Exception as exc:
            self._catalog = None  # a REST catalog reads its configuration when it is loaded: again
            cause = one_line(exc.__cause__ or exc) if isinstance(exc, CommitError) else one_line(exc)
            return Blocker("table", f"Iceberg catalog {self.catalog_name!r} cannot be reached: {cause}", False)
        return None

    def open(self, uri: str, storage_options: Mapping[str, str] | None = None) -> IcebergTableLog | None:
        try:
            table = self.catalog.load_table(uri)
        except NoSuchTableError:
            return None
        except CommitError:
            raise
        except Exception as exc:
            raise CommitError(f"cannot read Iceberg table {uri} in catalog {self.catalog_name!r}: {exc}") from exc
        return IcebergTableLog(self, uri, table, storage_options)

    def create(
        self,
        uri: str,
        schema: pa.Schema,
        *,
        partition_by: Sequence[str],
        storage_options: Mapping[str, str] | None = None,
    ) -> IcebergTableLog:
        data, derived = data_schema(schema)
        by_name = {spec.name: spec for spec in derived}
        specs = [by_name.get(name) or parse_spec(name, key="--partition-by") for name in partition_by]
        catalog = self.catalog
        namespace = uri.rsplit(".", 1)[0] if "." in uri else None
        if namespace is None:
            raise ConfigError("table", uri, "an Iceberg identifier namespace.name")
        try:
            _ensure_namespace(catalog, namespace)
            with catalog.create_table_transaction(uri, schema=plain_schema(data)) as tx:
                if specs:
                    try:
                        with tx.update_spec() as spec:
                            for source, transform, name in partition_fields(specs, tx.table_metadata.schema()):
                                spec.add_field(source, transform, name)
                    except ValueError as exc:  # e.g. two time transforms of one column
                        given = ",".join(map(str, specs))
                        raise ConfigError(
                            "--partition-by", given, "a partition spec Iceberg takes", reason=str(exc)
                        ) from exc
                tx.set_properties(
                    {
                        NAME_MAPPING: tx.table_metadata.schema().name_mapping.model_dump_json(),
                        **CREATED_PROPERTIES,
                    }
                )
            table = catalog.load_table(uri)
        except TableAlreadyExistsError as exc:
            raise CommitConflict(f"Iceberg table {uri} appeared meanwhile") from exc
        except ConfigError:
            raise
        except (ValueError, TypeError) as exc:
            raise SchemaMismatchError(f"Iceberg cannot store this schema: {exc}") from exc
        except Exception as exc:
            # a catalog need not say "exists" as pyiceberg's error (the REST catalog's answer to a
            # create transaction that lost: AlreadyExistsException): a table there now is a lost race
            if self._exists(uri):
                raise CommitConflict(f"Iceberg table {uri} appeared meanwhile ({one_line(exc, limit=200)})") from exc
            raise CommitError(f"cannot create Iceberg table {uri}: {exc}") from exc
        return IcebergTableLog(self, uri, table, storage_options)

    def _exists(self, uri: str) -> bool:
        try:
            return bool(self.catalog.table_exists(uri))
        except Exception:  # the catalog cannot say: not a race we can name
            return False


def _ensure_namespace(catalog: Catalog, namespace: str) -> None:
    """Create ``namespace`` unless it exists. Two workers creating their first table at once race
    here, and a catalog need not say so as pyiceberg's error: the SQL catalog checks, then inserts,
    and the loser's insert fails on the key (sqlite3.IntegrityError). A namespace there now is the
    other worker's, and this one goes on."""
    try:
        catalog.create_namespace(namespace)
    except NamespaceAlreadyExistsError:
        pass
    except Exception:
        try:
            exists = bool(catalog.namespace_exists(namespace))
        except Exception:  # the catalog cannot say: the first error stands
            exists = False
        if not exists:
            raise
