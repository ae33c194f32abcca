"""Which model names an OpenAI-compatible server serves, and where other names go.

vLLM answers 404 ("The model `policy` does not exist") for a name it does not serve, and
agents name models freely: ``gateway_llm()`` sends ``"policy"``, programs hard-code
``"gpt-4o"``. An engine given no ``model=`` asks the server's ``/v1/models`` once and
sends a call naming anything else than a served model (base or loaded LoRA) for
the base model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agentbolt.engines.engine import EngineError

__all__ = ["ServedNames"]


@dataclass(frozen=True)
class ServedNames:
    """The names a server lists, and its base model (the first entry without a parent)."""

    names: frozenset[str]
    base: str

    @classmethod
    def of(cls, listing: dict[str, Any]) -> ServedNames:
        """From a ``/v1/models`` answer."""
        entries = [e for e in listing.get("data") or [] if isinstance(e, dict) and isinstance(e.get("id"), str)]
        if not entries:
            raise EngineError(502, "the engine's /v1/models lists no model: start it with the model to serve "
                                   "(vllm serve <model>), or give the engine model=<name>")
        base = next((e["id"] for e in entries if not e.get("parent")), entries[0]["id"])
        return cls(frozenset(e["id"] for e in entries), base)

    def route(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body`` asking for a served model: the name it gave when served, else the base."""
        if body.get("model") in self.names:
            return body
        return {**body, "model": self.base}
