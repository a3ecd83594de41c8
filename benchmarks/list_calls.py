"""The LIST requests a running ``parka ingest`` makes of an object store, as its table ages.

A counting proxy (:class:`CountingProxy`, in this process) stands between ``parka ingest`` and
s3proxy (``scripts/s3proxy.sh``, S3's API on the local disk) and records every request: its
method, whether it is a LIST (``GET /<bucket>?list-type=2``) and of which prefix, and for a LIST
the keys the answer holds (``<KeyCount>``). A commit is a PUT of ``_delta_log/<version>.json``,
so the proxy also knows the table's version when each request passed.

The run: a topic of ``--partitions`` partitions gets one small segment per partition every
``--segment-ms`` (a ``ParquetProducer``, 50 rows each) for as long as ``parka ingest TOPIC
s3://BUCKET/<run>/t -l --allowed-latency`` takes to reach ``--commits`` table versions, with the
daemon's defaults otherwise, except ``--vacuum-every 0``: VACUUM lists the whole table by design
(delta-rs' VACUUM, every ``--vacuum-every``) and is left out so that what is counted is the
orphan cleanup's and the log reads' LISTs. Each window of ``--window`` versions reports the LIST
requests and the keys they listed, per commit, split into the log's (``_delta_log/``) and the
table's, and the data files on the store at its end (counted in s3proxy's folder).

The table's files grow all run long (every segment a file, compaction's outputs, the files it
compacted away, which only VACUUM deletes), so a cleanup that lists the table lists more keys
at every window; one that does not, the same. The table's log and deleted-file retention are set
to ``--retention-s`` (60) after its first commit, so that the log, which a cleanup after each
checkpoint keeps to the retention, reaches its steady size within the run (the daemon's default
for its tables is an hour). Writes ``results.json`` and ``report.md``::

    scripts/kafka-local.sh up && scripts/s3proxy.sh up
    python -m benchmarks.list_calls --bootstrap localhost:9092 --commits 600 --out DIR
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import re
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pyarrow as pa
from confluent_kafka.admin import AdminClient, NewTopic
from deltalake import DeltaTable
from parka.producer import ParquetProducer

__all__ = ["CountingProxy", "Request", "main"]

REPO = Path(__file__).resolve().parents[1]
S3PROXY = REPO / "scripts" / "s3proxy.sh"
_COMMIT = re.compile(r"/_delta_log/(\d{20})\.json$")
_KEY_COUNT = re.compile(rb"<KeyCount>(\d+)</KeyCount>")
# hop-by-hop headers (RFC 9110): not forwarded
_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


@dataclass(frozen=True)
class Request:
    """One request that passed the proxy."""

    at: float  # seconds since the proxy started
    method: str
    list_prefix: str | None  # a LIST's prefix ("" for the whole bucket); None: not a LIST
    keys: int  # a LIST answer's <KeyCount>
    version: int  # the table's latest version PUT before this request (-1: none yet)


class CountingProxy:
    """An HTTP proxy on loopback that forwards every request to ``upstream`` (host, port) as it
    came (the Host header included, so that S3 signatures still match) and records it."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.requests: list[Request] = []
        self.version = -1
        self._lock = threading.Lock()
        self._started = time.monotonic()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP}
                conn = http.client.HTTPConnection(*proxy.upstream, timeout=120)
                try:
                    conn.request(self.command, self.path, body=body, headers=headers)
                    answer = conn.getresponse()
                    data = answer.read()
                finally:
                    conn.close()
                proxy.record(self.command, self.path, answer.status, data)
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client went
                        self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _forward

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, name="counting-proxy", daemon=True).start()

    def record(self, method: str, path: str, status: int, data: bytes) -> None:
        url = urlsplit(path)
        query = parse_qs(url.query, keep_blank_values=True)
        is_list = method == "GET" and "list-type" in query
        prefix = query.get("prefix", [""])[0] if is_list else None
        keys = 0
        if is_list:
            found = _KEY_COUNT.search(data)
            keys = int(found.group(1)) if found else 0
        with self._lock:
            committed = _COMMIT.search(url.path) if method == "PUT" and status < 300 else None
            if committed is not None:
                self.version = max(self.version, int(committed.group(1)))
            self.requests.append(Request(time.monotonic() - self._started, method, prefix, keys, self.version))

    def close(self) -> None:
        self._server.shutdown()


def s3proxy_env() -> dict[str, str]:
    """``scripts/s3proxy.sh env``: the storage options (endpoint, keys...) as a dict."""
    out = subprocess.run([str(S3PROXY), "env"], check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


def produce(bootstrap: str, topic: str, partitions: int, every_s: float, stop: threading.Event) -> int:
    """One 50-row segment per partition every ``every_s`` until ``stop``; returns the rows produced."""
    producer = ParquetProducer(
        {"bootstrap.servers": bootstrap, "columnar.encoding": "parquet", "columnar.batch.records": 50}
    )
    producer.set_schema(topic, pa.schema([("id", pa.int64(), False), ("name", pa.string())]))
    n = 0
    while not stop.is_set():
        began = time.monotonic()
        for partition in range(partitions):
            for _ in range(50):
                producer.produce(topic, {"id": n, "name": f"row {n}"}, partition=partition)
                n += 1
        producer.flush(30)
        stop.wait(max(0.0, every_s - (time.monotonic() - began)))
    assert producer.flush(60) == 0
    return n


def windows(requests: list[Request], size: int, last: int) -> Iterator[dict[str, Any]]:
    """Per ``size`` versions: LIST requests and listed keys per commit, the log's and the table's."""
    for start in range(0, last - size + 1, size):
        inside = [r for r in requests if start <= r.version < start + size and r.list_prefix is not None]
        log = [r for r in inside if "_delta_log/" in (r.list_prefix or "")]
        table = [r for r in inside if "_delta_log/" not in (r.list_prefix or "")]
        yield {
            "versions": [start, start + size],
            "log_lists_per_commit": round(len(log) / size, 3),
            "log_keys_per_commit": round(sum(r.keys for r in log) / size, 1),
            "table_lists_per_commit": round(len(table) / size, 3),
            "table_keys_per_commit": round(sum(r.keys for r in table) / size, 1),
        }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bootstrap", default="localhost:9092")
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--segment-ms", type=float, default=100.0)
    parser.add_argument("--allowed-latency", type=float, default=0.2, help="parka ingest -l (seconds)")
    parser.add_argument("--commits", type=int, default=600, help="table versions to run to")
    parser.add_argument("--window", type=int, default=100, help="versions per reported window")
    parser.add_argument("--python", default=sys.executable, help="the interpreter whose parka runs")
    parser.add_argument("--ingest-arg", action="append", default=[], help="one more argument of parka ingest")
    parser.add_argument(
        "--retention-s",
        type=int,
        default=60,
        help="the table's log and deleted-file retention, set after its first commit (0: parka's default)",
    )
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)

    subprocess.run([str(S3PROXY), "up"], check=True)
    options = s3proxy_env()
    direct = dict(options)  # this process's own requests bypass the proxy
    endpoint = urlsplit(options["aws_endpoint_url"])
    proxy = CountingProxy((endpoint.hostname or "127.0.0.1", endpoint.port or 80))
    options["aws_endpoint_url"] = f"http://127.0.0.1:{proxy.port}"
    bucket = os.environ.get("PARKA_S3PROXY_BUCKET", "lake")
    run = f"list-calls-{uuid.uuid4().hex[:8]}"
    topic, table = run, f"s3://{bucket}/{run}/t"
    _create_topic(args.bootstrap, topic, args.partitions)
    stop = threading.Event()
    produced: list[int] = []
    producer = threading.Thread(
        target=lambda: produced.append(produce(args.bootstrap, topic, args.partitions, args.segment_ms / 1000, stop))
    )
    producer.start()
    command = [args.python, "-m", "parka.cli", "ingest", topic, table, "-k", args.bootstrap]
    command += ["-l", str(args.allowed_latency), "--vacuum-every", "0", "-q", *args.ingest_arg]
    command += [arg for key, value in options.items() for arg in ("--storage-option", f"{key}={value}")]
    log_path = args.out / "ingest.log"
    started = time.monotonic()
    with open(log_path, "wb") as log:
        daemon = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=args.out)
        try:
            retention_set = not args.retention_s
            while proxy.version < args.commits:
                if daemon.poll() is not None:
                    raise SystemExit(f"parka ingest exited {daemon.returncode}: see {log_path}")
                if not retention_set and proxy.version >= 1:
                    # past the retention, the log cleanup deletes as much as the commits add
                    interval = f"interval {args.retention_s} seconds"
                    DeltaTable(table, storage_options=direct).alter.set_table_properties(
                        {"delta.logRetentionDuration": interval, "delta.deletedFileRetentionDuration": interval}
                    )
                    retention_set = True
                time.sleep(0.5)
        finally:
            stop.set()
            producer.join()
            daemon.terminate()
            daemon.wait(120)
    wall = time.monotonic() - started
    data_dir = Path(
        subprocess.run([str(S3PROXY), "data-dir"], check=True, capture_output=True, text=True).stdout.strip()
    )
    files = sum(1 for p in (data_dir / bucket / run / "t").rglob("*.parquet"))
    proxy.close()
    rows = list(windows(proxy.requests, args.window, args.commits))
    results = {
        "command": " ".join(["python -m benchmarks.list_calls", *(argv if argv is not None else sys.argv[1:])]),
        "python": args.python,
        # where the daemon's parka came from (run where it ran: a checkout's folder would come first)
        "parka_lake": subprocess.run(
            [args.python, "-c", "import parka.lake; print(parka.lake.__file__)"],
            capture_output=True,
            text=True,
            cwd=args.out,
        ).stdout.strip(),
        "commits": args.commits,
        "wall_s": round(wall, 1),
        "rows_produced": produced[0] if produced else None,
        "parquet_files_on_the_store_at_the_end": files,
        "requests": len(proxy.requests),
        "windows": rows,
        "raw": [asdict(r) for r in proxy.requests if r.list_prefix is not None],
    }
    (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    lines = [
        f"# LIST requests of `parka ingest` as its table ages ({args.commits} commits, {wall:.0f} s)",
        "",
        f"`{results['command']}`; parka.lake from `{results['parka_lake']}`; {files} Parquet files on the store "
        "at the end.",
        "Per commit, means over each window of versions (LIST requests, and the keys their answers held):",
        "",
        "| versions | log LISTs | log keys | table LISTs | table keys |",
        "|---|---|---|---|---|",
    ]
    lines += [
        f"| {w['versions'][0]}-{w['versions'][1]} | {w['log_lists_per_commit']} | {w['log_keys_per_commit']} "
        f"| {w['table_lists_per_commit']} | {w['table_keys_per_commit']} |"
        for w in rows
    ]
    (args.out / "report.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(timeout=60)


if __name__ == "__main__":
    raise SystemExit(main())
