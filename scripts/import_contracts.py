"""A contract type for import-linter that its own types cannot say: the core of a package
imports none of its subpackages (``parka``'s own modules import none of ``parka.producer``,
``parka.consumer``, ``parka.lake``, ``parka.spark_ext``), while those subpackages import the
core and, where the other contracts allow, each other. A ``forbidden`` contract cannot name
"the package minus these subpackages" as its source; this one does, on the same graph.
The second, ``core_private``: those subpackages import none of the core's underscored modules
(import-linter's ``private_modules`` lets every descendant of ``parka`` import ``parka._x``,
subpackages included).

Configured in pyproject.toml (``[tool.importlinter]``'s ``contract_types``), run by
``scripts/lint-imports.sh``."""

from __future__ import annotations

from typing import Any

from importlinter import Contract, ContractCheck, fields, output


class CoreContract(Contract):
    """``core``'s modules (its descendants outside ``packages``) import nothing in ``packages``.

    Options: ``core``, the package; ``packages``, its subpackages the core must not import;
    ``importers_allowed`` (optional), the core's modules that may (where a subpackage is chosen
    by name, say)."""

    type_name = "core"

    core = fields.StringField()
    packages = fields.ListField(subfield=fields.StringField())
    importers_allowed = fields.ListField(subfield=fields.StringField(), required=False)

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        packages = [str(p) for p in self.packages]

        def inside(module: str) -> bool:
            return any(module == p or module.startswith(p + ".") for p in packages)

        core = str(self.core)
        allowed = {str(m) for m in self.importers_allowed or ()}
        modules = sorted(m for m in {core, *graph.find_descendants(core)} if not inside(m) and m not in allowed)
        links = []
        for importer in modules:
            for imported in sorted(graph.find_modules_directly_imported_by(importer)):
                if inside(imported):
                    details = graph.get_import_details(importer=importer, imported=imported)
                    lines = sorted({d["line_number"] for d in details})
                    links.append({"importer": importer, "imported": imported, "line_numbers": lines})
        return ContractCheck(kept=not links, metadata={"links": links})

    def render_broken_contract(self, check: ContractCheck) -> None:
        packages = ", ".join(map(str, self.packages))
        output.print_error(f"{self.core}'s own modules must not import {packages}:", bold=False)
        output.new_line()
        for link in check.metadata["links"]:
            lines = ", ".join(map(str, link["line_numbers"]))
            output.print_error(f"- {link['importer']} -> {link['imported']} (l.{lines})", bold=False)


class CorePrivateContract(Contract):
    """Modules inside ``packages`` import no underscored module of ``core``'s own (a descendant of
    ``core`` outside ``packages`` whose last name starts with ``_``): the core's modules other
    layers use are public.

    Options: ``core``, the package; ``packages``, its subpackages."""

    type_name = "core_private"

    core = fields.StringField()
    packages = fields.ListField(subfield=fields.StringField())

    def check(self, graph: Any, verbose: bool) -> ContractCheck:
        packages = [str(p) for p in self.packages]

        def inside(module: str) -> bool:
            return any(module == p or module.startswith(p + ".") for p in packages)

        core = str(self.core)
        private = {m for m in graph.find_descendants(core) if not inside(m) and m.rsplit(".", 1)[-1].startswith("_")}
        links = []
        for importer in sorted(m for m in graph.find_descendants(core) if inside(m)):
            for imported in sorted(graph.find_modules_directly_imported_by(importer) & private):
                details = graph.get_import_details(importer=importer, imported=imported)
                lines = sorted({d["line_number"] for d in details})
                links.append({"importer": importer, "imported": imported, "line_numbers": lines})
        return ContractCheck(kept=not links, metadata={"links": links})

    def render_broken_contract(self, check: ContractCheck) -> None:
        output.print_error(
            f"{', '.join(map(str, self.packages))} must not import {self.core}'s private modules:", bold=False
        )
        output.new_line()
        for link in check.metadata["links"]:
            lines = ", ".join(map(str, link["line_numbers"]))
            output.print_error(f"- {link['importer']} -> {link['imported']} (l.{lines})", bold=False)
