"""A scripted model for real harnesses: which reply it "writes" depends on the
conversation so far, not on the order of calls, so a harness's side calls (a title, a
summary) and retries do not shift its script.

The reply to a prompt is the first ``side`` reply whose key is in the prompt text, else
the step of ``steps`` numbered by the assistant turns already in the prompt (the last
step repeats). Tokens are real (a tokenizer's ids, the end-of-turn token, logprobs), as
the local engine gives them, through the gateway's chat templating and tool-call parsing.
"""

from __future__ import annotations

from typing import Any

from gateway.scripted_engine import ScriptedEngine

ASSISTANT_TURN = "<|im_start|>assistant"


class PlaybookEngine(ScriptedEngine):
    name = "playbook"

    def __init__(self, tokenizer: Any, steps: list[str], *, side: dict[str, str] | None = None,
                 tool_parser: str | None = "hermes") -> None:
        super().__init__(tokenizer, steps, tool_parser=tool_parser)
        self.steps = list(steps)
        self.side = dict(side or {})
        self.texts: list[str] = []

    def _next(self, body: dict[str, Any]) -> tuple[list[int], str, list[int]]:
        prompt = body["prompt"]
        assert isinstance(prompt, list) and all(isinstance(t, int) for t in prompt), "the gateway sends token ids"
        self.prompts.append(prompt)
        self.bodies.append(body)
        text = self.tokenizer.decode(prompt)
        self.texts.append(text)
        reply = next((r for key, r in self.side.items() if key in text), None)
        if reply is None:
            turn = max(0, text.count(ASSISTANT_TURN) - 1)  # the last one is the generation prompt
            reply = self.steps[min(turn, len(self.steps) - 1)]
        ids = list(self.tokenizer(reply, add_special_tokens=False)["input_ids"])
        return prompt, reply, [*ids, self.tokenizer.eos_token_id]
