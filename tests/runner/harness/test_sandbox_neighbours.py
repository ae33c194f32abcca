"""One attempt's abuse of the controller never reaches another's (issue 29, class 4).

One attacking rollout runs among eight honest ones. It holds as many gateway connections
as it can (straight on the relay's unix socket, and through the relay), sends request
heads one byte at a time, and leaves tens of thousands of files behind. The runner's
process has 1024 descriptors here, so before the per-attempt bounds the attacker took
them all and honest rollouts failed. The honest outcomes — status, reward, model calls
recorded — must be what they are without the attacker. No timing is asserted."""

from __future__ import annotations

import resource
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbolt.adapters.calls import is_model_call
from agentbolt.runner.harness import Harness, Limits, Sandbox
from agentbolt.types import Rollout, RolloutConfig, RolloutStatus
from runner.harness.attacks import GRADER, event_kinds, run_attacks
from runner.harness.helpers import Served, script

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

PROGRAM = r'''
import json, os, socket, sys, time, urllib.request
role = sys.argv[1]
base = os.environ["OPENAI_BASE_URL"]
def call():
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()
    req = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req, timeout=60))["choices"][0]["message"]["content"]
if role == "honest":
    time.sleep(1.0)                       # while the attacker holds what it could get
    call(); call()
    open("result.txt", "w").write("42\n")
    sys.exit(0)
# the attacker: four processes of ~900 connections each, heads trickled a byte at a time
port = int(base.split(":")[2].split("/")[0])
def hold():
    held = []
    for i in range(900):
        try:
            if i % 2:
                s = socket.socket(socket.AF_UNIX)
                s.connect("/run/agentbolt/gateway.sock")
            else:
                s = socket.create_connection(("127.0.0.1", port), timeout=2)
            s.send(b"P")
            held.append(s)
        except OSError:
            pass
    for _ in range(20):
        for s in held:
            try:
                s.send(b"O")
            except OSError:
                pass
        time.sleep(0.2)
for _ in range(3):
    if os.fork() == 0:
        hold()
        os._exit(0)
os.makedirs("litter", exist_ok=True)
for i in range(20000):
    open(f"litter/{i}", "w").close()
hold()
'''


@pytest.fixture
def few_descriptors() -> Iterator[None]:
    """The runner process (this one: runner, server and gateway) with 1024 descriptors."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(1024, hard), hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


async def _outcomes(served: Served, rollouts: list[Rollout]) -> list[tuple[RolloutStatus, float | None, int]]:
    found = []
    for r in rollouts:
        spans = await served.store.get_spans(r.rollout_id, r.latest_attempt_id)
        found.append((r.status, r.reward, sum(map(is_model_call, spans))))
    return found


@pytest.mark.timeout(240)
async def test_one_attacker_leaves_eight_honest_rollouts_unchanged(
    served: Served, tmp_path: Path, few_descriptors: None
) -> None:
    program = script(tmp_path, "program.py", PROGRAM)
    grader = script(tmp_path, "grade.py", GRADER)
    harness = Harness([sys.executable, program, "{role}"], evaluator=[sys.executable, grader], sandbox=Sandbox(),
                      server_url=served.url, timeout=60)
    config = RolloutConfig(max_attempts=1)
    alone = await served.run(harness, [{"role": "honest"}] * 8, config=config, concurrency=9)
    together = await served.run(harness, [{"role": "attacker"}, *[{"role": "honest"}] * 8], config=config,
                                concurrency=9)
    attacker, honest = together[0], together[1:]
    assert await _outcomes(served, alone) == [(RolloutStatus.SUCCEEDED, 1.0, 2)] * 8
    assert await _outcomes(served, honest) == await _outcomes(served, alone)
    # the attacker itself ran to its end and was judged; what it was refused is on record
    assert attacker.status == RolloutStatus.SUCCEEDED and attacker.reward == 0.0
    assert "limit.connections" in await event_kinds(served, attacker)


THREADS = r'''
import threading
if attack == "honest":
    workers = [threading.Thread(target=time.sleep, args=(0.2,)) for _ in range(8)]   # a normal pool
    for w in workers: w.start()
    for w in workers: w.join()
    answer()
elif attack == "thread_bomb":          # small stacks: the data limit alone would allow thousands
    threading.stack_size(64 << 10)
    started = 0
    try:
        for _ in range(3000):
            threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
            started += 1
    except RuntimeError:
        pass
    time.sleep(2)
    if started >= 3000: pwned(f"{started} threads")
'''


@pytest.mark.timeout(120)
async def test_threads_are_bounded_even_for_a_root_controller(served: Served, tmp_path: Path) -> None:
    by = await run_attacks(served, tmp_path, THREADS, ["thread_bomb"], sandbox=Sandbox(limits=Limits(threads=256)))
    assert (by["honest"].status, by["honest"].reward) == (RolloutStatus.SUCCEEDED, 1.0)
    bomb = by["thread_bomb"]
    assert (bomb.status, bomb.reward) == (RolloutStatus.SUCCEEDED, 0.0)
    assert "limit.threads" in await event_kinds(served, bomb)
