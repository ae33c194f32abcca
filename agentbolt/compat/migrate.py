"""Rewrite a program's ``agentlightning`` imports to ``agentbolt.compat`` (what
``agentbolt migrate`` runs).

A real code transformation (libcst, the ``migrate`` extra): only the module names of
import statements change — and, where the program imported a plain ``agentlightning``
module, the ``agentlightning.…`` references that name it — so formatting, comments and
everything else are kept byte for byte. Every import form is handled wherever it stands
(module level, inside functions, under ``try``/``if``):

* ``import agentlightning as agl`` → ``import agentbolt.compat as agl``;
* ``import agentlightning`` → ``import agentbolt.compat``, and ``agentlightning.X`` in
  the code → ``agentbolt.compat.X`` (likewise ``import agentlightning.store``);
* ``from agentlightning[.store] import X [as Y]`` and ``from agentlightning.types import *``
  → the same from ``agentbolt.compat[.store]``;
* ``importlib.import_module("agentlightning.store")`` → ``..."agentbolt.compat.store"``.

Other strings naming v0.3 objects (``"agentlightning.adapter.TraceToMessages"`` given to
``build_component``, ``monkeypatch.setattr("agentlightning...")``) are left as they are.

Rewriting an already migrated file changes nothing. Imports that point at something
agentbolt does not provide are still rewritten (the module path exists) and reported as
:class:`Finding` with the reason and what to use instead (:mod:`.surface`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from agentbolt.compat.resolution import unsupported_reason
from agentbolt.compat.surface import MODULES

if TYPE_CHECKING:
    import libcst as cst

__all__ = ["INSTALL_HINT", "NEW", "OLD", "Finding", "Migration", "MissingLibcstError", "migrate_source"]

OLD = "agentlightning"
NEW = "agentbolt.compat"
INSTALL_HINT = "pip install 'agentbolt[migrate]'  (or: pip install libcst)"


class MissingLibcstError(ImportError):
    """``agentbolt migrate`` needs libcst, which the ``migrate`` extra installs."""

    def __init__(self) -> None:
        super().__init__(f"agentbolt migrate needs libcst: {INSTALL_HINT}")


@dataclass(frozen=True)
class Finding:
    """An import the rewritten program still cannot use as it did on v0.3."""

    line: int
    statement: str
    reason: str


@dataclass
class Migration:
    """The result for one file: its new text and what could not be mapped."""

    source: str
    migrated: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.source != self.migrated


def _require_libcst() -> None:
    try:
        import libcst  # noqa: F401
    except ImportError as exc:
        raise MissingLibcstError() from exc


def _dotted(node: cst.BaseExpression) -> str | None:
    import libcst as cst

    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def _v03_module(dotted: str) -> str | None:
    """``"agentlightning.store.memory"`` → ``"store.memory"``; ``None`` for other modules."""
    if dotted == OLD:
        return ""
    if dotted.startswith(OLD + "."):
        return dotted[len(OLD) + 1:]
    return None


def _module_reason(module: str) -> str | None:
    if module != "" and module not in MODULES:
        return (f"agentlightning.{module} is not a module of Agent Lightning v0.3.0; the v0.3 module paths "
                f"agentbolt.compat provides are listed in agentbolt.compat.surface")
    return unsupported_reason(module)


def migrate_source(source: str) -> Migration:
    """The migrated text of one Python file, and the imports it could not map.

    Raises :class:`MissingLibcstError` without libcst and ``libcst.ParserSyntaxError`` for
    a file that is not valid Python."""
    _require_libcst()
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    class Rewriter(cst.CSTTransformer):
        METADATA_DEPENDENCIES = (PositionProvider,)

        def __init__(self, plain_bound: bool) -> None:
            super().__init__()
            self.findings: list[Finding] = []
            self.plain_bound = plain_bound  # `import agentlightning[.x]` binds the name agentlightning

        def _line(self, node: cst.CSTNode) -> int:
            return self.get_metadata(PositionProvider, node).start.line

        def _note(self, node: cst.CSTNode, statement: str, reason: str) -> None:
            self.findings.append(Finding(self._line(node), statement, reason))

        def _renamed(self, dotted: str) -> cst.Attribute | cst.Name:
            return cst.parse_expression(NEW + dotted[len(OLD):])  # type: ignore[return-value]

        def leave_Import(self, original: cst.Import, updated: cst.Import) -> cst.Import:
            names = []
            # the original names: leave_Attribute may already have renamed the updated ones
            for before, alias in zip(original.names, updated.names, strict=True):
                dotted = _dotted(before.name)
                module = _v03_module(dotted) if dotted else None
                if module is None or dotted is None:
                    names.append(alias)
                    continue
                reason = _module_reason(module)
                if reason is not None:
                    self._note(original, f"import {dotted}", reason)
                names.append(alias.with_changes(name=self._renamed(dotted)))
            return updated.with_changes(names=names)

        def leave_ImportFrom(self, original: cst.ImportFrom, updated: cst.ImportFrom) -> cst.ImportFrom:
            if original.relative or original.module is None:
                return updated
            dotted = _dotted(original.module)
            module = _v03_module(dotted) if dotted else None
            if module is None or dotted is None:
                return updated
            reason = _module_reason(module)
            if reason is not None:
                self._note(original, f"from {dotted} import ...", reason)
            elif not isinstance(updated.names, cst.ImportStar):
                for alias in updated.names:
                    name = _dotted(alias.name) or ""
                    why = None if f"{module}.{name}".strip(".") in MODULES else unsupported_reason(module, name)
                    if why is not None:
                        self._note(original, f"from {dotted} import {name}", why)
            return updated.with_changes(module=self._renamed(dotted))

        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.BaseExpression:
            # importlib.import_module("agentlightning.x") / import_module("agentlightning.x")
            name = _dotted(original.func)
            if name not in ("importlib.import_module", "import_module") or not updated.args:
                return updated
            first = updated.args[0].value
            if not isinstance(first, cst.SimpleString):
                return updated
            text = first.evaluated_value
            module = _v03_module(text) if isinstance(text, str) else None
            if module is None or not isinstance(text, str):
                return updated
            reason = _module_reason(module)
            if reason is not None:
                self._note(original, f"import_module({text!r})", reason)
            quote = first.quote
            literal = first.value[: first.value.index(quote)] + quote + NEW + text[len(OLD):] + quote
            return updated.with_changes(args=[updated.args[0].with_changes(value=first.with_changes(value=literal)),
                                              *updated.args[1:]])

        def leave_Attribute(self, original: cst.Attribute, updated: cst.Attribute) -> cst.BaseExpression:
            # agentlightning.X.Y after a plain `import agentlightning[.x]`: the name is gone
            if isinstance(updated.value, cst.Name) and updated.value.value == OLD and self.plain_bound:
                return updated.with_changes(value=cst.parse_expression(NEW))
            return updated

    class PlainImport(cst.CSTVisitor):
        found = False

        def visit_Import(self, node: cst.Import) -> None:
            for alias in node.names:
                dotted = _dotted(alias.name)
                if alias.asname is None and dotted is not None and _v03_module(dotted) is not None:
                    self.found = True

    tree = cst.parse_module(source)
    plain = PlainImport()
    tree.visit(plain)
    rewriter = Rewriter(plain_bound=plain.found)
    migrated = MetadataWrapper(tree).visit(rewriter)
    return Migration(source, migrated.code, rewriter.findings)
