"""One thing a program's sandbox blocked or enforced (network, limits), whatever the sandbox."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["SandboxEvent"]


@dataclass(frozen=True)
class SandboxEvent:
    kind: str
    detail: str
    count: int = 1

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "detail": self.detail, "count": self.count}
