"""The training page of a run that trains one LoRA per agent (``GRPOPolicies``): the run's
shared curves (reward, success) and, in a section per policy, that policy's own curves
(its loss, its agents' trained tokens) with its current version; the evaluation table
names each policy's version. The metrics come from a real (tiny) two-policy GRPO run
into the SQLite store the server reads."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip(
    "playwright.sync_api", reason="the dashboard browser tests need the 'playwright' package (pip install -e '.[dev]')"
)
pytest.importorskip("torch")
pytest.importorskip("peft")
from playwright.sync_api import expect

from agentbolt.server.testing import serve_in_thread
from agentbolt.store.sqlite import SqliteStore
from dashboard.conftest import TOKEN

RUN = "two-policies"
STEPS = 2


async def planner_then_solver(task: dict[str, str], llm: Any) -> float:
    """Each agent calls its own policy by model name; the solver's first byte is the reward."""
    import openai

    import agentbolt

    client = openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5)
    async with client:
        with agentbolt.agent("planner"):
            plan = await client.chat.completions.create(
                model="planner", messages=[{"role": "user", "content": task["prompt"]}], max_tokens=3)
        with agentbolt.agent("solver"):
            answer = await client.chat.completions.create(
                model="solver", messages=[{"role": "user", "content": f"solve {plan.choices[0].message.content}"}],
                max_tokens=3)
    text = answer.choices[0].message.content or ""
    return ord(text[0]) / 1000 if text else 0.0


def _train_two_policies(path: Path, run_dir: Path) -> dict[str, Any]:
    import agentbolt
    from agentbolt.algorithms import GRPOConfig, GRPOPolicies
    from agentbolt.engines import PolicyEngines
    from agentbolt.gateway import Gateway, GatewayConfig
    from agentbolt.models import tiny_model

    model, tokenizer = tiny_model(seed=3, vocab="bytes", hidden=64, n_layers=2)
    engines = PolicyEngines.local(model, tokenizer, ["planner", "solver"], max_batch_size=16, num_threads=1,
                                  default_max_tokens=3)
    config = GRPOConfig(max_steps=STEPS, tasks_per_step=2, group_size=4, run_dir=str(run_dir), run_name=RUN,
                        progress=False, checkpoint_every=0, loggers=["store"])
    trainer = agentbolt.Trainer(algorithm=GRPOPolicies({"planner": "^planner$", "solver": "^solver$"}, config),
                                store=f"sqlite:///{path}", runner=agentbolt.Runner(concurrency=8),
                                gateway=Gateway(engines, GatewayConfig(retry_after=1)))
    tasks = [{"prompt": "apple 1"}, {"prompt": "river 2"}]
    return trainer.fit(planner_then_solver, tasks, tasks[:1])


def test_each_policy_of_a_run_gets_its_own_curves_and_version(page: Any, tmp_path: Path) -> None:
    path = tmp_path / "policies.db"
    with ThreadPoolExecutor(1) as pool:  # Playwright's event loop runs in this thread
        results = pool.submit(_train_two_policies, path, tmp_path / "run").result()
    assert {name: r.policy_version for name, r in results.items()} == {"planner": STEPS, "solver": STEPS}

    with serve_in_thread(SqliteStore(path), admin_token=TOKEN) as url:
        page.goto(url + "/training")
        expect(page.get_by_test_id("run-select")).to_have_value(RUN)
        shared = page.locator("[data-testid=chart][data-key='reward/mean']")
        expect(shared).to_have_attribute("data-points", str(STEPS))
        sections = page.get_by_test_id("policy-section")
        expect(sections).to_have_count(2)
        for name, other in (("planner", "solver"), ("solver", "planner")):
            section = page.locator(f"[data-testid=policy-section][data-policy='{name}']")
            expect(section.get_by_test_id("policy-version")).to_have_text(f"v{STEPS}")
            for key in (f"{name}/train/loss", f"{name}/agents/{name}/tokens_trained"):
                expect(section.locator(f"[data-testid=chart][data-key='{key}']")).to_have_attribute(
                    "data-points", str(STEPS))
            expect(section.locator(f"[data-testid=chart][data-key^='{other}/']")).to_have_count(0)  # not the other's
            expect(section.locator("[data-testid=chart][data-key='reward/mean']")).to_have_count(0)
        rows = page.get_by_test_id("eval-row")
        expect(rows).to_have_count(2)  # before (step 0) and after (the last step) training
        expect(rows.first).to_contain_text("planner v0, solver v0")
        expect(rows.last).to_contain_text(f"planner v{STEPS}, solver v{STEPS}")
