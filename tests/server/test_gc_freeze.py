"""While a server app runs, its startup heap is out of the collector's way; once the last
app stops, the collector gets it back (a process that starts and stops apps keeps no garbage)."""

from __future__ import annotations

import gc

import pytest
from fastapi.testclient import TestClient

from agentbolt.server import create_app, gc_freeze
from agentbolt.store.memory import MemoryStore


@pytest.fixture(autouse=True)
def _no_other_app_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """An app another test of this process left running would keep the heap frozen: these
    specs start from a process with no app running (the count is restored afterwards)."""
    monkeypatch.setattr(gc_freeze, "_running", 0)
    monkeypatch.setattr(gc_freeze, "_saved", ())


def test_a_running_app_freezes_the_startup_heap_and_the_last_one_to_stop_thaws_it() -> None:
    gc.unfreeze()
    thresholds = gc.get_threshold()
    with TestClient(create_app(MemoryStore(), deadline_check=False)) as client:
        assert client.get("/healthz").status_code == 200
        frozen = gc.get_freeze_count()
        assert frozen > 1000  # modules, classes, the app: everything alive at startup
        assert gc.get_threshold()[2] >= gc_freeze.FULL_EVERY  # full collections spaced out
        with TestClient(create_app(MemoryStore(), deadline_check=False)):
            assert gc.get_freeze_count() >= frozen
        assert gc.get_freeze_count() >= frozen  # another app still runs
    assert gc.get_freeze_count() == 0
    assert gc.get_threshold() == thresholds


def test_thawing_more_often_than_freezing_is_harmless() -> None:
    gc_freeze.thaw()
    gc_freeze.freeze()
    gc_freeze.thaw()
    assert gc.get_freeze_count() == 0
