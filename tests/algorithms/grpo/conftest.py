"""Fixtures of the GRPO tests."""

from __future__ import annotations

from typing import Any

import pytest


@pytest.fixture
def trained_samples(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The samples every GRPO policy update of the test trains on, in order."""
    from agentbolt.algorithms.grpo.update import PolicyUpdate

    seen: list[Any] = []
    step = PolicyUpdate.step

    def recording(self: PolicyUpdate, samples: Any, **kw: Any) -> Any:
        seen.extend(samples)
        return step(self, samples, **kw)

    monkeypatch.setattr(PolicyUpdate, "step", recording)
    return seen
