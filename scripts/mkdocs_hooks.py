"""mkdocs hooks for parka's docs site (``hooks:`` in mkdocs.yml). Three jobs:

1. Lay the source folders out as the installed package (scripts/package_tree.py), so mkdocstrings
   (griffe, reading the source statically) finds ``parka.producer`` in ``producer/`` and so on:
   griffe follows an editable install's top-level package only. The tree is symlinks under
   ``build/docs-api`` (the ``paths:`` of the python handler), rebuilt on every build.
2. Include a file from the repository root in a page: a line ``--8<-- "ARCHITECTURE.md"`` in
   ``docs/architecture.md`` is replaced by that file, so the file stays the one copy and its
   edits reach the site. Its links are rewritten as if it lived in ``docs/``.
3. Make links that leave ``docs/`` work in the site, and check that their target exists. On
   GitHub a page links the code or a checked-in run relatively
   (``../benchmarks/results/.../report.md``); the site has no such page. Such a link goes to
   ``repo_url`` (``<repo_url>/blob/main/<path>``) when mkdocs.yml sets one, else it becomes the
   link's text followed by the path in code, so the path is still there to read. A link to an
   included root file goes to the page including it.

A link to a file the repository does not have is a warning; so is everything mkdocs checks itself
(a link to a missing page, a missing anchor). ``mkdocs build --strict`` turns each into an error.
"""

from __future__ import annotations

import logging
import posixpath
import re
import sys
from pathlib import Path
from typing import Any

from mkdocs.plugins import event_priority

sys.path.insert(0, str(Path(__file__).resolve().parent))
from package_tree import package_tree  # scripts/ is not a package: found through the path above

# under mkdocs' logger, so that mkdocs counts its warnings (and --strict fails on them)
log = logging.getLogger("mkdocs.hooks.parka")
API_TREE = Path("build") / "docs-api"
_INCLUDE = re.compile(r'^--8<-- "([^"]+)"[ \t]*$', re.MULTILINE)
# an inline link or image: [text](target) / ![alt](target), target without spaces
_LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")
_FENCE = re.compile(r"^\s*(```|~~~)")
_SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")

# root file -> the docs page that includes it (filled in on_files)
_included: dict[str, str] = {}


# before mkdocstrings' own on_config, which sets up the handler's search paths
@event_priority(100)
def on_config(config: Any) -> Any:
    package_tree(Path(config["config_file_path"]).parent, Path(config["config_file_path"]).parent / API_TREE)
    return config


def on_files(files: Any, config: Any) -> Any:
    _included.clear()
    for page in files.documentation_pages():
        for name in _INCLUDE.findall(page.content_string):
            _included[posixpath.normpath(name)] = page.src_uri
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    root = Path(config["config_file_path"]).parent
    docs = Path(config["docs_dir"])
    page_dir = posixpath.dirname(page.file.src_uri)

    def include(match: re.Match[str]) -> str:
        name = posixpath.normpath(match.group(1))
        text = (root / name).read_text(encoding="utf-8")
        # the included file's links are relative to its own folder in the repository
        return _rewrite_links(
            text,
            posixpath.dirname(name),
            page_dir,
            root,
            docs,
            config.get("repo_url"),
            page=f"{name} in {page.file.src_uri}",
        )

    markdown = _INCLUDE.sub(include, markdown)
    return _rewrite_links(
        markdown,
        posixpath.join(docs.relative_to(root).as_posix(), page_dir),
        page_dir,
        root,
        docs,
        config.get("repo_url"),
        only_outside=True,
        page=page.file.src_uri,
    )


def _rewrite_links(
    text: str,
    source_dir: str,
    page_dir: str,
    root: Path,
    docs: Path,
    repo_url: str | None,
    *,
    only_outside: bool = False,
    page: str = "",
) -> str:
    """Rewrite the relative links of ``text`` (written in repository folder ``source_dir``) for a page
    in ``docs/<page_dir>``; code blocks are left alone. With ``only_outside``, links that stay in
    ``docs/`` are left as written (mkdocs checks those)."""
    docs_rel = docs.relative_to(root).as_posix()
    out: list[str] = []
    in_fence = False
    for line in text.splitlines(keepends=True):
        if _FENCE.match(line):
            in_fence = not in_fence
        if in_fence or "](" not in line:
            out.append(line)
            continue

        def link(match: re.Match[str]) -> str:
            bang, label, target = match.groups()
            if target.startswith("#") or _SCHEME.match(target) or target.startswith("/"):
                return match.group(0)
            path, _, fragment = target.partition("#")
            repo_path = posixpath.normpath(posixpath.join(source_dir, path))
            anchor = f"#{fragment}" if fragment else ""
            if repo_path in _included:
                return f"{bang}[{label}]({_relative(_included[repo_path], page_dir)}{anchor})"
            if repo_path == docs_rel or repo_path.startswith(docs_rel + "/"):
                if only_outside:
                    return match.group(0)
                in_docs = posixpath.relpath(repo_path, docs_rel)
                return f"{bang}[{label}]({_relative(in_docs, page_dir)}{anchor})"
            if repo_path.startswith("..") or not (root / repo_path).exists():
                # a warning, so that --strict fails on it and `make docs` still serves the rest
                problem = (
                    "leaves the repository" if repo_path.startswith("..") else f"names {repo_path}, which is missing"
                )
                log.warning(f"Doc file {page or posixpath.join(page_dir, '*')!r}: the link {target!r} {problem}")
                return match.group(0)
            if repo_url:
                return f"{bang}[{label}]({repo_url.rstrip('/')}/blob/main/{repo_path}{anchor})"
            shown = label.strip("`")
            return f"`{repo_path}`" if shown == repo_path or bang else f"{label} (`{repo_path}`)"

        out.append(_LINK.sub(link, line))
    return "".join(out)


def _relative(in_docs: str, page_dir: str) -> str:
    return posixpath.relpath(in_docs, page_dir or ".") if page_dir else in_docs
