"""The dashboard's lineage and row routes: a rollout's samples as conversations (calls,
break causes, trained calls, token counts — never token ids), and per training step the
rows in, trained, dropped by reason, with the one line for a step that trained nothing."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from dashboard.lineage_store import COMPACTED, MAIN_SYSTEM, ROWS_RUN, TASK, add_lineage_rollout, row_records

from agentbolt.server.dashboard import schemas
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore
from agentbolt.types import MetricRecord

ADMIN = "lineage-admin-token"


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[httpx.Client, str]]:
    store = MemoryStore()

    async def fill() -> str:
        rid = await add_lineage_rollout(store)
        await store.add_metrics(row_records())
        await store.add_metrics([MetricRecord(run_id="two-policies", step=1, values={
            "solver/rows/in": 4, "solver/rows/trained": 0, "solver/rows/dropped/no_trained_call": 4})])
        return rid

    rollout_id = asyncio.run(fill())
    with (
        serve_in_thread(store, admin_token=ADMIN, deadline_check=False) as url,
        httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30) as client,
    ):
        yield client, rollout_id


def get(client: httpx.Client, route: str, **params: Any) -> Any:
    response = client.get(route, params=params)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_rollout_s_samples_form_a_tree_of_conversations_with_their_break_causes(served: Any) -> None:
    client, rid = served
    lineage = get(client, f"/v1/dashboard/rollouts/{rid}/lineage")
    schemas.Lineage.model_validate(lineage)  # the documented shape, nothing more
    main, explorer, compacted = lineage["samples"]
    assert (main["cause"], main["conversation"], main["parent"]) == ("first", 0, None)
    assert [c["span_id"] for c in main["calls"]] == ["m1", "m2"] and main["agents"] == ["main"]
    # the sub-agent's interleaved calls merged into a conversation of their own: a branch
    assert (explorer["cause"], explorer["conversation"]) == ("new_conversation", 1)
    assert [c["span_id"] for c in explorer["calls"]] == ["s1", "s2"] and explorer["agents"] == ["explorer"]
    # the compaction kept the system prompt and rewrote the rest: diverged from the first sample, where it changed
    assert (compacted["cause"], compacted["conversation"], compacted["parent"]) == ("diverged", 0, 0)
    assert compacted["diverged_from"] == "m1" and compacted["diverged_at"] == len(MAIN_SYSTEM)
    assert compacted["tokens"] == len(COMPACTED) + 3 and compacted["tokens_trained"] == 2
    counts = lineage["counts"]
    assert (counts["calls"], counts["conversations"], counts["samples"]) == (6, 2, 3)
    assert counts["breaks"] == {"first": 1, "new_conversation": 1, "diverged": 1}
    assert counts["tokens_trained"] == 7 and counts["tokens_shared"] == len(MAIN_SYSTEM) - 1
    assert "token_ids" not in str(lineage) and lineage["error"] is None


def test_agent_match_marks_which_calls_train_and_the_others_stay_in_the_tree(served: Any) -> None:
    client, rid = served
    lineage = get(client, f"/v1/dashboard/rollouts/{rid}/lineage", agent_match="^explorer$")
    trained = {c["span_id"]: c["trained"] for s in lineage["samples"] for c in s["calls"]}
    assert trained == {"m1": False, "m2": False, "s1": True, "s2": True, "m3": False, "m4": False}
    main = lineage["samples"][0]
    assert main["tokens_trained"] == 0 and main["tokens_context"] == len(TASK) + 4  # prompt, 2 answers, a tool reply
    assert lineage["counts"]["tokens_trained"] == 2
    bad = client.get(f"/v1/dashboard/rollouts/{rid}/lineage", params={"agent_match": "(unclosed"})
    assert bad.status_code == 400 and "agent_match" in bad.text


def test_an_unknown_rollout_is_404(served: Any) -> None:
    client, _ = served
    assert client.get("/v1/dashboard/rollouts/nope/lineage").status_code == 404


def test_each_step_says_rows_in_trained_dropped_by_reason_and_why_nothing_trained(served: Any) -> None:
    client, _ = served
    rows = get(client, "/v1/dashboard/training/rows", run_id=ROWS_RUN)
    schemas.RowSteps.model_validate(rows)
    first, second = rows["steps"]
    assert first == {"step": 1, "rows_in": 8, "rows_trained": 6, "dropped": {"failed": 2}, "why_nothing_trained": None}
    assert second["rows_trained"] == 0 and second["dropped"] == {"zero_variance": 8}
    assert second["why_nothing_trained"] == "all 2 groups had zero reward variance (8 rollouts)"
    assert get(client, "/v1/dashboard/training/rows", run_id="no-such-run")["steps"] == []


def test_a_run_that_trains_several_policies_has_rows_per_policy(served: Any) -> None:
    client, _ = served
    (step,) = get(client, "/v1/dashboard/training/rows", run_id="two-policies", policy="solver")["steps"]
    assert step["rows_in"] == 4 and step["dropped"] == {"no_trained_call": 4}
    assert step["why_nothing_trained"] == "all 4 rollouts had no call with token ids that agent_match trains"
    assert get(client, "/v1/dashboard/training/rows", run_id="two-policies")["steps"] == []
