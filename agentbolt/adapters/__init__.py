"""Adapters: turn the spans of rollouts into training data.

* :class:`TripletAdapter` — one (prompt, response, reward) :class:`Triplet` per model
  call, with the engine's token ids and logprobs (RL); :func:`require_token_ids`.
* :class:`MessagesAdapter` — OpenAI chat fine-tuning records (SFT); :func:`to_jsonl`.
* ``agent_match`` (both) — a regular expression on the agent name that picks which
  agents' calls become training data in a multi-agent system (:mod:`.match`).
* :func:`extract_model_calls` — the parsed model calls underneath both (:mod:`.calls`).

Reward policies are described in :mod:`.rewards`; ``docs/adapters.md`` has the whole story.
"""

from agentbolt.adapters.calls import ModelCall, extract_model_calls, is_model_call
from agentbolt.adapters.match import AgentMatcher, agent_matcher
from agentbolt.adapters.messages import ChatRecord, MessagesAdapter, to_jsonl
from agentbolt.adapters.rewards import (
    REWARD_POLICIES,
    RewardPolicy,
    assign_rewards,
    final_reward,
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
    "REWARD_POLICIES",
    "AgentMatcher",
    "ChatRecord",
    "MessagesAdapter",
    "MissingTokenIdsError",
    "ModelCall",
    "RewardPolicy",
    "Triplet",
    "TripletAdapter",
    "TripletPrompt",
    "TripletResponse",
    "agent_matcher",
    "assign_rewards",
    "extract_model_calls",
    "final_reward",
    "is_model_call",
    "require_token_ids",
    "to_jsonl",
]
