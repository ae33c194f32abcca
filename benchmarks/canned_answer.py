"""The canned chat completion the zero-latency fake engines of the benchmarks answer
with: vLLM-style token ids and chosen-token logprobs, so recording does its full work."""

from __future__ import annotations

import json

MODEL = "bench-model"

PROMPT_IDS = list(range(100, 160))
ANSWER_IDS = list(range(200, 216))
CHAT_ANSWER = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL,
        "prompt_token_ids": PROMPT_IDS,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "the answer is 42, as computed"},
                "finish_reason": "stop",
                "token_ids": ANSWER_IDS,
                "logprobs": {
                    "content": [
                        {"token": f"t{i}", "logprob": -0.01 * (i + 1), "bytes": None, "top_logprobs": []}
                        for i in range(len(ANSWER_IDS))
                    ]
                },
            }
        ],
        "usage": {"prompt_tokens": len(PROMPT_IDS), "completion_tokens": len(ANSWER_IDS), "total_tokens": 76},
    }
).encode()
