"""The generated part of docs/configuration.md: a table of each ``parka`` command's flags, made from
the :class:`parka.ops.setting.Setting` declarations its parser is built from (the same text
``--help`` shows), between the lines ``<!-- flags: COMMAND -->`` and ``<!-- /flags -->``.

    python scripts/config_reference.py           # rewrite the tables in docs/configuration.md
    python scripts/config_reference.py --check   # exit 1 when they differ from the declarations

tests/unit/test_configuration_docs.py runs the check, so a changed flag, default or variable fails
the suite until the page is rewritten. Needs parka installed (``make setup``).
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
_BLOCK = re.compile(r"(<!-- flags: (?P<command>[a-z-]+) -->\n)(?P<table>.*?)(<!-- /flags -->)", re.DOTALL)
# characters Markdown would read as markup in a table cell: emphasis, HTML, links, the cell separator
_MARKUP = re.compile(r"([\\`*_\[\]|])")


def _text(text: str) -> str:
    escaped = _MARKUP.sub(r"\\\1", " ".join(text.split()))
    return escaped.replace("<", "&lt;").replace(">", "&gt;")


def _code(*items: str) -> str:
    return ", ".join(f"`{item}`".replace("|", "\\|") for item in items)


def flag_table(command: str) -> str:
    """``parka COMMAND``'s flags as a Markdown table: flag, variable, default, meaning."""
    from parka.cli import COMMANDS

    parser = importlib.import_module(COMMANDS[command].module).build_parser()
    rows = ["| Flag | Variable | Default | Meaning |", "| --- | --- | --- | --- |"]
    for s in parser.settings.values():
        default = s.default_shown().removeprefix("default: ")
        variables = _code(*s.env_vars) + (", comma-separated" if s.kind == "pairs" else "")
        if s.kind == "switch":
            variables = _code(*(f"{v}=1" for v in s.env_vars))
        flags = _code(*s.flags) if s.flags else _code(s.flag)
        if s.choices:  # as the usage line shows them
            flags += f" `{{{','.join(s.choices)}}}`"
        rows.append(f"| {flags} | {variables or '-'} | {_text(default)} | {_text(s.help)} |")
    return "\n".join(rows) + "\n"


def render(page: str) -> str:
    """``page`` with every generated table made again from the declarations."""
    return _BLOCK.sub(lambda m: f"{m.group(1)}{flag_table(m.group('command'))}{m.group(4)}", page)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--check", action="store_true", help="exit 1 when the page's tables are not the declarations'")
    args = p.parse_args(argv)
    page = PAGE.read_text(encoding="utf-8")
    fresh = render(page)
    if args.check:
        if fresh != page:
            print(f"{PAGE}: the flag tables are stale; run python scripts/config_reference.py", file=sys.stderr)
            return 1
        return 0
    PAGE.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
