"""Measure the UNTRAINED model on the function-calling calc task, through the gateway.

Serves SmolLM2-135M-Instruct with agentbolt's transformers engine behind the gateway (an
in-memory store), runs the held-out problems with the Agents SDK agent greedily and
sampled at T=1, and prints per mode: how often the model called the tool with an
expression that evaluates, success, mean reward — and the merge rate of the recorded
calls into training samples with token-exact history, next to the rate re-rendering the
history would have given in the same run. ``--task calc`` measures the same merge rates
for the text-protocol calc agent (``examples/calc``).

    python examples/calc_tools/probe.py --n 32
    python examples/calc_tools/probe.py --task calc --n 32 --modes sampled
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import itertools

import httpx
from tool_task import DIFFICULTY, MAX_TOKENS, heldout_set, run_episode

ADMIN = "probe-admin"


def merge_rates(gateway: Any, spans: list[Any]) -> tuple[int, int, int]:
    """(follow-up calls, merged with the recorded prompts, would merge re-rendered)."""
    from agentbolt.adapters.calls import extract_model_calls, group_by_attempt
    from agentbolt.adapters.samples import build_samples

    template = gateway.token_chat.template
    follow, merged, rerendered = 0, 0, 0
    for group in group_by_attempt(spans):
        calls = [c for c in extract_model_calls(group) if not c.failed]
        found = build_samples(calls)
        if found is None or len(calls) < 2:
            continue
        follow += len(calls) - 1
        merged += len(calls) - len(found.samples)
        for prev, call in itertools.pairwise(calls):
            redone = template.prompt_ids(call.request, template.tool_mode(call.request))
            before = [*prev.prompt_token_ids, *prev.response_token_ids]
            rerendered += redone[: len(before)] == before
    return follow, merged, rerendered


async def calc_text_episode(task: dict[str, Any], client: Any) -> tuple[bool, bool]:
    """examples/calc's agent (text protocol): (called the calculator well, correct)."""
    sys.path.insert(0, str(HERE.parent / "calc"))
    from task import MAX_TOKENS as CALC_TOKENS
    from task import CalcEpisode

    episode = CalcEpisode(task)
    while not episode.done:
        answer = await client.chat.completions.create(model="policy", messages=episode.messages(),
                                                      max_tokens=CALC_TOKENS)
        episode.consume(answer.choices[0].message.content or "")
    return episode.call_ok, episode.correct


async def run_mode(url: str, tasks: list[dict[str, Any]], mode: str, task_kind: str,
                   difficulty: str = DIFFICULTY) -> list[tuple[bool, bool, str]]:
    import openai

    rollout_mode = "val" if mode == "greedy" else "train"
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60) as admin:
        ids = [f"{mode}-{i}-{time.monotonic_ns()}" for i in range(len(tasks))]
        r = await admin.post("/v1/rollouts", json={"rollouts": [{"rollout_id": i, "mode": rollout_mode} for i in ids]})
        r.raise_for_status()
        claims = (await admin.post("/v1/claims", json={"worker_id": "probe", "limit": len(ids)})).json()

    async def one(task: dict[str, Any], claim: dict[str, Any]) -> tuple[bool, bool, str]:
        rid, aid = claim["rollout"]["rollout_id"], claim["attempt"]["attempt_id"]
        base = f"{url}/rollout/{rid}/attempt/{aid}/v1"
        async with openai.AsyncOpenAI(base_url=base, api_key=claim["token"], max_retries=3) as client:
            if task_kind == "calc":
                call_ok, correct = await calc_text_episode(task, client)
                return call_ok, correct, rid
            outcome = await run_episode(task, client, "policy", difficulty, max_tokens=MAX_TOKENS)
            return outcome.call_ok, outcome.correct(task), rid

    by_id = {c["rollout"]["rollout_id"]: c for c in claims}
    return list(await asyncio.gather(*(one(t, by_id[i]) for t, i in zip(tasks, ids, strict=True))))


async def main(args: argparse.Namespace) -> None:
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway, GatewayConfig
    from agentbolt.models import smollm2
    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store.memory import MemoryStore

    engine = TransformersEngine.from_pretrained(smollm2(), num_threads=args.threads, max_batch_size=args.batch,
                                                default_max_tokens=MAX_TOKENS)
    gateway = Gateway(engine, GatewayConfig(sampling={"train": {"temperature": 1.0}, "val": {"temperature": 0.0}}))
    store = MemoryStore()
    tasks = heldout_set(args.n, args.difficulty)
    print(f"task={args.task} difficulty={args.difficulty} n={args.n} parser={engine.tool_parser} threads={args.threads}")
    print(f"{'mode':8} {'tool call ok':>12} {'success':>8} {'merge (token-exact)':>20} {'merge (re-rendered)':>20} "
          f"{'seconds':>8}")
    with serve_in_thread(store, admin_token=ADMIN, gateway=gateway) as url:
        for mode in args.modes.split(","):
            t0 = time.perf_counter()
            results = await run_mode(url, tasks, mode, args.task, args.difficulty)
            seconds = time.perf_counter() - t0
            await gateway.flush()
            spans = [s for r in results for s in await store.get_spans(r[2])]
            follow, merged, rerendered = merge_rates(gateway, spans)
            n = len(results)

            def pct(k: int, of: int) -> str:
                return f"{100 * k / of:.1f} %" if of else "n/a"

            print(f"{mode:8} {pct(sum(r[0] for r in results), n):>12} {pct(sum(r[1] for r in results), n):>8} "
                  f"{pct(merged, follow) + f' of {follow}':>20} {pct(rerendered, follow):>20} {seconds:8.1f}")
    print("gateway prompts:", gateway.history.stats.as_dict())


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", choices=["calc_tools", "calc"], default="calc_tools")
    p.add_argument("--n", type=int, default=32, help="held-out problems per mode")
    p.add_argument("--difficulty", choices=["mul", "word", "multi"], default=DIFFICULTY)
    p.add_argument("--modes", default="greedy,sampled")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=32)
    return p.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
