"""The ``{placeholders}`` of a prompt template, and whether an edit kept them.

Templates use ``str.format`` syntax: ``{request}`` is filled by the agent,
``{{`` / ``}}`` are literal braces. An edited template must name exactly the fields
of its parent, and must still format; anything else would break the agent at run time,
so such an edit is rejected before it is ever published.
"""

from __future__ import annotations

import string
from typing import Any

__all__ = ["PlaceholderError", "check_edit", "check_formats", "placeholders"]


class PlaceholderError(ValueError):
    """A template whose placeholders are malformed, or differ from the ones required."""


def placeholders(template: str) -> set[str]:
    """The field names of ``template`` as written (``{a}``, ``{a.b}``, ``{0}``; ``{}`` is ``""``).

    Raises :class:`PlaceholderError` for unbalanced braces."""
    try:
        return {field for _, field, _, _ in string.Formatter().parse(template) if field is not None}
    except ValueError as exc:
        raise PlaceholderError(
            f"the template is not valid str.format syntax ({exc}); write literal braces as '{{{{' and '}}}}'"
        ) from exc


class _Anything:
    """A stand-in value: any attribute, any index, any format spec."""

    def __getattr__(self, name: str) -> _Anything:
        return self

    def __getitem__(self, key: Any) -> _Anything:
        return self

    def __format__(self, spec: str) -> str:
        return "x"


def check_formats(template: str) -> None:
    """Raise :class:`PlaceholderError` unless ``template.format(...)`` works with a value
    for each of its fields (as the agent's ``prompt_template.format(**task)`` would)."""
    fields = placeholders(template)
    names = {f.split(".")[0].split("[")[0] for f in fields}
    positional = [n for n in names if n == "" or n.isdigit()]
    if positional:
        raise PlaceholderError(
            "the template has positional fields ('{}' or '{0}'); agents fill templates by name: use '{name}'"
        )
    dummy = _Anything()
    try:
        template.format(**dict.fromkeys(names, dummy))
    except (ValueError, KeyError, IndexError, AttributeError, TypeError) as exc:
        raise PlaceholderError(f"the template does not format ({type(exc).__name__}: {exc})") from exc


def check_edit(parent: str, edited: str) -> None:
    """Raise :class:`PlaceholderError` unless ``edited`` formats and has exactly the
    placeholders of ``parent`` (none lost, none added)."""
    check_formats(edited)
    want, got = placeholders(parent), placeholders(edited)
    if want != got:
        parts = []
        if want - got:
            parts.append("missing " + ", ".join(f"{{{f}}}" for f in sorted(want - got)))
        if got - want:
            parts.append("unexpected " + ", ".join(f"{{{f}}}" for f in sorted(got - want)))
        raise PlaceholderError(
            f"the placeholders changed ({'; '.join(parts)}): keep exactly "
            + (", ".join(f"{{{f}}}" for f in sorted(want)) or "none")
            + " and write literal braces as '{{' and '}}'"
        )
