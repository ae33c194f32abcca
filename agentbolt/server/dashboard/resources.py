"""Resources versions as the dashboard shows them, and what changed between two versions."""

from __future__ import annotations

import difflib
from typing import Any

import orjson

from agentbolt.types import JsonResource, PromptTemplate, Resources

__all__ = ["resource_diffs", "resources_view"]


def resources_view(bundle: Resources) -> dict[str, Any]:
    """A resources version: its names and kinds, and its prompt templates in full
    (model endpoints are named only: their keys stay out of the page)."""
    return {
        "version": bundle.version,
        "created_at": bundle.created_at,
        "names": sorted(bundle.resources),
        "kinds": {name: r.resource_type for name, r in sorted(bundle.resources.items())},
        "metadata": bundle.metadata,
        "prompt_templates": {
            name: r.template for name, r in sorted(bundle.resources.items()) if isinstance(r, PromptTemplate)
        },
    }


def _diffable_text(bundle: Resources | None, name: str) -> str | None:
    resource = bundle.resources.get(name) if bundle is not None else None
    if isinstance(resource, PromptTemplate):
        return resource.template
    if isinstance(resource, JsonResource):
        return orjson.dumps(resource.value, default=str, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()
    return None


def _lines(text: str | None) -> list[str]:
    if not text:
        return []
    lines = text.splitlines(keepends=True)
    if not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    return lines


def resource_diffs(new: Resources, old: Resources | None) -> dict[str, dict[str, Any]]:
    """Per prompt template and JSON resource of either version: the text before (in
    ``old``), after (in ``new``), whether it changed, and a unified diff."""
    names = sorted(set(new.resources) | set(old.resources if old is not None else ()))
    old_label = f"v{old.version}" if old is not None else "none"
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        before, after = _diffable_text(old, name), _diffable_text(new, name)
        if before is None and after is None:
            continue  # a model endpoint (or absent from both)
        unified = "".join(
            difflib.unified_diff(
                _lines(before), _lines(after), fromfile=f"{old_label}/{name}", tofile=f"v{new.version}/{name}"
            )
        )
        out[name] = {"before": before, "after": after, "changed": before != after, "unified": unified}
    return out
