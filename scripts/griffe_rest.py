"""A griffe extension for parka's API reference (mkdocs.yml, the python handler's ``extensions``).

parka's docstrings use two pieces of reStructuredText that Markdown would garble: roles
(``:class:`ParquetProducer```, ``:func:`~parka.segment.encode```) and literal blocks (a paragraph
ending in ``::`` followed by an indented block: the exception trees, the usage sketches). This
turns roles into code spans and literal blocks into fenced code blocks, before the Google-style
sections (``Raises:``) are parsed. The source files are not touched.
"""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:py:)?(?:class|func|meth|mod|attr|exc|data|obj|const|ref):`~?\.?([^`]+)`")


def rest_to_markdown(text: str) -> str:
    """Roles to code spans, ``::`` literal blocks to fenced code blocks; everything else as it was."""
    text = _ROLE.sub(lambda m: f"`{m.group(1)}`", text)
    lines = text.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.rstrip().endswith("::"):
            out.append(line)
            i += 1
            continue
        head = line.rstrip()[:-2].rstrip()
        if head:
            out.append(head + ":")  # "Errors::" reads "Errors:"
        i += 1
        base = len(line) - len(line.lstrip())
        block: list[str] = []
        while i < len(lines) and (not lines[i].strip() or len(lines[i]) - len(lines[i].lstrip()) > base):
            block.append(lines[i])
            i += 1
        while block and not block[-1].strip():
            block.pop()
        while block and not block[0].strip():
            block.pop(0)
        if not block:  # a "::" with nothing indented after it: keep the text
            continue
        indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
        pad = " " * base
        out += ["", pad + "```text", *((pad + b[indent:]) if b.strip() else "" for b in block), pad + "```", ""]
    return "\n".join(out)


class RestDocstrings(griffe.Extension):
    """Rewrite each docstring's reST roles and literal blocks as Markdown when griffe reads it."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = rest_to_markdown(obj.docstring.value)
