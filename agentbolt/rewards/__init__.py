"""Reward sources beyond the agent's own: LLM judges (:mod:`agentbolt.rewards.judge`) and
the seam through which GRPO scores a whole group after its rollouts finished
(:mod:`agentbolt.rewards.group`)."""

from agentbolt.rewards.group import GroupReward, GroupScoring, NoGroupScoredError, score_groups

__all__ = ["GroupReward", "GroupScoring", "NoGroupScoredError", "score_groups"]
