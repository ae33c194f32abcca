"""A scripted model for real harnesses: which reply it "writes" depends on the
conversation so far, not on the order of calls, so a harness's side calls (a title, a
summary) and retries do not shift its script.

The reply to a prompt comes from the first ``side`` script whose key is in the prompt
text (a sub-agent's system prompt, a title request), else from ``steps``: the step
numbered by the turns already in the prompt — its assistant turns, plus each occurrence
of a ``markers`` text (a harness that drops a reply from its history and says why) — the
last step repeating. A ``side`` script is one reply, or steps numbered the same way.
Tokens are real (a tokenizer's ids, the end-of-turn token, logprobs), as
the local engine gives them, through the gateway's chat templating and tool-call parsing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from gateway.scripted_engine import ScriptedEngine

ASSISTANT_TURN = "<|im_start|>assistant"


class PlaybookEngine(ScriptedEngine):
    name = "playbook"

    def __init__(self, tokenizer: Any, steps: list[str], *, side: Mapping[str, str | list[str]] | None = None,
                 markers: tuple[str, ...] = (), tool_parser: str | None = "hermes") -> None:
        super().__init__(tokenizer, steps, tool_parser=tool_parser)
        self.steps = list(steps)
        self.side = {key: [r] if isinstance(r, str) else list(r) for key, r in (side or {}).items()}
        self.markers = markers
        self.texts: list[str] = []

    def _next(self, body: dict[str, Any]) -> tuple[list[int], str, list[int]]:
        prompt = body["prompt"]
        assert isinstance(prompt, list) and all(isinstance(t, int) for t in prompt), "the gateway sends token ids"
        self.prompts.append(prompt)
        self.bodies.append(body)
        text = self.tokenizer.decode(prompt)
        self.texts.append(text)
        steps = next((script for key, script in self.side.items() if key in text), self.steps)
        turn = max(0, text.count(ASSISTANT_TURN) - 1)  # the last one is the generation prompt
        turn += sum(text.count(marker) for marker in self.markers)
        reply = steps[min(turn, len(steps) - 1)]
        ids = list(self.tokenizer(reply, add_special_tokens=False)["input_ids"])
        return prompt, reply, [*ids, self.tokenizer.eos_token_id]
