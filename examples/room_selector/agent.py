"""The room-selector agent: one chat call with the prompt template, graded exactly.

The prompt template (a :class:`agentbolt.PromptTemplate`, the resource APO optimises)
has two fields, ``{rooms}`` and ``{request}`` (see ``task.py``). The agent fills them,
asks the model once through the ``openai`` client — which agentbolt instruments, so the
call (prompt and reply) is recorded in the rollout for APO's critic to read — and
returns the reward: 1.0 if the reply names the right room, else 0.0.

:data:`INITIAL_PROMPT` is a plausible but weak starting point: it says nothing about the
answer format (``ROOM: <name>``) and nothing about checking every constraint, which is
what a good critic should find.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from task import grade

import agentbolt

__all__ = ["INITIAL_PROMPT", "MAX_TOKENS", "room_agent"]

INITIAL_PROMPT = (
    "You help people book meeting rooms.\n\n"
    "Rooms:\n{rooms}\n\n"
    "Request: {request}\n\n"
    "Which room should they book?"
)

MAX_TOKENS = 256
"""``max_tokens`` of the agent's call unless the LLM resource's sampling parameters say otherwise."""


def _openai() -> Any:
    try:
        import openai
    except ImportError:
        raise ImportError(
            "the room-selector agent calls its model with the `openai` client: run `pip install openai` "
            "(or `pip install 'agentbolt[dev]'`)"
        ) from None
    return openai


@agentbolt.rollout
async def room_agent(
    task: dict[str, Any], llm: agentbolt.LLM, prompt_template: agentbolt.PromptTemplate | str | None = None
) -> float:
    """Ask ``llm`` which room fits, with ``prompt_template`` filled with the task; return the reward."""
    if prompt_template is None:
        raise ValueError("room_agent needs a prompt template: publish one as the resource 'prompt_template' "
                         "(APO does it with its initial_prompt)")
    template = prompt_template if isinstance(prompt_template, str) else prompt_template.template
    prompt = template.format(rooms=task["rooms"], request=task["request"])
    sampling = {"max_tokens": MAX_TOKENS, "temperature": 0.0, **dict(llm.sampling_parameters)}
    openai = _openai()
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=3) as client:
        response = await client.chat.completions.create(
            model=llm.model, messages=[{"role": "user", "content": prompt}], **sampling
        )
    return grade(response.choices[0].message.content or "", task)
