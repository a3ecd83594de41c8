"""The tests' registry client: confluent-kafka's ``SchemaRegistryClient`` whose registrations take
turns across the test run's processes, with a registration the registry half-completed taken as
done when the schema is there, as ``parka.registry.Registry.register`` takes it.

Apicurio 2.4.2's in-memory H2 storage (the registry the tests start) failed registrations racing
each other with HTTP 500, some after writing the subject, so that the client's retry got 409,
"already exists", or deadlocked until its transactions timed out after 60 s;
``scripts/schema-registry.sh`` now has it serve one request at a time. The tests' own
registrations (the serializers' included) take turns on a lock in the run's folder all the same,
and a 409 whose schema the subject holds is taken as done, as parka's own client takes it."""

from __future__ import annotations

import fcntl
from typing import Any

from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from .._servers import run_dir


class TestRegistryClient(SchemaRegistryClient):
    __test__ = False  # not a test class for pytest

    def register_schema_full_response(self, subject_name: str, schema: Any, *args: Any, **kwargs: Any) -> Any:
        with open(run_dir() / "registry-writes.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                return super().register_schema_full_response(subject_name, schema, *args, **kwargs)
            except SchemaRegistryError as exc:
                if exc.http_status_code != 409:
                    raise
                try:
                    return self.lookup_schema(subject_name, schema)
                except SchemaRegistryError:
                    raise exc from None
