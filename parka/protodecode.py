"""Confluent-framed Protobuf values decoded into Arrow in bulk (``parka ingest --value-format
protobuf``; the ``protobuf`` extra: protobuf, ptars, proto-schema-parser).

Confluent's Protobuf serializers frame a value as: the magic byte 0, the writer schema's registry
id (4 bytes, big-endian), the *message indexes* (which message of the schema's file: a
zigzag-varint count, then that many zigzag-varint indexes, the path to the message through
nested types; a single 0 byte for the file's first message), then the message's Protobuf binary
encoding. :class:`ProtobufRows` splits a batch into runs of one schema id and message, and
decodes each run's bodies with ptars (Rust: the messages to an Arrow record batch, no Python
object per message), from the message's descriptor.

The schema comes from the registry (:meth:`parka.registry.Registry.writer_protobuf`): the base64
of a ``FileDescriptorProto`` (what confluent-kafka's ``ProtobufSerializer`` registers), or
``.proto`` source, parsed here (proto-schema-parser: no ``protoc``) into the same descriptor:
messages, nested messages and enums, ``repeated``, ``map<K, V>``, ``oneof``, proto3
``optional``, and imports of the well-known types (``google/protobuf/*.proto``). A schema that
imports another registered schema (a reference) is refused, named.

Types: scalars as Arrow's; ``uint32`` as ``int64`` and ``uint64`` as ``decimal128(20, 0)`` (no
table format parka writes has unsigned integers; both hold every value); enums as their numbers
(``int32``); ``oneof`` members as nullable columns; ``google.protobuf.Timestamp`` as
``timestamp[us, UTC]``; the wrappers (``Int64Value``...) as nullable scalars; a repeated field as
a list, a map as a map. A message type that contains itself (recursion) has no Arrow schema: its
values are refused, naming the type.

A batch ptars refuses (it does not say which value) is decoded one value at a time with
protobuf's parser, and the values it cannot parse are bad values, named; the rest go through
ptars again.

:class:`ProtobufRecords` is one message class both ways, for the client: a producer's messages
(or dicts of their fields) to Arrow in bulk, with these types, and a segment's rows back to
messages of the class, as confluent-kafka's ``ProtobufDeserializer`` gives them.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import logging
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from parka.errors import RecordError, RegistryError, SchemaError
from parka.extras import require
from parka.records import Conversion
from parka.rowdecode import Run, Runs
from parka.schema import is_message_class

require(
    ("google.protobuf", "ptars", "proto_schema_parser"), "protobuf", "Protobuf row records (--value-format protobuf)"
)

__all__ = [
    "ProtobufRecords",
    "ProtobufRows",
    "file_descriptor",
    "message_indexes",
    "registered_class",
    "registered_file",
]

log = logging.getLogger("parka.protodecode")

_FRAME = struct.Struct(">bI")
_WELL_KNOWN = "google/protobuf/"


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A base-128 varint at ``at``: ``(value, the offset after it)``. Raises ValueError when cut."""
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise ValueError("a message index is cut off")
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _zigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def message_indexes(value: bytes) -> tuple[tuple[int, ...], int]:
    """The message indexes of a Confluent-framed Protobuf value and where its body starts.

    Raises:
        ValueError: not framed (magic byte 0, 4-byte id), or the indexes are cut off.
    """
    if len(value) < _FRAME.size + 1 or value[0] != 0:
        raise ValueError(f"not Confluent-framed Protobuf (magic byte 0, a 4-byte schema id, indexes): {value[:6]!r}")
    count, at = _varint(value, _FRAME.size)
    count = _zigzag(count)
    if count == 0:
        return (0,), at
    if count < 0 or count > 64:
        raise ValueError(f"{count} message indexes: not a Confluent Protobuf frame")
    indexes = []
    for _ in range(count):
        index, at = _varint(value, at)
        indexes.append(_zigzag(index))
    return tuple(indexes), at


def file_descriptor(schema_text: str, name: str) -> Any:
    """The ``FileDescriptorProto`` of a registry's Protobuf schema: its text is the base64 of one
    (confluent-kafka registers that), or ``.proto`` source.

    Raises:
        SchemaError: source proto-schema-parser cannot parse, or a construct it has no
            descriptor for here (a type name that names nothing known).
    """
    from google.protobuf import descriptor_pb2

    text = schema_text.strip()
    if "{" not in text:
        try:
            proto = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(text, validate=True))
        except (binascii.Error, ValueError) as exc:
            raise SchemaError(f"neither .proto source nor a base64 FileDescriptorProto: {exc}") from None
        proto.name = proto.name or name
        return proto
    return _from_source(text, name)


_SCALARS = {
    "double": "TYPE_DOUBLE",
    "float": "TYPE_FLOAT",
    "int64": "TYPE_INT64",
    "uint64": "TYPE_UINT64",
    "int32": "TYPE_INT32",
    "fixed64": "TYPE_FIXED64",
    "fixed32": "TYPE_FIXED32",
    "bool": "TYPE_BOOL",
    "string": "TYPE_STRING",
    "bytes": "TYPE_BYTES",
    "uint32": "TYPE_UINT32",
    "sfixed32": "TYPE_SFIXED32",
    "sfixed64": "TYPE_SFIXED64",
    "sint32": "TYPE_SINT32",
    "sint64": "TYPE_SINT64",
}


def _from_source(text: str, name: str) -> Any:
    """``.proto`` source as a ``FileDescriptorProto``, the type names resolved as protoc does
    (the innermost scope first), against this file's types and the well-known types'."""
    from antlr4.error.ErrorListener import ErrorListener
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast
    from proto_schema_parser.parser import Parser

    class Raising(ErrorListener):
        """ANTLR recovers from a syntax error and goes on: here, it is the end."""

        def syntaxError(self, recognizer: Any, symbol: Any, line: int, column: int, msg: str, e: Any) -> None:
            raise SchemaError(f"the .proto source does not parse: line {line}:{column}: {msg}")

    def raising(recognizer: Any) -> None:
        recognizer.removeErrorListeners()
        recognizer.addErrorListener(Raising())

    try:
        tree = Parser(setup_lexer=raising, setup_parser=raising).parse(text)
    except SchemaError:
        raise
    except Exception as exc:  # the parser raises what ANTLR raises
        raise SchemaError(f"the .proto source does not parse: {type(exc).__name__}: {exc}") from None
    fdp = descriptor_pb2.FileDescriptorProto(name=name, syntax=tree.syntax or "proto2")
    kinds: dict[str, str] = {}  # full name -> "message" | "enum"
    for element in tree.file_elements:
        if isinstance(element, ast.Package):
            fdp.package = element.name
        elif isinstance(element, ast.Import):
            if not element.name.startswith(_WELL_KNOWN):
                raise SchemaError(f"imports {element.name}: schema references are not read, only the well-known types")
            fdp.dependency.append(element.name)
            _known(_well_known(element.name), kinds)
    package = fdp.package

    def collect(elements: Sequence[Any], scope: str) -> None:
        for e in elements:
            if isinstance(e, ast.Message):
                kinds[f"{scope}.{e.name}".lstrip(".")] = "message"
                collect(e.elements, f"{scope}.{e.name}")
            elif isinstance(e, ast.Enum):
                kinds[f"{scope}.{e.name}".lstrip(".")] = "enum"

    collect(tree.file_elements, package)
    proto3 = fdp.syntax == "proto3"
    for element in tree.file_elements:
        if isinstance(element, ast.Message):
            fdp.message_type.append(_message(element, package, kinds, proto3))
        elif isinstance(element, ast.Enum):
            fdp.enum_type.append(_enum(element))
    return fdp


def _well_known(name: str) -> Any:
    """The ``FileDescriptor`` of a well-known type's file (``google/protobuf/timestamp.proto``...)
    from protobuf's default pool, its modules imported first (the pool holds only those).

    Raises:
        SchemaError: protobuf has no such file.
    """
    import importlib

    from google.protobuf import descriptor_pool

    module = name.removeprefix(_WELL_KNOWN).removesuffix(".proto")
    try:
        importlib.import_module(f"google.protobuf.{module}_pb2")
        return descriptor_pool.Default().FindFileByName(name)
    except (ImportError, KeyError):
        raise SchemaError(f"imports {name}, which is not one of protobuf's well-known types") from None


def _known(file: Any, kinds: dict[str, str]) -> None:
    def walk(message: Any) -> None:
        kinds[message.full_name] = "message"
        for nested in message.nested_types:
            walk(nested)
        for enum in message.enum_types:
            kinds[enum.full_name] = "enum"

    for message in file.message_types_by_name.values():
        walk(message)
    for enum in file.enum_types_by_name.values():
        kinds[enum.full_name] = "enum"


def _resolve(type_name: str, scope: str, kinds: dict[str, str]) -> tuple[str, str]:
    """``(".full.name", kind)`` of ``type_name`` used inside ``scope`` (protoc's rule)."""
    if type_name.startswith("."):
        candidates = [type_name[1:]]
    else:
        parts = scope.split(".") if scope else []
        candidates = [".".join([*parts[:i], type_name]) for i in range(len(parts), -1, -1)]
    for full in candidates:
        if full in kinds:
            return f".{full}", kinds[full]
    raise SchemaError(f"type {type_name!r} (in {scope or 'the file'}) names nothing this schema defines or imports")


def _message(m: Any, scope: str, kinds: dict[str, str], proto3: bool) -> Any:
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast

    fdp = descriptor_pb2.FieldDescriptorProto
    d = descriptor_pb2.DescriptorProto(name=m.name)
    full = f"{scope}.{m.name}".lstrip(".")

    def add(f: Any, oneof: int | None = None) -> None:
        field = d.field.add(name=f.name, number=f.number)
        cardinality = getattr(f, "cardinality", None)
        field.label = fdp.LABEL_OPTIONAL
        if cardinality == ast.FieldCardinality.REPEATED:
            field.label = fdp.LABEL_REPEATED
        elif cardinality == ast.FieldCardinality.REQUIRED:
            field.label = fdp.LABEL_REQUIRED
        if f.type in _SCALARS:
            field.type = getattr(fdp, _SCALARS[f.type])
        else:
            type_name, kind = _resolve(f.type, full, kinds)
            field.type_name = type_name
            field.type = fdp.TYPE_MESSAGE if kind == "message" else fdp.TYPE_ENUM
        if oneof is not None:
            field.oneof_index = oneof
        elif proto3 and cardinality == ast.FieldCardinality.OPTIONAL:  # a synthetic oneof of its own
            field.proto3_optional = True
            field.oneof_index = len(d.oneof_decl)
            d.oneof_decl.add(name=f"_{f.name}")

    for e in m.elements:
        if isinstance(e, ast.Field):
            add(e)
        elif isinstance(e, ast.MapField):
            entry_name = "".join(part.capitalize() or "_" for part in e.name.split("_")) + "Entry"
            entry = d.nested_type.add(name=entry_name)
            entry.options.map_entry = True
            kinds[f"{full}.{entry_name}"] = "message"
            for number, (key, kind) in enumerate((("key", e.key_type), ("value", e.value_type)), 1):
                add_to = entry.field.add(name=key, number=number, label=fdp.LABEL_OPTIONAL)
                if kind in _SCALARS:
                    add_to.type = getattr(fdp, _SCALARS[kind])
                else:
                    type_name, found = _resolve(kind, full, kinds)
                    add_to.type_name = type_name
                    add_to.type = fdp.TYPE_MESSAGE if found == "message" else fdp.TYPE_ENUM
            d.field.add(
                name=e.name,
                number=e.number,
                label=fdp.LABEL_REPEATED,
                type=fdp.TYPE_MESSAGE,
                type_name=f".{full}.{entry_name}",
            )
        elif isinstance(e, ast.OneOf):
            index = len(d.oneof_decl)
            d.oneof_decl.add(name=e.name)
            for member in e.elements:
                if isinstance(member, ast.Field):
                    add(member, oneof=index)
        elif isinstance(e, ast.Message):
            d.nested_type.append(_message(e, full, kinds, proto3))
        elif isinstance(e, ast.Enum):
            d.enum_type.append(_enum(e))
        elif isinstance(e, ast.Group):
            raise SchemaError(f"{full}: proto2 groups are not read")
    return d


def _enum(e: Any) -> Any:
    from google.protobuf import descriptor_pb2
    from proto_schema_parser import ast

    d = descriptor_pb2.EnumDescriptorProto(name=e.name)
    for value in e.elements:
        if isinstance(value, ast.EnumValue):
            d.value.add(name=value.name, number=value.number)
    return d


class _Message:
    """What decodes one message type: ptars' handler and protobuf's class (to find a bad value)."""

    def __init__(self, descriptor: Any) -> None:
        from google.protobuf import message_factory
        from ptars import HandlerPool, PtarsConfig

        _refuse_recursion(descriptor, ())
        config = PtarsConfig(timestamp_unit="us", timestamp_tz="UTC")
        self.handler = HandlerPool([descriptor.file], config).get_for_message(descriptor)
        self.cls = message_factory.GetMessageClass(descriptor)
        self.name = descriptor.full_name

    def table(self, bodies: Sequence[bytes]) -> pa.Table:
        batch = self.handler.list_to_record_batch(list(bodies))
        return _signed(pa.Table.from_batches([batch]))


class ProtobufRecords:
    """A message class's records to Arrow in bulk and back (see the module docstring):
    :meth:`convert` is :class:`parka.records.RecordConverter`'s twin for messages of the class
    and dicts of its fields (``MessageClass(**record)``), :meth:`messages` a table of
    :attr:`schema` as messages.

    Raises (on construction):
        SchemaError: the class is not a message class, or its type contains itself.
    """

    def __init__(self, message_class: Any) -> None:
        if not is_message_class(message_class):
            raise SchemaError(f"{message_class!r} is not a Protobuf message class")
        self.cls = message_class
        self._message = _Message(message_class.DESCRIPTOR)
        self.name = self._message.name
        self.schema: pa.Schema = self._message.table([]).schema
        self._wire = self._message.handler.schema()  # ptars' own types, for the way back

    def convert(self, records: Sequence[Any]) -> Conversion:
        """``records`` (messages of the class, or dicts of its fields) as one table of
        :attr:`schema`; a record that is neither, or a dict the class refuses, is set aside
        with its :class:`~parka.errors.RecordError` (the field named when one is to blame)."""
        bodies: list[bytes] = []
        kept: list[int] = []
        bad: list[tuple[int, RecordError]] = []
        cls = self.cls
        for i, record in enumerate(records):
            try:
                if type(record) is cls or self.takes(record):
                    bodies.append(record.SerializeToString())
                elif isinstance(record, Mapping):
                    bodies.append(self.cls(**record).SerializeToString())
                else:
                    raise RecordError(f"a {type(record).__name__}, not a {self.name} message or a dict of its fields")
            except RecordError as exc:
                bad.append((i, exc))
                continue
            except (TypeError, ValueError, AttributeError) as exc:
                bad.append((i, RecordError(f"not a {self.name}: {exc}", field=self._culprit(record))))
                continue
            kept.append(i)
        table = self._message.table(bodies)
        return Conversion(table, bad, None if not bad else kept)

    def takes(self, record: Any) -> bool:
        """Whether ``record`` is a message of this type: of the class, or of another class of the
        same message (a registry subject's class, the application's generated one)."""
        descriptor = getattr(record, "DESCRIPTOR", None)
        return getattr(descriptor, "full_name", None) == self.name and hasattr(record, "SerializeToString")

    def _culprit(self, record: Any) -> str | None:
        """The field of a refused dict the class refuses alone, ``None`` when none is."""
        if not isinstance(record, Mapping):
            return None
        for name, value in record.items():
            try:
                self.cls(**{name: value})
            except (TypeError, ValueError, AttributeError):
                return str(name)
        return None

    def messages(self, table: pa.Table) -> list[Any]:
        """The rows of ``table`` (of :attr:`schema`: a segment of this class's records, read in
        it) as messages of the class."""
        if not table.num_rows:
            return []
        columns = [table.column(f.name).cast(f.type) for f in self._wire]
        batch = pa.Table.from_arrays(columns, schema=self._wire).combine_chunks().to_batches()[0]
        bodies = self._message.handler.record_batch_to_array(batch)
        parse = self.cls.FromString
        return [parse(body) for body in bodies.to_pylist()]


def _refuse_recursion(descriptor: Any, path: tuple[str, ...]) -> None:
    if descriptor.full_name in path:
        raise SchemaError(f"message {descriptor.full_name} contains itself: a recursive type has no Arrow schema")
    for field in descriptor.fields:
        if field.message_type is not None:
            _refuse_recursion(field.message_type, (*path, descriptor.full_name))


def _signed(table: pa.Table) -> pa.Table:
    """``table`` with its unsigned integers, at any depth, as signed types that hold them."""
    columns = [_signed_array(c.combine_chunks()) for c in table.columns]
    return pa.Table.from_arrays(columns, names=table.column_names)


def _signed_type(t: pa.DataType) -> pa.DataType:
    if pa.types.is_uint64(t):
        return pa.decimal128(20, 0)
    if pa.types.is_unsigned_integer(t):
        return pa.int64()
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _signed_type(f.type), f.nullable) for f in t])
    if pa.types.is_list(t):
        return pa.list_(pa.field(t.value_field.name, _signed_type(t.value_type), t.value_field.nullable))
    if pa.types.is_map(t):
        return pa.map_(t.key_type, _signed_type(t.item_type))
    return t


def _signed_array(array: pa.Array) -> pa.Array:
    target = _signed_type(array.type)
    if target == array.type:
        return array
    if pa.types.is_uint64(array.type):
        return pc.cast(array, pa.decimal128(20, 0))
    return array.cast(target)


class ProtobufRows:
    """Decoder of Confluent-framed Protobuf values of any writer schemas (see the module
    docstring): ``writer_schema`` gives a schema id's text and references
    (:meth:`parka.registry.Registry.writer_protobuf`). A value without the frame, with indexes
    its file has no message for, or whose id the registry does not hold, is a bad value; any
    other registry failure is raised."""

    def __init__(self, writer_schema: Callable[[int], tuple[str, list[str]]]) -> None:
        self._writer_schema = writer_schema
        self._files: dict[int, Any] = {}  # schema id -> its FileDescriptor, or a RecordError
        self._messages: dict[tuple[int, tuple[int, ...]], _Message | RecordError] = {}

    def decode(self, values: Sequence[bytes | None]) -> Runs:
        framed: list[tuple[Any, int]] = []  # ((schema id, indexes), body start) or (RecordError, 0)
        for value in values:
            if value is None:
                framed.append((RecordError("no value: not a Confluent-framed Protobuf record"), 0))
                continue
            try:
                indexes, start = message_indexes(value)
            except ValueError as exc:
                framed.append((RecordError(str(exc)), 0))
                continue
            framed.append(((_FRAME.unpack_from(value)[1], indexes), start))
        runs: list[Run] = []
        bad: list[tuple[int, RecordError]] = []
        for key, group in itertools.groupby(range(len(values)), key=lambda i: framed[i][0]):
            items = list(group)
            if isinstance(key, RecordError):
                bad.extend((i, key) for i in items)
                continue
            message = self._message(*key)
            if isinstance(message, RecordError):
                bad.extend((i, message) for i in items)
                continue
            bodies = [values[i][framed[i][1] :] for i in items]  # type: ignore[index]
            table, kept, refused = _decode(message, bodies)
            bad.extend((items[j], e) for j, e in refused)
            if table is not None and table.num_rows:
                runs.append(Run(key[0], table.schema, table, [items[j] for j in kept]))
        bad.sort(key=lambda item: item[0])
        return Runs(runs, bad)

    def _message(self, schema_id: int, indexes: tuple[int, ...]) -> _Message | RecordError:
        known = self._messages.get((schema_id, indexes))
        if known is None:
            try:
                known = _Message(_find(self._file(schema_id), indexes))
            except RegistryError as exc:
                if exc.http_status != 404:
                    raise
                known = RecordError(f"schema id {schema_id} is not a Protobuf schema in the registry: {exc}")
            except (SchemaError, LookupError) as exc:
                known = RecordError(f"schema id {schema_id}, message {list(indexes)}: {exc}")
            self._messages[(schema_id, indexes)] = known
        return known

    def _file(self, schema_id: int) -> Any:
        file = self._files.get(schema_id)
        if file is None:
            text, references = self._writer_schema(schema_id)
            file = self._files[schema_id] = registered_file(text, references, schema_id)
        return file


def registered_file(text: str, references: Sequence[str], schema_id: int) -> Any:
    """The ``FileDescriptor`` of a registry's Protobuf schema (its text: ``.proto`` source or a
    base64 ``FileDescriptorProto``), in a pool of its own with the well-known types it imports.

    Raises:
        SchemaError: it references other registered schemas, or does not build.
    """
    from google.protobuf import descriptor_pool

    if references:
        raise SchemaError(f"it references other schemas ({', '.join(references)}), which are not read")
    proto = file_descriptor(text, f"parka_registry_{schema_id}.proto")
    pool = descriptor_pool.DescriptorPool()
    for dependency in proto.dependency:  # the well-known types, from protobuf's own pool
        _add_with_dependencies(pool, _well_known(dependency))
    try:
        return pool.Add(proto)
    except (TypeError, ValueError) as exc:
        raise SchemaError(f"its descriptor does not build: {exc}") from None


def registered_class(text: str, references: Sequence[str], schema_id: int) -> Any:
    """The message class of a registry's Protobuf schema's first message (what a frame's
    indexes ``[0]`` name), for ``set_schema(topic, subject=...)``.

    Raises:
        SchemaError: as :func:`registered_file`, or the file holds no message.
    """
    from google.protobuf import message_factory

    file = registered_file(text, references, schema_id)
    try:
        return message_factory.GetMessageClass(_find(file, (0,)))
    except LookupError as exc:
        raise SchemaError(f"schema {schema_id} holds no message: {exc}") from None


def _add_with_dependencies(pool: Any, file: Any) -> None:
    from google.protobuf import descriptor_pb2

    for dependency in file.dependencies:
        _add_with_dependencies(pool, dependency)
    try:
        pool.FindFileByName(file.name)
    except KeyError:
        proto = descriptor_pb2.FileDescriptorProto()
        file.CopyToProto(proto)
        pool.Add(proto)


def _find(file: Any, indexes: tuple[int, ...]) -> Any:
    """The message the indexes name: the file's ``indexes[0]``-th message, then nested ones."""
    types = list(file.message_types_by_name.values())
    message = None
    for index in indexes:
        if not 0 <= index < len(types):
            raise LookupError(f"no message at index {index} of {[t.name for t in types]}")
        message = types[index]
        types = list(message.nested_types)
    return message


def _decode(message: _Message, bodies: list[bytes]) -> tuple[pa.Table | None, list[int], list[tuple[int, RecordError]]]:
    """``(table, kept, bad)`` of ``bodies``: through ptars at once; when it refuses, each parsed
    by protobuf to find the bad ones, then the rest through ptars."""
    from google.protobuf.message import DecodeError

    try:
        return message.table(bodies), list(range(len(bodies))), []
    except Exception as exc:  # ptars raises what its Rust side raises
        log.debug("ptars refused a batch of %d %s (%s): one value at a time", len(bodies), message.name, exc)
    kept: list[int] = []
    bad: list[tuple[int, RecordError]] = []
    for i, body in enumerate(bodies):
        try:
            message.cls.FromString(body)
        except DecodeError as exc:
            bad.append((i, RecordError(f"not a {message.name} message: {exc}")))
            continue
        kept.append(i)
    if not kept:
        return None, [], bad
    try:
        return message.table([bodies[i] for i in kept]), kept, bad
    except Exception as exc:
        return None, [], bad + [(i, RecordError(f"ptars refused it as a {message.name}: {exc}")) for i in kept]
