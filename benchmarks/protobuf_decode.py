"""Confluent-framed Protobuf values to one Arrow table: two existing converters against the plain
per-record way, CPU per row, measured side by side in one run. The measurement row topics'
Protobuf decoding is chosen by (parka does not decode Protobuf yet).

Two message types, those of :data:`PROTO` (the file shown for reading; its descriptor is built
field by field by :func:`message_classes`, so no ``protoc`` is needed): ``Request`` (flat: ten
scalar fields, web_requests' shape) and ``Event`` (nested: a message field, a repeated message, a
``map<string, string>``, a ``google.protobuf.Timestamp``, an ``Int64Value`` wrapper, a ``oneof``,
an enum and an unsigned 64-bit field). ``--rows`` seeded messages of each are serialized and framed
as Confluent's serializer frames them (magic byte 0, the schema id in 4 bytes, then the message
indexes: a single 0 byte for a file's first message), then cut into batches of ``--batch`` values.
Each repeat decodes every batch with each way in turn, its CPU taken with ``time.process_time``
(every thread of the process):

* **ptars** (Rust, ``HandlerPool(...).get_for_message(...)``, ``list_to_record_batch``
  with ``confluent_wire_policy="protobuf"``: it reads the frame itself);
* **protobuf + protarrow**: each value's frame cut off and the rest parsed by ``protobuf``
  (its upb backend), then ``protarrow.messages_to_record_batch`` over the parsed messages;
* **protobuf + from_pylist**: each value parsed, ``json_format.MessageToDict`` with the proto's
  field names, then ``pyarrow.Table.from_pylist``: the plain per-record way (its types are
  those Arrow infers from JSON-style values: 64-bit integers and timestamps come as strings).

The two converters' tables are compared value by value (``to_pylist``) on the first batch, and
the run stops when they differ. The figure per way is the median over repeats of µs per row; the
ratios are medians of the per-repeat ratios (paired: the same repeat, the same batches)::

    python -m benchmarks.protobuf_decode --rows 100000 --batch 10000 --repeats 7 --out DIR
"""

from __future__ import annotations

import argparse
import random
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

from .report import save_run

PROTO = """
syntax = "proto3";
package parka.bench;

import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";

message Request {
  int64 ts_ms = 1;
  string method = 2;
  string path = 3;
  int32 status = 4;
  int64 bytes = 5;
  double latency_ms = 6;
  string user_agent = 7;
  string client_ip = 8;
  bool cached = 9;
  string region = 10;
}

message Actor {
  int64 id = 1;
  string login = 2;
}

message Commit {
  string sha = 1;
  string message = 2;
  bool distinct = 3;
}

enum Kind {
  KIND_UNSPECIFIED = 0;
  PUSH = 1;
  ISSUE = 2;
}

message Event {
  string id = 1;
  Kind kind = 2;
  Actor actor = 3;
  repeated Commit commits = 4;
  map<string, string> labels = 5;
  google.protobuf.Timestamp created_at = 6;
  google.protobuf.Int64Value size = 7;
  oneof target {
    string repo = 8;
    int64 org_id = 9;
  }
  uint64 checksum = 10;
}
"""

SCHEMA_ID = 7
FRAME = b"\x00" + struct.pack(">I", SCHEMA_ID) + b"\x00"  # magic, schema id, message indexes [0]
METHODS = ["GET", "POST", "PUT", "DELETE"]
REGIONS = ["eu-west-1", "us-east-1", "ap-south-1"]


def message_classes() -> Any:
    """:data:`PROTO`'s messages as classes of protobuf's default pool, from a
    ``FileDescriptorProto`` built here field by field (the same file ``protoc`` would describe);
    a namespace with ``Request`` and ``Event``."""
    from types import SimpleNamespace

    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2, wrappers_pb2

    fdp = descriptor_pb2.FieldDescriptorProto
    optional, repeated = fdp.LABEL_OPTIONAL, fdp.LABEL_REPEATED
    f = descriptor_pb2.FileDescriptorProto(name="bench_events.proto", package="parka.bench", syntax="proto3")
    f.dependency.extend([timestamp_pb2.DESCRIPTOR.name, wrappers_pb2.DESCRIPTOR.name])

    def message(name: str, *fields: tuple[str, int, int, str, int]) -> Any:
        m = f.message_type.add(name=name)
        for field_name, number, kind, type_name, label in fields:
            field = m.field.add(name=field_name, number=number, type=kind, label=label)
            if type_name:  # a scalar's must stay unset, not empty
                field.type_name = type_name
        return m

    message(
        "Request",
        ("ts_ms", 1, fdp.TYPE_INT64, "", optional), ("method", 2, fdp.TYPE_STRING, "", optional),
        ("path", 3, fdp.TYPE_STRING, "", optional), ("status", 4, fdp.TYPE_INT32, "", optional),
        ("bytes", 5, fdp.TYPE_INT64, "", optional), ("latency_ms", 6, fdp.TYPE_DOUBLE, "", optional),
        ("user_agent", 7, fdp.TYPE_STRING, "", optional), ("client_ip", 8, fdp.TYPE_STRING, "", optional),
        ("cached", 9, fdp.TYPE_BOOL, "", optional), ("region", 10, fdp.TYPE_STRING, "", optional),
    )  # fmt: skip
    message("Actor", ("id", 1, fdp.TYPE_INT64, "", optional), ("login", 2, fdp.TYPE_STRING, "", optional))
    message(
        "Commit",
        ("sha", 1, fdp.TYPE_STRING, "", optional), ("message", 2, fdp.TYPE_STRING, "", optional),
        ("distinct", 3, fdp.TYPE_BOOL, "", optional),
    )  # fmt: skip
    kind = f.enum_type.add(name="Kind")
    for i, value in enumerate(("KIND_UNSPECIFIED", "PUSH", "ISSUE")):
        kind.value.add(name=value, number=i)
    event = message(
        "Event",
        ("id", 1, fdp.TYPE_STRING, "", optional), ("kind", 2, fdp.TYPE_ENUM, ".parka.bench.Kind", optional),
        ("actor", 3, fdp.TYPE_MESSAGE, ".parka.bench.Actor", optional),
        ("commits", 4, fdp.TYPE_MESSAGE, ".parka.bench.Commit", repeated),
        ("labels", 5, fdp.TYPE_MESSAGE, ".parka.bench.Event.LabelsEntry", repeated),
        ("created_at", 6, fdp.TYPE_MESSAGE, ".google.protobuf.Timestamp", optional),
        ("size", 7, fdp.TYPE_MESSAGE, ".google.protobuf.Int64Value", optional),
        ("repo", 8, fdp.TYPE_STRING, "", optional), ("org_id", 9, fdp.TYPE_INT64, "", optional),
        ("checksum", 10, fdp.TYPE_UINT64, "", optional),
    )  # fmt: skip
    entry = event.nested_type.add(name="LabelsEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=fdp.TYPE_STRING, label=optional)
    entry.field.add(name="value", number=2, type=fdp.TYPE_STRING, label=optional)
    event.oneof_decl.add(name="target")
    for field in event.field:
        if field.name in ("repo", "org_id"):
            field.oneof_index = 0
    pool = descriptor_pool.Default()
    pool.Add(f)
    return SimpleNamespace(
        **{
            name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"parka.bench.{name}"))
            for name in ("Request", "Event")
        }
    )


def requests(pb: Any, n: int, rng: random.Random) -> list[bytes]:
    out = []
    for i in range(n):
        m = pb.Request(
            ts_ms=1_700_000_000_000 + i * 7,
            method=rng.choice(METHODS),
            path=f"/api/v1/items/{rng.randrange(10_000)}",
            status=rng.choice([200, 200, 200, 404, 500]),
            bytes=rng.randrange(100, 100_000),
            latency_ms=rng.random() * 250,
            user_agent=f"agent/{rng.randrange(40)}",
            client_ip=f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(256)}",
            cached=rng.random() < 0.3,
            region=rng.choice(REGIONS),
        )
        out.append(FRAME + m.SerializeToString())
    return out


def events(pb: Any, n: int, rng: random.Random) -> list[bytes]:
    out = []
    for i in range(n):
        m = pb.Event(id=f"e{i}", kind=rng.choice([1, 2]), checksum=rng.getrandbits(64))
        m.actor.id = rng.randrange(50_000)
        m.actor.login = f"user{m.actor.id}"
        for c in range(rng.randrange(0, 4)):
            m.commits.add(sha=f"{rng.getrandbits(64):016x}", message=f"change {c} of {i}", distinct=rng.random() < 0.9)
        for k in range(rng.randrange(0, 3)):
            m.labels[f"l{k}"] = f"v{rng.randrange(100)}"
        m.created_at.seconds, m.created_at.nanos = 1_700_000_000 + i, rng.randrange(1_000_000) * 1000
        if rng.random() < 0.8:
            m.size.value = rng.randrange(1, 10_000)
        if rng.random() < 0.5:
            m.repo = f"org/repo{rng.randrange(20_000)}"
        else:
            m.org_id = rng.randrange(1_000)
        out.append(FRAME + m.SerializeToString())
    return out


def ways(cls: Any) -> dict[str, Callable[[list[bytes]], Any]]:
    import protarrow
    from google.protobuf import json_format
    from ptars import HandlerPool, PtarsConfig

    handler = HandlerPool([cls.DESCRIPTOR.file], PtarsConfig(confluent_wire_policy="protobuf")).get_for_message(
        cls.DESCRIPTOR
    )
    cut = len(FRAME)

    def parsed(values: list[bytes]) -> list[Any]:
        return [cls.FromString(v[cut:]) for v in values]

    return {
        "ptars": lambda values: handler.list_to_record_batch(values),
        "protobuf + protarrow": lambda values: protarrow.messages_to_record_batch(parsed(values), cls),
        "protobuf + from_pylist": lambda values: pa.Table.from_pylist(
            [json_format.MessageToDict(m, preserving_proto_field_name=True) for m in parsed(values)]
        ),
    }


def same_values(a: Any, b: Any) -> str | None:
    """Why the two converters' tables differ, or None (a map's entries compared in any order)."""
    if a.num_rows != b.num_rows:
        return f"{a.num_rows} rows against {b.num_rows}"
    if a.schema.names != b.schema.names:
        return f"columns {a.schema.names} against {b.schema.names}"
    for name in a.schema.names:
        x, y = a.column(name).to_pylist(), b.column(name).to_pylist()
        if pa.types.is_map(a.schema.field(name).type):  # a Protobuf map has no order
            x, y = ([sorted(v) if v is not None else v for v in col] for col in (x, y))
        if x != y:
            first = next(i for i, (p, q) in enumerate(zip(x, y, strict=True)) if p != q)
            return f"column {name!r} differs first at row {first}: {x[first]!r} against {y[first]!r}"
    return None


def measure(batches: list[list[bytes]], fns: dict[str, Callable[[list[bytes]], Any]], repeats: int) -> dict[str, Any]:
    rows = sum(len(b) for b in batches)
    per: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.process_time()
            for batch in batches:
                fn(batch)
            per[name].append((time.process_time() - start) / rows * 1e6)
    base = "protobuf + from_pylist"
    return {
        "us_per_row": {name: statistics.median(v) for name, v in per.items()},
        "runs_us_per_row": per,
        f"ratio_to_{base}": {
            name: statistics.median(a / b for a, b in zip(v, per[base], strict=True)) for name, v in per.items()
        },
    }


def render(results: dict[str, Any]) -> str:
    lines = [
        "# Confluent-framed Protobuf to Arrow: CPU per row",
        "",
        f"`{results['command']}`",
        "",
        f"{results['rows']:,} messages per type in batches of {results['batch']:,}, {results['repeats']} repeats; "
        "statistic: the median over repeats of µs of CPU per row, and the median of the per-repeat ratios "
        "to protobuf + from_pylist (the same repeat, the same batches).",
        "",
        "| message | way | µs/row | / protobuf + from_pylist |",
        "|---|---|---|---|",
    ]
    for kind, r in results["types"].items():
        for name, us in r["us_per_row"].items():
            lines.append(f"| {kind} | {name} | {us:.2f} | {r['ratio_to_protobuf + from_pylist'][name]:.3f} |")
    lines += ["", "ptars' and protarrow's tables were equal, value by value, on each type's first batch.", ""]
    for kind, r in results["types"].items():
        lines += [f"{kind}, ptars' schema:", "", "```", r["schema"], "```", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=10_000)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--out", required=True)
    args = p.parse_args(argv)
    results: dict[str, Any] = {
        "command": "python -m benchmarks.protobuf_decode " + " ".join(argv if argv is not None else sys.argv[1:]),
        "rows": args.rows,
        "batch": args.batch,
        "repeats": args.repeats,
        "types": {},
    }
    import google.protobuf
    import protarrow
    from ptars import __version__ as ptars_version

    results["versions"] = {
        "protobuf": google.protobuf.__version__,
        "ptars": ptars_version,
        "protarrow": getattr(protarrow, "__version__", "?"),
        "pyarrow": pa.__version__,
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    pb = message_classes()
    for kind, cls, make in (("flat (Request)", pb.Request, requests), ("nested (Event)", pb.Event, events)):
        values = make(pb, args.rows, random.Random(args.seed))
        batches = [values[i : i + args.batch] for i in range(0, len(values), args.batch)]
        fns = ways(cls)
        first_ptars = pa.Table.from_batches([fns["ptars"](batches[0])])
        first_protarrow = pa.Table.from_batches([fns["protobuf + protarrow"](batches[0])])
        why = same_values(first_ptars, first_protarrow)
        if why is not None:
            print(f"{kind}: ptars and protarrow differ: {why}", file=sys.stderr)
            return 1
        results["types"][kind] = {**measure(batches, fns, args.repeats), "schema": str(first_ptars.schema)}
        print(f"{kind}: {results['types'][kind]['us_per_row']}", file=sys.stderr)
    save_run(args.out, results, render(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
