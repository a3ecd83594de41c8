"""Schemas from a Confluent-compatible schema registry, by subject or by id: Avro, JSON Schema
and Protobuf (:meth:`Registry.readable`).

Configuration: the ``schema.registry.*`` keys of a producer's or consumer's config (the names
confluent-kafka's own serializers use): ``schema.registry.url`` turns it on, and every other
``schema.registry.X`` key is the registry client's ``X`` (``basic.auth.user.info``,
``basic.auth.credentials.source``, ``ssl.ca.location``, ``timeout``, ``max.retries``...). They are
taken out before the rest of the config reaches librdkafka, and never logged.

A segment produced under a registered schema carries its id in the ``parka.schema.id`` header
(decimal ASCII; see :mod:`parka.segment`). The fingerprint header stays the schema's identity
inside parka; the id lets a reader fetch the writer's schema and check it.

This module is the one place that talks to ``confluent_kafka.schema_registry`` (an HTTP client:
no broker involved). It is imported lazily, so the core keeps no import of confluent_kafka at
load time, and the client's extra dependencies are needed only with a registry configured
(parka's ``registry`` extra).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pyarrow as pa

from parka.errors import ConfigError, RegistryError, SchemaError
from parka.extras import install_command
from parka.schema import is_message_class, json_schema_to_arrow, schema_fingerprint, to_arrow_schema
from parka.segment import SCHEMA_ID_HEADER

log = logging.getLogger(__name__)

__all__ = ["PREFIX", "Registry", "parse_schema_id", "split_registry_config"]

PREFIX = "schema.registry."


def split_registry_config(conf: Mapping[str, Any]) -> tuple[dict[str, Any] | None, dict[str, Any]]:
    """Split ``conf`` into the registry client's config (``None`` without ``schema.registry.url``)
    and the rest. Raises :class:`ConfigError` for ``schema.registry.*`` keys without a URL."""
    rest = {k: v for k, v in conf.items() if not k.startswith(PREFIX)}
    ours = {k[len(PREFIX) :]: v for k, v in conf.items() if k.startswith(PREFIX)}
    if not ours:
        return None, rest
    if not ours.get("url"):
        key = PREFIX + sorted(ours)[0]
        raise ConfigError(key, "<set>", "schema.registry.* keys together with schema.registry.url")
    return ours, rest


def parse_schema_id(raw: bytes | str | None) -> int | None:
    """The schema id of a ``parka.schema.id`` header value, ``None`` when absent.
    Raises :class:`RegistryError` for a value that is not a decimal id."""
    if raw is None:
        return None
    text = raw.decode("ascii", "replace") if isinstance(raw, bytes) else raw
    if not text.isdigit():
        raise RegistryError(f"malformed '{SCHEMA_ID_HEADER}' header: {text!r} (a decimal schema id)")
    return int(text)


class Registry:
    """Fetches and registers Avro schemas. No network I/O until a method is called; answers by id
    are cached by the client. Every method raises :class:`RegistryError` on a refusal or when the
    registry cannot be reached (the URL is named, credentials never are)."""

    def __init__(self, conf: Mapping[str, Any]) -> None:
        try:
            from confluent_kafka.schema_registry import SchemaRegistryClient
        except ImportError as exc:
            raise ImportError(
                "schema.registry.url needs confluent-kafka's schema registry client, parka's 'registry' extra: "
                + install_command("registry")
            ) from exc
        self.url = str(conf["url"])
        try:
            self._client = SchemaRegistryClient(dict(conf))
        except (ValueError, TypeError) as exc:
            raise ConfigError(
                "schema.registry.*", "<hidden>", "confluent-kafka's SchemaRegistryClient settings", reason=str(exc)
            ) from None
        self._arrow: dict[int, tuple[pa.Schema, str]] = {}

    def close(self) -> None:
        """Close the client's HTTP connections."""
        self._client.close()

    def latest(self, subject: str) -> tuple[int, str | pa.Schema | type]:
        """The latest version of ``subject``: ``(schema id, schema)``, the schema as
        :meth:`readable` gives it."""
        registered = self._call(lambda: self._client.get_latest_version(subject), subject=subject)
        schema_id = int(registered.schema_id)
        return schema_id, self.readable(schema_id, registered.schema, subject=subject)

    def readable(self, schema_id: int, schema: Any, *, subject: str | None = None) -> str | pa.Schema | type:
        """A registered schema as parka takes it: an Avro schema's text, a JSON Schema's Arrow
        schema, a Protobuf schema's message class (its file's first message; the ``protobuf``
        extra).

        Raises:
            RegistryError: a schema type parka does not read, or a Protobuf schema that
                references other registered schemas or does not build.
        """
        kind = schema.schema_type or "AVRO"
        try:
            if kind == "AVRO":
                return str(schema.schema_str)
            if kind == "JSON":
                return json_schema_to_arrow(schema.schema_str)
            if kind == "PROTOBUF":
                from parka.protodecode import registered_class  # the protobuf extra: only for such a schema

                references = [str(r.subject) for r in schema.references or []]
                return registered_class(str(schema.schema_str), references, schema_id)
        except SchemaError as exc:
            raise RegistryError(f"schema {schema_id} ({kind}): {exc}", subject=subject, schema_id=schema_id) from None
        raise RegistryError(f"schema {schema_id} is {kind}, which parka does not read", subject=subject,
                            schema_id=schema_id)  # fmt: skip

    def register(self, subject: str, schema: str) -> int:
        """Register the Avro ``schema`` under ``subject`` (its existing id when already there); a
        version the subject's compatibility rule refuses is a :class:`RegistryError` naming the rule."""
        from confluent_kafka.schema_registry import Schema

        try:
            return int(
                self._call(lambda: self._client.register_schema(subject, Schema(schema, "AVRO")), subject=subject)
            )
        except RegistryError as exc:
            if not str(exc).endswith("(HTTP 409)"):
                raise
            # A registration that took effect before an error answered it (the client retried, and
            # a registry such as Apicurio then says the subject exists): the schema is there
            try:
                found = self._call(lambda: self._client.lookup_schema(subject, Schema(schema, "AVRO")), subject=subject)
            except RegistryError:
                found = None
            if found is not None:
                log.info("schema registry: %s held the schema already (id %s)", subject, found.schema_id)
                return int(found.schema_id)
            raise RegistryError(
                f"{exc}: the new version is incompatible with the subject's compatibility rule "
                f"({self._compatibility(subject)})",
                subject=subject,
            ) from None

    def _compatibility(self, subject: str) -> str:
        """The compatibility rule ``subject`` is held to (its own, else the registry's), for messages."""
        for ask in (lambda: self._client.get_compatibility(subject), lambda: self._client.get_compatibility()):
            try:
                rule = ask()
            except Exception as exc:  # not set at this level, or unreachable: ask the next, else say so
                log.debug("no compatibility rule from the registry: %s", exc)
                continue
            return str(getattr(rule, "value", rule))
        return "unknown"

    def writer_schema(self, schema_id: int) -> tuple[pa.Schema, str]:
        """The Arrow schema and its fingerprint of the schema with id ``schema_id`` (Avro, JSON
        Schema or Protobuf: :meth:`readable`)."""
        hit = self._arrow.get(schema_id)
        if hit is None:
            schema = self._call(lambda: self._client.get_schema(schema_id), schema_id=schema_id)
            readable = self.readable(schema_id, schema)
            if is_message_class(readable):
                from parka.protodecode import ProtobufRecords

                arrow = ProtobufRecords(readable).schema
            else:
                arrow = to_arrow_schema(readable)
            hit = self._arrow[schema_id] = (arrow, schema_fingerprint(arrow))
        return hit

    def writer_avro(self, schema_id: int) -> str:
        """The Avro schema text with id ``schema_id`` (the client caches answers by id).

        Raises:
            RegistryError: the schema is not an Avro schema (``http_status`` 404, as for an
                unknown id: the value's frame names a schema this format cannot read), or the
                registry refused or could not be reached.
        """
        schema = self._call(lambda: self._client.get_schema(schema_id), schema_id=schema_id)
        if schema.schema_type not in (None, "AVRO"):
            raise RegistryError(
                f"schema {schema_id} is {schema.schema_type}, not an Avro schema", schema_id=schema_id, http_status=404
            )
        return str(schema.schema_str)

    def writer_json_schema(self, schema_id: int) -> str:
        """The JSON Schema text with id ``schema_id`` (the client caches answers by id).

        Raises:
            RegistryError: the schema is not a JSON Schema (``http_status`` 404 as for an
                unknown id: the value's frame names a schema this format cannot read), or the
                registry refused or could not be reached.
        """
        schema = self._call(lambda: self._client.get_schema(schema_id), schema_id=schema_id)
        if schema.schema_type != "JSON":
            raise RegistryError(
                f"schema {schema_id} is {schema.schema_type or 'AVRO'}, not a JSON Schema",
                schema_id=schema_id,
                http_status=404,
            )
        return str(schema.schema_str)

    def writer_protobuf(self, schema_id: int) -> tuple[str, list[str]]:
        """The Protobuf schema with id ``schema_id``: its text (``.proto`` source, or the base64 of
        a ``FileDescriptorProto`` as confluent-kafka's serializer registers it) and the subjects
        of the schemas it references (imports of other registered files).

        Raises:
            RegistryError: the schema is not a Protobuf schema (``http_status`` 404, as for
                :meth:`writer_json_schema`), or the registry refused or could not be reached.
        """
        schema = self._call(lambda: self._client.get_schema(schema_id), schema_id=schema_id)
        if schema.schema_type != "PROTOBUF":
            raise RegistryError(
                f"schema {schema_id} is {schema.schema_type or 'AVRO'}, not a Protobuf schema",
                schema_id=schema_id,
                http_status=404,
            )
        return str(schema.schema_str), [str(r.subject) for r in schema.references or []]

    def _call(self, fn: Any, *, subject: str | None = None, schema_id: int | None = None) -> Any:
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        what = f"subject '{subject}'" if subject is not None else f"schema id {schema_id}"
        try:
            return fn()
        except SchemaRegistryError as exc:
            raise RegistryError(
                f"schema registry at {self.url} refused {what}: {exc.error_message} (HTTP {exc.http_status_code})",
                subject=subject,
                schema_id=schema_id,
                http_status=exc.http_status_code,
            ) from None
        except Exception as exc:  # the HTTP client's connection and timeout errors
            raise RegistryError(
                f"schema registry at {self.url} could not be reached for {what}: {type(exc).__name__}: {exc}",
                subject=subject,
                schema_id=schema_id,
            ) from None
