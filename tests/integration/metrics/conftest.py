"""The metrics tests need nothing beyond the root integration fixtures (``bootstrap``,
``new_topic``): each starts its own ``parka ingest`` process with ``--metrics-port 0``."""
