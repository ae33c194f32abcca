"""Adapters: turn the spans of rollouts into training data.

* :class:`SampleAdapter` — the RL adapter: token-level :class:`Sample` objects merged by
  lineage (exact token prefixes; why a sample started: :mod:`.lineage`), with loss masks,
  sampling-time logprobs, policy versions and the rollout's reward; what GRPO trains on,
  ``Trainer.dev`` previews and ``agentbolt store export --samples rl`` writes (:mod:`.samples`).
* :class:`TripletAdapter` — one (prompt, response, reward) :class:`Triplet` per model
  call, with the engine's token ids and logprobs (a per-call view for your own RL
  code); :func:`require_token_ids`.
* :class:`MessagesAdapter` — OpenAI chat fine-tuning records (SFT); :func:`to_jsonl`.
* ``agent_match`` (all three) — a regular expression on the agent name that picks which
  agents' calls become training data in a multi-agent system (:mod:`.match`).
* :func:`extract_model_calls` — the parsed model calls underneath all three (:mod:`.calls`);
  :func:`parse_attempts` parses them once per attempt for readers that use them twice (:mod:`.attempts`).

Reward rules are described in :mod:`.rewards`; ``docs/adapters.md`` has the whole story.
"""

from agentbolt.adapters.attempts import AttemptCalls, parse_attempts
from agentbolt.adapters.calls import ModelCall, extract_model_calls, is_model_call
from agentbolt.adapters.lineage import BreakCause, Origin
from agentbolt.adapters.match import AgentMatcher, agent_matcher
from agentbolt.adapters.messages import ChatRecord, MessagesAdapter, to_jsonl
from agentbolt.adapters.rewards import (
    REWARD_RULES,
    RewardRule,
    assign_rewards,
    final_reward,
)
from agentbolt.adapters.samples import (
    MergeCounts,
    RolloutSamples,
    Sample,
    SampleAdapter,
    SampleCall,
    agent_counts,
    build_samples,
)
from agentbolt.adapters.triplets import (
    MissingTokenIdsError,
    Triplet,
    TripletAdapter,
    TripletPrompt,
    TripletResponse,
    require_token_ids,
)

__all__ = [
    "REWARD_RULES",
    "AgentMatcher",
    "AttemptCalls",
    "BreakCause",
    "ChatRecord",
    "MergeCounts",
    "MessagesAdapter",
    "MissingTokenIdsError",
    "ModelCall",
    "Origin",
    "RewardRule",
    "RolloutSamples",
    "Sample",
    "SampleAdapter",
    "SampleCall",
    "Triplet",
    "TripletAdapter",
    "TripletPrompt",
    "TripletResponse",
    "agent_counts",
    "agent_matcher",
    "assign_rewards",
    "build_samples",
    "extract_model_calls",
    "final_reward",
    "is_model_call",
    "parse_attempts",
    "require_token_ids",
    "to_jsonl",
]
