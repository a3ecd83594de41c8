"""Confluent-framed Protobuf to Arrow (:mod:`parka.protodecode`): .proto source read into the
descriptor protoc would give, the message indexes, the documented types, bad values named."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import struct
from typing import Any

import pyarrow as pa
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2, wrappers_pb2

from parka.errors import RegistryError, SchemaError
from parka.protodecode import ProtobufRows, file_descriptor, message_indexes

PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Order {
  int64 id = 1;
  repeated Item items = 3;
  map<string, Item> by_sku = 4;
  google.protobuf.Timestamp at = 5;
  google.protobuf.Int64Value discount = 6;
  oneof payment { string card = 7; string iban = 8; }
  Status status = 9;
  uint64 checksum = 10;
  uint32 count = 12;
  optional int32 priority = 11;
  message Item { string sku = 1; int32 qty = 2; }
}
enum Status { STATUS_UNKNOWN = 0; PAID = 1; }
message Note { string text = 1; message Inner { bool flag = 1; } }
"""


def classes(proto: Any) -> Any:
    pool = descriptor_pool.DescriptorPool()
    for module in (timestamp_pb2, wrappers_pb2):
        wkt = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(wkt)
        pool.Add(wkt)
    return pool.Add(proto)


def frame(schema_id: int, indexes: bytes, body: bytes) -> bytes:
    return struct.pack(">bI", 0, schema_id) + indexes + body


def test_proto_source_reads_into_the_descriptor_with_maps_oneofs_nested_types_and_optional() -> None:
    file = classes(file_descriptor(PROTO, "shop.proto"))
    order = file.message_types_by_name["Order"]
    assert order.fields_by_name["items"].message_type.full_name == "shop.Order.Item"
    assert order.fields_by_name["by_sku"].message_type.GetOptions().map_entry
    assert order.fields_by_name["status"].enum_type.full_name == "shop.Status"
    assert order.fields_by_name["at"].message_type.full_name == "google.protobuf.Timestamp"
    assert [f.name for f in order.oneofs_by_name["payment"].fields] == ["card", "iban"]
    assert order.fields_by_name["priority"].has_presence  # proto3 optional
    assert file.message_types_by_name["Note"].nested_types_by_name["Inner"].full_name == "shop.Note.Inner"


def test_message_indexes_of_confluents_frame() -> None:
    assert message_indexes(frame(7, b"\x00", b"body")) == ((0,), 6)
    assert message_indexes(frame(7, b"\x04\x02\x00", b"")) == ((1, 0), 8)  # zigzag: 2 indexes, 1 and 0
    with pytest.raises(ValueError, match="not Confluent-framed"):
        message_indexes(b"\x01abcd")
    with pytest.raises(ValueError, match="cut off"):
        message_indexes(struct.pack(">bI", 0, 7) + b"\x80")


@pytest.mark.parametrize("form", ["source", "serialized"])
def test_values_decode_in_bulk_to_the_documented_types_and_bad_ones_are_named(form: str) -> None:
    proto = file_descriptor(PROTO, "shop.proto")
    file = classes(proto)
    order_cls = message_factory.GetMessageClass(file.message_types_by_name["Order"])
    note_cls = message_factory.GetMessageClass(file.message_types_by_name["Note"])
    text = PROTO if form == "source" else base64.b64encode(proto.SerializeToString()).decode()
    values: list[bytes | None] = []
    for i in range(4):
        order = order_cls(id=i, status=1, checksum=2**64 - 1 - i, count=2**32 - 1)
        order.items.add(sku=f"s{i}", qty=i)
        order.by_sku["a"].qty = i
        order.at.FromMilliseconds(1_700_000_000_000 + i)
        if i % 2:
            order.discount.value = i
            order.card = "c"
        else:
            order.priority = i
        values.append(frame(3, b"\x00", order.SerializeToString()))
    values += [frame(3, b"\x02\x02", note_cls(text="n").SerializeToString())]  # the file's second message
    values += [frame(3, b"\x00", b"\xff\xff"), None, b"{}", frame(9, b"\x00", b"")]
    schemas = {3: (text, [])}

    def writer(schema_id: int) -> tuple[str, list[str]]:
        if schema_id not in schemas:
            raise RegistryError("no such id", schema_id=schema_id, http_status=404)
        return schemas[schema_id]

    got = ProtobufRows(writer).decode(values)
    assert [i for i, _ in got.bad] == [5, 6, 7, 8]
    assert "not a shop.Order message" in str(got.bad[0][1]) and "not a Protobuf schema" in str(got.bad[3][1])
    orders, notes = got.runs
    assert (orders.indexes, notes.indexes) == ([0, 1, 2, 3], [4])
    schema = orders.table.schema
    assert schema.field("at").type == pa.timestamp("us", tz="UTC")
    assert (schema.field("checksum").type, schema.field("count").type) == (pa.decimal128(20, 0), pa.int64())
    assert (schema.field("status").type, schema.field("discount").type) == (pa.int32(), pa.int64())
    rows = orders.table.to_pylist()
    assert rows[0]["checksum"] == decimal.Decimal(2**64 - 1) and rows[0]["count"] == 2**32 - 1
    assert (rows[0]["card"], rows[1]["card"], rows[0]["discount"], rows[1]["discount"]) == (None, "c", None, 1)
    assert (rows[0]["priority"], rows[1]["priority"]) == (0, None)
    assert rows[2]["items"] == [{"sku": "s2", "qty": 2}] and dict(rows[2]["by_sku"])["a"]["qty"] == 2
    assert rows[3]["at"] == dt.datetime(2023, 11, 14, 22, 13, 20, 3000, tzinfo=dt.timezone.utc)
    assert notes.table.to_pylist() == [{"text": "n"}]


def test_a_recursive_message_and_a_referenced_schema_are_refused_by_name() -> None:
    recursive = 'syntax = "proto3"; message Node { string name = 1; repeated Node children = 2; }'
    schemas: dict[int, tuple[str, list[str]]] = {1: (recursive, []), 2: (PROTO, ["other-value"])}
    got = ProtobufRows(schemas.__getitem__).decode([frame(1, b"\x00", b""), frame(2, b"\x00", b"")])
    assert got.runs == []
    assert "Node contains itself" in str(got.bad[0][1]) and "references other schemas" in str(got.bad[1][1])


def test_proto_source_that_names_an_unknown_type_or_imports_a_file_is_a_schema_error() -> None:
    with pytest.raises(SchemaError, match="'Missing'"):
        file_descriptor('syntax = "proto3"; message A { Missing m = 1; }', "a.proto")
    with pytest.raises(SchemaError, match="references are not read"):
        file_descriptor('syntax = "proto3"; import "other.proto"; message A { int32 x = 1; }', "a.proto")
    with pytest.raises(SchemaError, match="does not parse"):
        file_descriptor("message { nonsense", "a.proto")


def test_a_message_class_converts_messages_and_dicts_in_bulk_and_back() -> None:
    """``ProtobufRecords``: messages and dicts of a class to one table of its documented types
    (the producer's side), a dict the class refuses set aside naming its field, and the table's
    rows back to equal messages (the shim's side), uint32 and uint64 included."""
    from parka.protodecode import ProtobufRecords

    order = message_factory.GetMessageClass(
        classes(file_descriptor(PROTO, "shop/order.proto")).message_types_by_name["Order"]
    )
    records = ProtobufRecords(order)
    assert records.schema.field("checksum").type == pa.decimal128(20, 0)
    assert records.schema.field("count").type == pa.int64()
    first = order(id=1, checksum=2**64 - 1, count=2**32 - 1, card="c", status=1)
    first.items.add(sku="a", qty=2)
    first.by_sku["a"].qty = 3
    first.at.FromMilliseconds(1_700_000_000_123)
    second = {"id": 2, "iban": "NL1", "priority": 0}
    conversion = records.convert([first, second, {"id": "two"}, b"\x08\x01"])
    assert [i for i, _ in conversion.bad] == [2, 3] and conversion.kept == [0, 1]
    assert conversion.bad[0][1].field == "id" and "not a shop.Order message" in str(conversion.bad[1][1])
    table = conversion.table
    assert table.column("checksum").to_pylist() == [decimal.Decimal(2**64 - 1), decimal.Decimal(0)]
    assert table.column("at").to_pylist()[0] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.timezone.utc)
    assert records.messages(table) == [first, order(**second)]
    assert records.messages(table.slice(0, 0)) == []
    with pytest.raises(SchemaError, match="not a Protobuf message class"):
        ProtobufRecords(dict)
