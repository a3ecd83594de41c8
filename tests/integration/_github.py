"""GitHub-events-like records over three schema versions, for the schema-evolution tests.

v1: an ``actor`` and a ``repo`` struct, ``commits`` (a list of structs holding an ``author``
struct), ``labels`` (a map), ``tags`` (a list), a UTC timestamp. v2 adds ``actor.site_admin``
(a field in a struct) and ``commits.element.author.email`` (a field in a list of structs). v3
adds the ``org`` column; its ``wide`` variant also widens ``id`` from int32 to int64.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pyarrow as pa

T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def schema(version: int, *, wide: bool = False) -> pa.Schema:
    actor = [("id", pa.int64()), ("login", pa.string())] + ([("site_admin", pa.bool_())] if version >= 2 else [])
    author = [("name", pa.string())] + ([("email", pa.string())] if version >= 2 else [])
    fields: list[Any] = [
        pa.field("id", pa.int64() if wide else pa.int32(), nullable=False),
        ("type", pa.string()),
        ("actor", pa.struct(actor)),
        ("repo", pa.struct([("id", pa.int64()), ("name", pa.string())])),
        ("commits", pa.list_(pa.struct([("sha", pa.string()), ("author", pa.struct(author))]))),
        ("labels", pa.map_(pa.string(), pa.string())),
        ("tags", pa.list_(pa.string())),
        ("created_at", pa.timestamp("us", tz="UTC")),
    ]
    if version >= 3:
        fields.append(("org", pa.struct([("id", pa.int64()), ("login", pa.string())])))
    return pa.schema(fields)


def records(version: int, start: int, n: int, *, wide: bool = False) -> list[dict[str, Any]]:
    """Records ``start..start+n`` of ``version`` (``wide``: ids beyond int32)."""
    out = []
    for i in range(start, start + n):
        actor: dict[str, Any] = {"id": 1000 + i % 97, "login": f"user{i % 97}"}
        if version >= 2:
            actor["site_admin"] = i % 5 == 0
        commits = []
        for j in range(i % 3):
            author: dict[str, Any] = {"name": f"dev{(i + j) % 11}"}
            if version >= 2:
                author["email"] = f"dev{(i + j) % 11}@example.com"
            commits.append({"sha": f"{i:08x}{j}", "author": author})
        rec: dict[str, Any] = {
            "id": (2**33 + i) if wide else i,
            "type": ("PushEvent", "IssuesEvent", "WatchEvent")[i % 3],
            "actor": actor,
            "repo": {"id": i % 13, "name": f"org/repo{i % 13}"},
            "commits": commits,
            "labels": {"prio": f"p{i % 3}", "area": "core"} if i % 4 else {},
            "tags": [f"t{i % 7}"] * (i % 3),
            "created_at": T0 + timedelta(seconds=i),
        }
        if version >= 3:
            rec["org"] = {"id": 7, "login": "acme"} if i % 2 else None
        out.append(rec)
    return out


def normalized(table: pa.Table, target: pa.Schema) -> list[dict[str, Any]]:
    """``table``'s rows in ``target``'s columns and types, by id: reader-independent (maps as
    key-value pairs, strings, timestamps in UTC), missing nested fields null."""
    columns = table.select(target.names).to_pylist()
    for row in columns:
        for name, value in list(row.items()):
            if isinstance(value, dict) and pa.types.is_map(target.field(name).type):
                row[name] = list(value.items())  # Spark hands maps out as dicts
    return pa.Table.from_pylist(columns, schema=target).sort_by("id").to_pylist()


def expected(recs: list[dict[str, Any]], target: pa.Schema) -> list[dict[str, Any]]:
    """What a table of ``target``'s schema holding ``recs`` reads back: absent fields null."""
    return pa.Table.from_pylist(recs, schema=target).sort_by("id").to_pylist()
