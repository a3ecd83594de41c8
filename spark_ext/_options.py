"""Settings text as Spark and Kafka take it: the trigger (``available-now`` or
``processing-time=<n><unit>``), delta-rs storage options as Hadoop's s3a settings,
librdkafka's ``-K`` settings as the Kafka source's (Java client) options, and a pyiceberg
catalog's properties as a Spark catalog of Iceberg's Spark runtime. Pure: no Spark."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from urllib.parse import urlparse

from parka.errors import ConfigError

__all__ = [
    "HADOOP_CHECKPOINT",
    "ICEBERG_CATALOG_CLASS",
    "hadoop_storage_options",
    "hadoop_uri",
    "iceberg_catalog_conf",
    "kafka_client_options",
    "lake_storage_options",
    "trigger_ms",
]

# delta-rs storage option -> Hadoop setting, for the options both engines know.
_STORAGE_KEYS = {
    "aws_access_key_id": "fs.s3a.access.key",
    "aws_secret_access_key": "fs.s3a.secret.key",
    "aws_session_token": "fs.s3a.session.token",
    "aws_endpoint_url": "fs.s3a.endpoint",
    "aws_endpoint": "fs.s3a.endpoint",
    "aws_region": "fs.s3a.endpoint.region",
}
# delta-rs storage options s3a has no setting for (see hadoop_storage_options)
_STORAGE_KEYS_FOR_OTHERS = ("aws_allow_http", "aws_conditional_put", "aws_virtual_hosted_style_request")
# Azure's and Google's delta-rs options: for delta-rs and obstore (raw mode's files and commits);
# Spark's own reads of such a table take Hadoop's fs.azure.* / fs.gs.* settings, given as such
_OTHER_CLOUDS = ("azure_", "google_")
# object_store schemes Hadoop names otherwise, and those it has no FileSystem for (az://container is
# abfss://container@<account>... to Hadoop, which needs the account the URI lacks; memory:// is the process's own)
_HADOOP_SCHEMES = {"s3": "s3a"}
_NOT_HADOOP = ("az", "azure", "memory")
_TRIGGER = re.compile(r"processing-time=(\d+(?:\.\d+)?)\s*([a-z]*)")
_UNIT_MS = {
    **dict.fromkeys(("ms", "millisecond", "milliseconds"), 1),
    **dict.fromkeys(("", "s", "second", "seconds"), 1000),
    **dict.fromkeys(("m", "minute", "minutes"), 60_000),
    **dict.fromkeys(("h", "hour", "hours"), 3_600_000),
}


def trigger_ms(trigger: str) -> int | None:
    """``None`` for ``available-now``, else the processing-time interval in milliseconds.

    Raises:
        ConfigError: any other form.
    """
    if trigger == "available-now":
        return None
    m = _TRIGGER.fullmatch(trigger.strip())
    if m is None or m.group(2) not in _UNIT_MS:
        raise ConfigError("trigger", trigger, "available-now, processing-time=<n>[ms|s|m|h] (e.g. processing-time=30s)")
    return max(1, int(float(m.group(1)) * _UNIT_MS[m.group(2)]))


def hadoop_storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """Storage options as Hadoop settings (s3a).

    delta-rs' keys in ``_STORAGE_KEYS`` are translated. ``aws_allow_http`` and
    ``aws_conditional_put`` have no s3a setting (s3a takes http from the endpoint URL; it makes
    no conditional puts) and are left to delta-rs and obstore. object_store addresses buckets
    path-style unless ``aws_virtual_hosted_style_request`` is true; s3a is told the same
    (``fs.s3a.path.style.access``) when an endpoint is given, so both reach the same server
    the same way. Azure's and Google's delta-rs keys (``azure_*``, ``google_*``) have no
    translation: Hadoop's own ``fs.azure.*`` / ``fs.gs.*`` keys configure Spark for those. An
    ``fs.*`` key given as such wins.

    Raises:
        ConfigError: a key that is neither ``fs.*`` nor a known delta-rs key.
    """
    out: dict[str, str] = {}
    hosted: str | None = None
    for key, value in options.items():
        name = key.lower()
        if key.startswith("fs."):
            continue
        if name in _STORAGE_KEYS:
            out[_STORAGE_KEYS[name]] = value
        elif name == "aws_virtual_hosted_style_request":
            hosted = value
        elif name not in _STORAGE_KEYS_FOR_OTHERS and not name.startswith(_OTHER_CLOUDS):
            known = (*_STORAGE_KEYS, *_STORAGE_KEYS_FOR_OTHERS)
            allowed = "fs.* Hadoop settings, AZURE_*, GOOGLE_*, " + ", ".join(k.upper() for k in known)
            raise ConfigError("storage option", key, allowed)
    if hosted is not None:
        out["fs.s3a.path.style.access"] = "false" if hosted.strip().lower() == "true" else "true"
    elif "fs.s3a.endpoint" in out:
        out["fs.s3a.path.style.access"] = "true"
    out.update({k: v for k, v in options.items() if k.startswith("fs.")})
    return out


def hadoop_uri(uri: str) -> str | None:
    """``uri`` as Hadoop names it, for what Spark writes through Hadoop's FileSystem (the streaming
    checkpoint): ``s3://`` (object_store's and delta-rs' name) is ``s3a://``; a local path,
    ``s3a://``, ``abfss://``, ``gs://``, ``hdfs://``... stay as they are. ``None`` for a scheme
    Hadoop has no FileSystem for (``az://``, ``azure://``, ``memory://``)."""
    scheme, sep, rest = uri.partition("://")
    name = scheme.lower()
    if not sep:
        return uri
    if name in _NOT_HADOOP:
        return None
    return f"{_HADOOP_SCHEMES[name]}://{rest}" if name in _HADOOP_SCHEMES else uri


HADOOP_CHECKPOINT = (
    "a local path, or a URI Hadoop writes: s3a://, abfss://CONTAINER@ACCOUNT.dfs.core.windows.net/..., gs://, hdfs://"
)
"""What a streaming checkpoint's location may be (Spark writes it through Hadoop's FileSystem)."""


def lake_storage_options(options: Mapping[str, str]) -> dict[str, str]:
    """The storage options the driver's own file and commit work takes (delta-rs, obstore,
    pyiceberg's FileIO): all but Hadoop's ``fs.*`` settings, which are Spark's alone."""
    return {k: v for k, v in options.items() if not k.startswith("fs.")}


def kafka_client_options(conf: Mapping[str, str]) -> dict[str, str]:
    """``-K`` settings as Kafka source options; librdkafka's ``sasl.username``/``sasl.password``
    become the Java client's ``sasl.jaas.config``, its ``sasl.mechanisms`` ``sasl.mechanism`` and
    its ``ssl.ca.location`` (a PEM file) a PEM trust store, so one set of flags serves both CLIs."""
    conf = dict(conf)
    ca = conf.pop("ssl.ca.location", None)
    if ca is not None and "ssl.truststore.location" not in conf:
        conf["ssl.truststore.type"] = "PEM"
        conf["ssl.truststore.location"] = ca
    user, password = conf.pop("sasl.username", None), conf.pop("sasl.password", None)
    if (user is None) != (password is None):
        raise ConfigError("sasl.username/sasl.password", "one of them", "both or neither")
    if user is not None and "sasl.jaas.config" not in conf:
        mechanism = conf.get("sasl.mechanism", conf.get("sasl.mechanisms", "PLAIN")).upper()
        module = "scram.ScramLoginModule" if mechanism.startswith("SCRAM") else "plain.PlainLoginModule"
        quoted = [v.replace("\\", "\\\\").replace('"', '\\"') for v in (user, password or "")]
        conf["sasl.jaas.config"] = (
            f'org.apache.kafka.common.security.{module} required username="{quoted[0]}" password="{quoted[1]}";'
        )
    if "sasl.mechanisms" in conf:  # librdkafka's spelling
        conf.setdefault("sasl.mechanism", conf.pop("sasl.mechanisms"))
    return {f"kafka.{k}": v for k, v in conf.items()}


ICEBERG_CATALOG_CLASS = "org.apache.iceberg.spark.SparkCatalog"
"""The Spark catalog class of Iceberg's Spark runtime."""
# pyiceberg's catalog properties that name where the catalog is: a Spark catalog of that name
# configured otherwise is another catalog (the rest may differ: caching, credentials...)
ICEBERG_CATALOG_IDENTITY = ("", ".type", ".uri", ".warehouse")
# pyiceberg's FileIO properties that Iceberg's Java S3FileIO names otherwise (the other s3.* are the same)
_JAVA_FILEIO_KEYS = {"s3.region": "client.region"}
# pyiceberg's SQL catalog's own settings (SQLAlchemy's), which mean nothing to Java's JdbcCatalog
_SQLALCHEMY_KEYS = frozenset({"echo", "pool_pre_ping", "init_catalog_tables"})
_S3_FILE_IO = "org.apache.iceberg.aws.s3.S3FileIO"


def iceberg_catalog_conf(name: str, properties: Mapping[str, str]) -> dict[str, str]:
    """Spark settings (``spark.sql.catalog.<name>...``) that make ``name`` a Spark catalog of
    Iceberg's Spark runtime (:data:`ICEBERG_CATALOG_CLASS`) on the catalog pyiceberg opens with
    ``properties`` (:func:`parka.lake.iceberg.catalog_properties`, as :class:`parka.lake.IcebergEngine`
    holds them), so that Spark writes the tables parka reads:

    * a REST catalog (``type=rest``, or a ``uri`` starting with ``http``): the properties as they
      are (Iceberg's Java REST client takes pyiceberg's names: ``uri``, ``credential``, ``token``,
      ``warehouse``, ``prefix``, ``scope``, ``header.*``...);
    * pyiceberg's SQL catalog on SQLite (the embedded one, ``<warehouse>/catalog.db``): Iceberg's
      ``JdbcCatalog`` on the same file (``jdbc:sqlite:<path>``, the SQLite JDBC driver). Both keep
      their tables in the same two database tables, by catalog name: the Spark catalog has
      pyiceberg's name;
    * FileIO properties: pyiceberg's ``s3.*`` are the Java ``S3FileIO``'s (``s3.region`` is
      ``client.region``); a SQL catalog whose warehouse is in S3 writes through ``S3FileIO``;
    * ``cache-enabled=false``: each micro-batch loads the table afresh, with the schema pyiceberg
      evolved.

    pyiceberg-only properties (``py-*``, SQLAlchemy's) are left out.

    Raises:
        ConfigError: a catalog this has no mapping for (another type, another SQL database, a
            Python implementation), with what to do instead.
    """
    props = {k: v for k, v in properties.items() if not k.startswith("py-")}
    uri = props.get("uri", "")
    kind = props.pop("type", "") or _infer_type(uri)
    prefix = f"spark.sql.catalog.{name}"
    yourself = (
        f"configure the Spark catalog yourself: -c {prefix}={ICEBERG_CATALOG_CLASS} and its properties "
        f"({prefix}.type=..., {prefix}.uri=...); parka then uses it as it is"
    )
    if "py-catalog-impl" in properties:
        raise ConfigError("--catalog", name, yourself, reason="a Python catalog implementation has no Spark one")
    if kind == "rest":
        conf = {"type": "rest", **props}
    elif kind == "sql":
        parsed = urlparse(uri)
        if parsed.scheme != "sqlite" or parsed.path in ("", "/"):
            raise ConfigError(
                "--catalog-option",
                f"uri={uri}",
                f"a SQLite file (sqlite:///PATH), or {yourself}",
                reason="decode mode maps pyiceberg's SQL catalog to Spark on SQLite only",
            )
        path = os.path.abspath(parsed.path[1:])  # SQLAlchemy: sqlite:///relative, sqlite:////absolute
        conf = {k: v for k, v in props.items() if k not in _SQLALCHEMY_KEYS}
        conf.update(type="jdbc", uri=f"jdbc:sqlite:{path}")
        if conf.get("warehouse", "").startswith(("s3://", "s3a://")):
            conf.setdefault("io-impl", _S3_FILE_IO)
    else:
        raise ConfigError(
            "--catalog",
            name,
            f"a REST or SQL (SQLite) catalog, or {yourself}",
            reason=f"decode mode has no Spark mapping for a catalog of type {kind or 'unknown'!r}",
        )
    for key, java in _JAVA_FILEIO_KEYS.items():
        if key in conf:
            conf.setdefault(java, conf.pop(key))
    conf["cache-enabled"] = "false"
    return {prefix: ICEBERG_CATALOG_CLASS, **{f"{prefix}.{k}": v for k, v in conf.items()}}


def _infer_type(uri: str) -> str:
    """The catalog type pyiceberg infers from a ``uri`` (``infer_catalog_type``)."""
    if uri.startswith("http"):
        return "rest"
    if uri.startswith("thrift"):
        return "hive"
    if uri.startswith(("sqlite", "postgresql")):
        return "sql"
    return ""
