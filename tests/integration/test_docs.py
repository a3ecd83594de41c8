"""The README's and the docs pages' code blocks run as written (:mod:`._docs`): each page in one
test, its blocks in order. The pages with Spark blocks run in the Spark session's worker
(``tests/integration/spark/test_docs_spark.py``)."""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

from ._docs import (
    CODE_LANGUAGES,
    OUTPUT_LANGUAGES,
    PRODUCING_PAGES,
    REPO,
    SPARK_PAGES,
    count_code_blocks,
    languages,
    name,
    pages,
    run_page,
)
from ._ingest_util import create_topic


def test_every_block_is_code_or_output() -> None:
    """A block in another language would be neither run nor marked: name it here first."""
    known = (*CODE_LANGUAGES, *OUTPUT_LANGUAGES)
    unknown = {f"{name(p)}: {lang or '(none)'}" for p in pages() for lang in languages(p) if lang not in known}
    assert not unknown, f"fenced blocks in a language the docs tests do not know: {sorted(unknown)}"


def test_spark_pages_exist() -> None:
    assert all((REPO / page).is_file() for page in SPARK_PAGES)


@pytest.mark.parametrize("path", [p for p in pages() if count_code_blocks(p) and name(p) not in SPARK_PAGES], ids=name)
def test_page_runs(
    path: Path, bootstrap: str, admin: AdminClient, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    text, servers, env = path.read_text(), {}, {}
    if "http://catalog:8181" in text:
        servers["http://catalog:8181"] = request.getfixturevalue("iceberg_rest_url")
    if "http://127.0.0.1:19180" in text:  # s3proxy's default address; its keys in the usual variables
        options = request.getfixturevalue("s3proxy").storage_options
        servers["http://127.0.0.1:19180"] = options["aws_endpoint_url"]
        env.update(
            AWS_ACCESS_KEY_ID=options["aws_access_key_id"], AWS_SECRET_ACCESS_KEY=options["aws_secret_access_key"]
        )
    if "http://127.0.0.1:8081/apis/ccompat/v7" in text:  # the schema registry's default address
        servers["http://127.0.0.1:8081/apis/ccompat/v7"] = request.getfixturevalue("registry_url")
    make_topic = functools.partial(create_topic, admin, partitions=2)
    if "broker:9094" in text:  # the SASL_SSL broker: its address, CA, user and password
        secured = request.getfixturevalue("secured_broker")
        servers["broker:9094"] = secured.bootstrap
        servers["/etc/kafka/ca.pem"] = secured.conf["ssl.ca.location"]
        servers["sasl.username=parka"] = f"sasl.username={secured.conf['sasl.username']}"
        env["KAFKA_PASSWORD"] = secured.password
        make_topic = functools.partial(create_topic, AdminClient(secured.conf))
    page = run_page(
        path,
        bootstrap=bootstrap,
        tmp=tmp_path,
        make_topic=make_topic,
        seeded=name(path) not in PRODUCING_PAGES and "broker:9094" not in text,
        servers=servers,
        env=env,
    )
    # every code block either ran or was skipped by a marker with its reason
    assert len(page.ran) + len(page.skipped) == count_code_blocks(path), (page.ran, page.skipped)
    # a page whose text block shows what its last block prints
    if name(path) == "docs/upserts.md":
        assert "[{'id': 1, 'email': 'ann@example.org', '__op': 'u', '__source_lsn': 12}]" in page.printed[-1]
