"""The maximum policy lag bound of async training."""

from __future__ import annotations

import math

import pytest

from agentbolt.algorithms.grpo import Sample, policy_lag, split_stale


def sample(rollout_id: str, versions: list[int | None], mask: list[int] | None = None) -> Sample:
    n = len(versions)
    return Sample(rollout_id, "at-1", list(range(n)), mask or [1] * n, [-1.0] * n, versions, ["c"])


def test_lag_is_measured_from_the_oldest_trained_token() -> None:
    # trained tokens from versions 3 and 5 (the context token's None is ignored); at V = 6: lag = 6 - 3 = 3
    s = sample("ro-1", [None, 3, 5], mask=[0, 1, 1])
    assert policy_lag(s, 6) == 3
    assert policy_lag(sample("ro-2", [None, None]), 6) is None


def test_samples_within_the_bound_are_kept_and_a_stale_rollout_is_dropped_whole() -> None:
    # V = 10, max_lag = 2: ro-fresh lags 10-9 = 1 and 10-8 = 2 (kept, at the bound);
    # ro-old has one sample at lag 0 and one at 10-7 = 3 > 2 → both its samples go;
    # ro-unknown recorded no version: kept.
    samples = [
        sample("ro-fresh", [9]), sample("ro-fresh", [8, 9]),
        sample("ro-old", [10]), sample("ro-old", [7]),
        sample("ro-unknown", [None]),
    ]
    split = split_stale(samples, current_version=10, max_lag=2)
    assert [s.rollout_id for s in split.fresh] == ["ro-fresh", "ro-fresh", "ro-unknown"]
    assert split.stale_rollouts == ["ro-old"]
    assert split.max_lag == 2


def test_max_lag_zero_is_strictly_on_policy() -> None:
    split = split_stale([sample("a", [4]), sample("b", [5])], current_version=5, max_lag=0)
    assert ([s.rollout_id for s in split.fresh], split.stale_rollouts, split.max_lag) == (["b"], ["a"], 0)


def test_a_negative_bound_is_refused() -> None:
    with pytest.raises(ValueError, match="max_lag must be >= 0"):
        split_stale([], current_version=1, max_lag=-1)


# ---------------------------------------------------------------------- beyond one version
def test_two_versions_old_rollouts_are_kept_at_lag_two_and_weighted_by_their_behaviour_logprobs() -> None:
    """``max_policy_lag=2`` (the default) keeps a rollout sampled two updates ago instead of
    dropping it; the update weighs each of its tokens by w = min(π_prox / π_behav, C), with
    π_behav the logprob the engine recorded when it sampled the token (``Sample.logprobs``)
    and π_prox the trainer's policy at the start of the update."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("peft")
    from agentbolt.algorithms.grpo.config import GRPOConfig
    from agentbolt.algorithms.grpo.update import PolicyUpdate
    from agentbolt.models import tiny_model
    from agentbolt.training.lora import LoraSettings
    from agentbolt.training.policy import Policy

    model, tok = tiny_model(seed=1, vocab="bytes", hidden=32, n_layers=1)
    policy = Policy(model, tok, lora=LoraSettings(r=4, alpha=8, target_modules=["q_proj", "v_proj"]))

    def drawn(rollout_id: str, prompt: list[int], response: list[int], advantage: float) -> Sample:
        ids = prompt + response
        with torch.no_grad():
            lp = policy.inference_logprobs(torch.tensor([ids]), torch.ones(1, len(ids), dtype=torch.long))[0]
        mask = [0] * len(prompt) + [1] * len(response)
        behaviour = [float(x) if m else 0.0 for x, m in zip(lp.tolist(), mask, strict=True)]
        return Sample(rollout_id, "at-1", ids, mask, behaviour, [0 if m else None for m in mask], ["c"], advantage)

    old = [drawn("ro-long", [5, 6, 7], [8, 9, 10], 1.0), drawn("ro-short", [20, 21], [22, 23], -1.0)]
    # the engine recorded π_behav = 1e-6 for one token, far below what the policy gives it: its w hits the cap
    old[0].logprobs[4] = math.log(1e-6)
    assert GRPOConfig().max_policy_lag == 2
    assert split_stale(old, current_version=2, max_lag=1).stale_rollouts == ["ro-long", "ro-short"]
    split = split_stale(old, current_version=2, max_lag=2)
    assert ([s.rollout_id for s in split.fresh], split.max_lag) == (["ro-long", "ro-short"], 2)

    cfg = GRPOConfig(learning_rate=5e-2, max_grad_norm=None)
    update = PolicyUpdate(policy, cfg)
    for version in (0, 1):  # two updates on other rollouts: versions 1 and 2
        update.step([drawn(f"ro-{version}", [40, 41], [42, 43], 1.0), drawn(f"ro-{version}b", [50], [51], -1.0)],
                    current_version=version)
    weights = []
    for s in split.fresh:
        ids = torch.tensor([s.token_ids])
        prox = policy.inference_logprobs(ids, torch.ones_like(ids))[0]
        weights += [min(math.exp(float(p) - b), cfg.is_cap)
                    for p, b, m in zip(prox.tolist(), s.logprobs, s.loss_mask, strict=True) if m]
    assert max(weights) == cfg.is_cap  # the token the engine found unlikely
    assert any(abs(w - 1.0) > 1e-4 for w in weights if w < cfg.is_cap)  # the policy moved since sampling
    stats = update.step(split.fresh, current_version=2)
    assert stats.stale_samples == 2
    assert stats.importance_weight_mean == pytest.approx(sum(weights) / len(weights), rel=1e-4)


# ---------------------------------------------------------------------- admission
def test_async_never_keeps_more_groups_in_flight_than_the_lag_can_train() -> None:
    from agentbolt.algorithms.grpo.config import GRPOConfig

    # (max_policy_lag + 1) batches at most: one more would be too stale by construction
    with pytest.raises(ValueError, match="raise max_policy_lag"):
        GRPOConfig(schedule="async", tasks_per_step=4, max_policy_lag=1, groups_in_flight=12)
    assert GRPOConfig(schedule="async", tasks_per_step=4, max_policy_lag=2, groups_in_flight=12).in_flight == 12
    # the default, 2 batches, within the bound: a lag of 0 keeps one batch (trained on as it was sampled)
    assert GRPOConfig(schedule="async", tasks_per_step=4).in_flight == 8
    assert GRPOConfig(schedule="async", tasks_per_step=4, max_policy_lag=0).in_flight == 4
    assert GRPOConfig(schedule="sync", tasks_per_step=4, max_policy_lag=0, groups_in_flight=12).in_flight == 4


@pytest.mark.parametrize("max_lag", [0, 1, 2])
async def test_groups_lasting_alike_are_trained_within_the_lag_at_the_admission_bound(max_lag: int) -> None:
    """At the bound, groups that finish in the order they started (all equally long) are
    each handed out at most ``max_policy_lag`` versions after the one they started under."""
    from agentbolt.algorithms.base import AlgorithmContext
    from agentbolt.algorithms.grpo.config import GRPOConfig
    from agentbolt.algorithms.grpo.groups import GroupScheduler
    from agentbolt.store.memory import MemoryStore
    from agentbolt.types import AttemptStatus

    cfg = GRPOConfig(schedule="async", tasks_per_step=2, group_size=2, max_policy_lag=max_lag,
                     groups_in_flight=(max_lag + 1) * 2)
    store = MemoryStore()
    tasks = [{"q": i} for i in range(5)]
    scheduler = GroupScheduler(AlgorithmContext(store, tasks), tasks, group_size=2, in_flight=cfg.in_flight, timeout=10)
    lags, attempts = [], {}
    for version in range(8):
        await scheduler.fill(version)
        attempts.update({c.rollout.rollout_id: c.attempt.attempt_id for c in await store.claim_rollouts("hand", 100)})
        for group in scheduler.pending[: cfg.tasks_per_step]:  # the oldest finish first
            for rid in group.rollout_ids:
                await store.update_attempt(rid, attempts.pop(rid), status=AttemptStatus.SUCCEEDED)
        lags += [version - g.enqueued_version for g in await scheduler.next_batch(cfg.tasks_per_step, version)]
    assert max(lags) == max_lag and len(lags) == 16
