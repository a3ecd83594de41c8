"""Where an Iceberg catalog is: pyiceberg's configuration with parka's options over it, and the
embedded default (:func:`catalog_properties`); parka's S3 storage options as pyiceberg's FileIO
properties (:data:`S3_PROPERTIES`). No pyiceberg catalog is opened here."""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlparse

from pyiceberg.utils.config import Config

from parka.errors import ConfigError

__all__ = ["S3_PROPERTIES", "catalog_properties"]

# parka's S3 storage options (object_store's keys) -> pyiceberg's FileIO properties, so one set of
# credentials serves the data files parka writes and the metadata pyiceberg writes
S3_PROPERTIES = {
    "aws_access_key_id": "s3.access-key-id",
    "aws_secret_access_key": "s3.secret-access-key",
    "aws_session_token": "s3.session-token",
    "aws_region": "s3.region",
    "aws_endpoint_url": "s3.endpoint",
    "aws_endpoint": "s3.endpoint",
}


def catalog_properties(name: str, options: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties ``name`` loads with: pyiceberg's configuration (``.pyiceberg.yaml``,
    ``PYICEBERG_CATALOG__<NAME>__<KEY>``) under ``options``. Without a ``uri``, ``type`` or
    ``py-catalog-impl`` but with a ``warehouse``, the embedded SQL catalog
    (``sqlite:///<warehouse>/catalog.db``) for a local warehouse.

    Raises:
        ConfigError: nothing says where the catalog is.
    """
    found = Config().get_catalog_config(name) or {}
    merged = {str(k): str(v) for k, v in found.items() if not isinstance(v, dict)}
    merged.update({k: str(v) for k, v in (options or {}).items()})
    if not any(k in merged for k in ("uri", "type", "py-catalog-impl")):
        warehouse = merged.get("warehouse")
        if warehouse is None:
            raise ConfigError(
                "--catalog",
                name,
                "a catalog configured in .pyiceberg.yaml or PYICEBERG_CATALOG__<NAME>__*, or given "
                "--catalog-option uri=... (a REST or SQL catalog), or --catalog-option warehouse=DIR "
                "(the embedded SQLite catalog)",
                reason="no configuration for it",
            )
        parsed = urlparse(warehouse)
        if parsed.scheme not in ("", "file"):
            raise ConfigError(
                "--catalog-option",
                f"warehouse={warehouse}",
                "a local directory for the embedded catalog, or a uri=... of a catalog server",
                reason="the embedded SQLite catalog needs a local warehouse",
            )
        path = os.path.abspath(parsed.path if parsed.scheme == "file" else warehouse)
        os.makedirs(path, exist_ok=True)
        merged.update(type="sql", uri=f"sqlite:///{os.path.join(path, 'catalog.db')}", warehouse=f"file://{path}")
    return merged
