"""JVM classes through py4j by their full names."""

from __future__ import annotations

from typing import Any


def jvm_class(jvm: Any, name: str) -> Any:
    """The class ``name`` (fully qualified; ``Outer$Inner`` for a nested one) of the JVM behind
    ``jvm`` (a SparkContext's ``_jvm``), found in one call to it. py4j's ``jvm.org.apache.X``
    asks the JVM once per dot, and the JVM looks for each prefix as a class, in every jar of its
    class path, before it answers "a package"."""
    return getattr(jvm, name)
