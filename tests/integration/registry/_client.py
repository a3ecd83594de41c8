"""The tests' registry client: confluent-kafka's ``SchemaRegistryClient`` whose registrations take
turns across the test run's processes, with a registration the registry half-completed taken as
done when the schema is there, as ``parka.registry.Registry.register`` takes it.

Apicurio 2.4.2's in-memory H2 storage (the registry the tests start) is not safe for concurrent
registrations: two at once may take one content id, or wait on the sequence table's lock, and one
of them fails with HTTP 500, sometimes after it wrote the subject; the client's retry then gets
409, "already exists" (8 threads registering 10 schemas each: 23 of 80 failed;
``scripts/schema-registry.sh`` now gives H2 a lock timeout of 60 s, after which 3 threads of 40
still lost 3 of 120). The tests' own registrations (the serializers' included) therefore take
turns on a lock in the run's folder; parka's, inside the producers under test, do not."""

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
