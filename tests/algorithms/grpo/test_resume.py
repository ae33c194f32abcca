"""Crash and resume without losing a step.

A GRPO run on a SQLite store file is SIGKILLed in the middle of step 3 (after the
step-2 checkpoint). A new trainer with the same run_dir and store file continues at
step 3: the metrics have each step once, the policy and the optimizer are the step-2
checkpoint's, and the fresh engine is re-synced so the policy version goes on 2 → 3 → 4.
And the checkpoint files themselves: atomic, pruned, newest found.
"""

from __future__ import annotations

import asyncio
import copy
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("peft")

from agentbolt.algorithms.base import AlgorithmContext
from agentbolt.algorithms.grpo import GRPO
from agentbolt.algorithms.grpo.groups import GroupScheduler
from agentbolt.metrics import read_jsonl
from agentbolt.store.memory import MemoryStore
from agentbolt.store.sqlite import SqliteStore
from agentbolt.training.checkpoint import CheckpointManager
from agentbolt.types import AttemptStatus, RolloutStatus
from algorithms.grpo import resume_worker

PROBE = torch.tensor([[1, 40, 41, 42, 43, 2]])


class RecordingGRPO(GRPO):
    """GRPO that notes the state it starts its first step from (this process's run)."""

    first: dict[str, Any] | None = None

    async def step(self, ctx: Any, control: Any, learner: Any, scheduler: Any, step: int) -> Any:
        policy, update, version = learner.policy, learner.update, learner.version
        if self.first is None:
            with torch.no_grad():
                self.first = {
                    "step": step, "version": version, "served_version": await control.policy_version(),
                    "weights": policy.trainable_state(), "optimizer": copy.deepcopy(update.state_dict()),  # live tensors otherwise
                    "policy_logits": policy.model(input_ids=PROBE).logits,
                    "engine_logits": control.engine.model(input_ids=PROBE).logits,
                }
        return await super().step(ctx, control, learner, scheduler, step)


def _crash_in_step_3(run_dir: Path, db: Path) -> None:
    cmd = [sys.executable, resume_worker.__file__, str(run_dir), str(db), "4", "--hang-after", "2"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "checkpoints" / "step-000002" / "state.json").is_file():
            assert proc.poll() is None, f"the run ended before its step-2 checkpoint: {proc.stderr.read()[-3000:]}"
            assert time.monotonic() < deadline, "no step-2 checkpoint within 120 s"
            time.sleep(0.05)
        time.sleep(0.5)  # step 3 under way (its rollouts hang)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.stderr is not None
        proc.stderr.close()


@pytest.mark.slow
def test_a_killed_run_resumes_at_the_step_it_lost(tmp_path: Path) -> None:
    run_dir, db = tmp_path / "run", tmp_path / "store.db"
    _crash_in_step_3(run_dir, db)
    assert [r["step"] for r in read_jsonl(run_dir / "metrics.jsonl")] == [1, 2]
    assert [p.name for p in CheckpointManager(run_dir).list()] == ["step-000001", "step-000002"]
    saved = CheckpointManager.load(run_dir / "checkpoints" / "step-000002")

    model, tok = resume_worker.policy_model()
    algorithm = RecordingGRPO(resume_worker.config(run_dir, max_steps=4), model=model, tokenizer=tok)
    result = resume_worker.trainer(algorithm, db).fit(resume_worker.byte_agent, resume_worker.TASKS)

    rows = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # nothing lost, nothing twice
    assert [r["policy_version"] for r in rows] == [1, 2, 3, 4]
    assert result.steps == 4 and result.policy_version == 4
    first = algorithm.first
    assert first is not None
    assert first["step"] == 3 and first["version"] == 2 and first["served_version"] == 2
    assert first["weights"].keys() == saved.weights.keys()
    for key, value in saved.weights.items():
        torch.testing.assert_close(first["weights"][key], value, rtol=0, atol=0, msg=key)
    assert any(float(v.abs().max()) > 0 for k, v in saved.weights.items() if "lora_B" in k)  # it had trained
    torch.testing.assert_close(first["engine_logits"], first["policy_logits"], rtol=1e-4, atol=1e-4)  # re-synced
    assert first["optimizer"]["steps"] == saved.optimizer["steps"] == 2
    got, want = first["optimizer"]["optimizer"]["state"], saved.optimizer["optimizer"]["state"]
    assert got.keys() == want.keys() and want
    for index, state in want.items():
        for name, value in state.items():
            torch.testing.assert_close(got[index][name], value, rtol=0, atol=0)
    # the crashed run's step-3 rollouts were cancelled on resume, not left to be run again
    statuses = asyncio.run(_group_statuses(db))
    assert not [k for k in statuses if not RolloutStatus(k[1]).is_terminal], statuses
    assert sorted(n for (_, status), n in statuses.items() if status == "succeeded") == [4] * 8
    assert sum(n for (_, status), n in statuses.items() if status == "cancelled") == 2 * 4
    assert CheckpointManager(run_dir).latest().step == 4  # type: ignore[union-attr]
    assert CheckpointManager(run_dir).latest().state["policy_version"] == 4  # type: ignore[union-attr]


async def _group_statuses(db: Path) -> Counter[tuple[str, str]]:
    async with SqliteStore(db) as store:
        rollouts = (await store.query_rollouts(limit=1000)).items
    return Counter((r.metadata["group_id"], r.status.value) for r in rollouts)


async def test_a_resumed_scheduler_cancels_the_groups_the_crashed_run_started_after_its_checkpoint() -> None:
    store = MemoryStore()
    tasks = [{"q": i} for i in range(4)]
    crashed = GroupScheduler(AlgorithmContext(store, tasks), tasks, group_size=2, in_flight=2)
    await crashed.fill(version=0)
    claims = {c.rollout.rollout_id: c for c in await store.claim_rollouts("w", limit=100)}
    done = crashed.pending[0]
    for rid in done.rollout_ids:
        await store.update_attempt(rid, claims[rid].attempt.attempt_id, status=AttemptStatus.SUCCEEDED)
    await crashed.next_batch(1, version=0)
    state = crashed.state()  # the checkpoint: one group still in flight
    carried = crashed.pending[0]
    await crashed.fill(version=1)  # the crashed run's next step, lost with it
    lost = crashed.pending[1]

    resumed = GroupScheduler(AlgorithmContext(store, tasks), tasks, group_size=2, in_flight=2)
    resumed.restore(state)
    assert await resumed.cancel_lost() == 2
    by_id = {r.rollout_id: r.status for r in (await store.query_rollouts(limit=100)).items}
    assert {by_id[rid] for rid in lost.rollout_ids} == {RolloutStatus.CANCELLED}
    assert {by_id[rid] for rid in carried.rollout_ids} == {RolloutStatus.PREPARING}  # picked up, not cancelled
    assert {by_id[rid] for rid in done.rollout_ids} == {RolloutStatus.SUCCEEDED}
    await resumed.fill(version=1)
    assert [g.group_id for g in resumed.pending] == [carried.group_id, lost.group_id]  # its task is drawn again


# ---------------------------------------------------------------------- CheckpointManager
def _save(manager: CheckpointManager, step: int) -> Path:
    return manager.save(step, {"w": torch.full((2,), float(step))}, {"steps": step}, {"policy_version": step})


def test_checkpoint_round_trips_weights_optimizer_and_state(tmp_path: Path) -> None:
    path = _save(CheckpointManager(tmp_path), 7)
    loaded = CheckpointManager.load(path)
    assert loaded.step == 7 and loaded.state["policy_version"] == 7 and loaded.optimizer == {"steps": 7}
    torch.testing.assert_close(loaded.weights["w"], torch.full((2,), 7.0))


def test_a_half_written_checkpoint_is_ignored(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path)
    _save(manager, 1)
    crashed = manager.root / ".tmp-step-000002-999"  # a save killed before its rename
    crashed.mkdir()
    (crashed / "state.json").write_text('{"step": 2}')
    incomplete = manager.root / "step-000003"  # no state.json: not a checkpoint
    incomplete.mkdir()
    assert manager.latest().step == 1  # type: ignore[union-attr]
    assert [p.name for p in manager.list()] == ["step-000001"]


def test_keep_prunes_the_oldest_and_latest_is_the_newest(tmp_path: Path) -> None:
    manager = CheckpointManager(tmp_path, keep=2)
    for step in (1, 2, 3, 10):
        _save(manager, step)
    assert [p.name for p in manager.list()] == ["step-000003", "step-000010"]
    assert manager.latest().step == 10  # type: ignore[union-attr]
    assert not list(manager.root.glob(".tmp-*"))
    assert CheckpointManager(tmp_path / "nothing").latest() is None
