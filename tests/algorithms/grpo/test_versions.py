"""Versions are never reused, and rollouts from weights the trainer no longer has are not
trained as fresh: a run that published past its last checkpoint and crashed resumes under
a new version number, and the lost version's tokens are dropped."""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import pytest

from agentbolt.adapters.samples import Sample
from agentbolt.engines.weight_update import WeightUpdate
from agentbolt.training.staleness import split_stale
from agentbolt.training.versions import (
    PublishedVersions,
    VersionLineage,
    resume_version,
)


def _sample(rollout: str, version: int | None) -> Sample:
    return Sample(rollout, "a", [1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], [None, version, version], ["s"], 1.0)


def test_a_resumed_run_takes_a_version_above_every_one_used() -> None:
    assert resume_version(2, published=2, served=0) == 2  # nothing past the checkpoint: the same weights, same number
    assert resume_version(2, published=3, served=0) == 4  # v3 was lost with the crash: not given to other weights
    assert resume_version(2, published=2, served=7) == 8  # the engine serves a later version (a long-running server)
    assert resume_version(None, published=3, served=1) is None


def test_the_published_version_is_noted_durably_and_only_goes_up(tmp_path: Path) -> None:
    noted = PublishedVersions(tmp_path)
    assert noted.read() is None
    noted.note(3)
    noted.note(2)
    assert noted.read() == 3 and PublishedVersions(tmp_path).read() == 3


def test_lag_is_counted_in_updates_and_unknown_versions_are_dropped() -> None:
    # the checkpoint held v2 after 2 updates; v3 (3 updates) was lost; the resumed run republished v2's weights as v4
    lineage = VersionLineage.from_json({"1": 1, "2": 2})
    lineage.add(4, 2)
    assert lineage.lag(2, 4) == 0 and lineage.lag(1, 4) == 1 and lineage.lag(3, 4) is None
    samples = [_sample("at-checkpoint", 2), _sample("republished", 4), _sample("one-behind", 1),
               _sample("lost", 3), _sample("future", 9), _sample("unversioned", None)]
    split = split_stale(samples, 4, max_lag=0, lineage=lineage)
    assert [s.rollout_id for s in split.fresh] == ["at-checkpoint", "republished", "unversioned"]
    assert split.stale_rollouts == ["one-behind"] and split.unknown_rollouts == ["future", "lost"]
    assert split.max_lag == 0
    # by version numbers alone, v3 passes as one behind; a newer version (negative lag) is never fresh
    plain = split_stale(samples, 4, max_lag=1)
    assert "lost" in {s.rollout_id for s in plain.fresh} and plain.unknown_rollouts == ["future"]


@pytest.mark.slow
def test_a_run_that_published_past_its_checkpoint_resumes_under_new_versions(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("peft")
    from agentbolt.algorithms.grpo import GRPO
    from agentbolt.metrics import read_jsonl
    from algorithms.grpo import resume_worker

    tiebreak = itertools.count()

    async def agent(task: dict[str, str], llm: Any) -> float:
        """``byte_agent`` with a per-rollout tie-break: every group has reward variance, so
        every step publishes (the versions below count on it; at this learning rate the
        answers' first bytes soon tie, more so under load)."""
        return await resume_worker.byte_agent(task, llm) + next(tiebreak) * 1e-4

    class CrashAfterStep3(GRPO):
        async def step(self, *args: Any) -> Any:
            values = await super().step(*args)
            if args[4] == 3:  # published v3, crashed before its checkpoint (every 2 steps)
                raise RuntimeError("crashed after publishing")
            return values

    run_dir, db = tmp_path / "run", tmp_path / "store.db"
    config = resume_worker.config(run_dir, max_steps=4).model_copy(update={"checkpoint_every": 2})
    model, tok = resume_worker.policy_model()
    with pytest.raises(RuntimeError, match="crashed after publishing"):
        resume_worker.trainer(CrashAfterStep3(config, model=model, tokenizer=tok), db).fit(agent, resume_worker.TASKS)
    assert PublishedVersions(run_dir).read() == 3

    model, tok = resume_worker.policy_model()
    result = resume_worker.trainer(GRPO(config, model=model, tokenizer=tok), db).fit(
        agent, resume_worker.TASKS)  # a fresh engine: it serves version 0
    rows = read_jsonl(run_dir / "metrics.jsonl")
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["policy_version"] for r in rows] == [1, 2, 5, 6]  # the checkpoint's weights came back as v4
    assert result.policy_version == 6 and PublishedVersions(run_dir).read() == 6
    assert asyncio.run(_sampled_versions(db)) == {0, 1, 2, 4, 5}  # v3 sampled nothing, and was not reused


async def _sampled_versions(db: Path) -> set[int]:
    from agentbolt.adapters.calls import extract_model_calls
    from agentbolt.semconv import LLM_POLICY_VERSION
    from agentbolt.store.sqlite import SqliteStore

    async with SqliteStore(db) as store:
        rollouts = (await store.query_rollouts(limit=1000)).items
        versions = set()
        for r in rollouts:
            for call in extract_model_calls(await store.get_spans(r.rollout_id)):
                versions.add(call.attributes.get(LLM_POLICY_VERSION))
    return versions


class _Control:
    """A gateway control that serves whatever version it is given."""

    def __init__(self, served: int) -> None:
        self.served = served

    async def policy_version(self) -> int:
        return self.served

    async def load_weights(self, update: WeightUpdate, *, version: int | None = None) -> int:
        self.served = version if version is not None else self.served + 1
        return self.served


class _Policy:
    lora = True
    sharded = weights_in_parts = False

    def weight_update(self) -> WeightUpdate:
        return WeightUpdate(lora={}, lora_scale=1.0)


async def test_a_fresh_run_in_an_old_run_dir_does_not_hand_out_its_numbers_again(tmp_path: Path) -> None:
    from agentbolt.algorithms.grpo.config import GRPOConfig
    from agentbolt.training.publish import EngineInfo
    from agentbolt.training.sync import PolicySync

    PublishedVersions(tmp_path).note(6)  # an earlier run in this directory published up to v6
    info = EngineInfo("transformers", None, None, ("state_dict", "lora"), local=False)
    sync = PolicySync(_Control(served=0), _Policy(), info, GRPOConfig(check_publish=False), tmp_path)
    sync.start(0, updates=0)  # a fresh engine serves v0
    assert (await sync.publish(0, updates=1, probe=None))[0] == 7
    assert (await sync.publish(7, updates=2, probe=None))[0] == 8
    assert sync.lineage.lag(0, 8) == 2 and PublishedVersions(tmp_path).read() == 8
