"""Supervised fine-tuning: :class:`SFT` (the algorithm, :mod:`.algorithm`) and its parts.

* :mod:`.selection` — which rollouts to learn from (succeeded, reward bar, top-k per task).
* :mod:`.chat_data` — chat records → token ids, labels on assistant tokens only (torch-free).
* :mod:`.update` — the optimisation loop (torch).
* :mod:`.config` — :class:`SFTConfig`.
"""

from agentbolt.algorithms.sft.algorithm import SFT, SFTResult
from agentbolt.algorithms.sft.chat_data import (
    ChatData,
    ChatSample,
    ChatTemplateError,
    encode_record,
    encode_records,
)
from agentbolt.algorithms.sft.config import SFTConfig
from agentbolt.algorithms.sft.selection import (
    NoTrainingDataError,
    Selection,
    dedupe_records,
    load_records,
    select_rollouts,
)

__all__ = [
    "SFT",
    "ChatData",
    "ChatSample",
    "ChatTemplateError",
    "NoTrainingDataError",
    "SFTConfig",
    "SFTResult",
    "Selection",
    "dedupe_records",
    "encode_record",
    "encode_records",
    "load_records",
    "select_rollouts",
]
