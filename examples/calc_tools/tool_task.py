"""The function-calling calc task: an OpenAI Agents SDK agent whose calculator is a
function tool, graded on its final answer.

The agent is written the way the SDK's users write one: ``Agent(tools=[calculate])`` with
the SDK's default model class, ``OpenAIResponsesModel`` — so every model call goes to
``POST …/v1/responses`` at agentbolt's gateway, which templates it for the policy, parses
the model's tool call into a ``function_call`` item and records the call with its token
ids. The only agentbolt-specific line builds the client inside the rollout from
``llm.endpoint`` / ``llm.api_key`` (each attempt has its own gateway URL).

The problems are the calc example's (``examples/calc/task.py``): "Sam buys 41 packs of 23
cards and then finds 15 more cards..."; a worked example is given as earlier turns (a
user question, a ``calculate`` call, its output, the answer). Reward: 1 for a correct
final answer, +0.1 when the agent called the calculator with an expression it could
evaluate. Importing this module does no work (runner processes import it).
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "calc"))

from task import CalcError, parse_answer, safe_eval
from task import heldout_set as _heldout_set
from task import train_set as _train_set

import agentbolt

__all__ = ["CALL_BONUS", "DIFFICULTY", "EXAMPLES", "INSTRUCTIONS", "MAX_TOKENS", "MAX_TURNS", "Outcome", "calc_tools_agent", "example_items",
           "heldout_set", "run_episode", "train_set"]

DIFFICULTY = "multi"
"""The calc problems used (see ``examples/calc/task.py``): a multiplication and an addition
or subtraction in words ("Sam buys 41 packs of 23 cards and then finds 15 more cards..."),
chosen with ``probe.py`` so that the untrained model succeeds sometimes but not always:
held-out, untrained, 32 problems — ``word`` (one multiplication): 93.8 % greedy, too easy;
``multi``: 31.2 % greedy, 3.1 % sampled at T=1 (well-formed calls: 100 % / 40.6 %)."""
MAX_TOKENS = 48
"""Per model call: a call (about 25 tokens in SmolLM2's format) or an answer."""
MAX_TURNS = 3
"""Model calls per episode (the SDK's ``max_turns``): call, answer, one spare."""
CALL_BONUS = 0.1
INSTRUCTIONS = ("You solve math word problems. Call the calculate function with the arithmetic expression "
                "that answers the question, then reply with ANSWER: <number>.")
EXAMPLES = {
    "mul": ("What is 23 * 41?", "23 * 41", "943"),
    "word": ("A pack has 23 pens. How many pens are in 41 packs?", "23 * 41", "943"),
    "multi": ("Ann buys 41 packs of 23 pens and loses 15 pens. How many pens does she have?", "41 * 23 - 15", "928"),
}
"""The worked example per difficulty: a question like the task's, its calculate call, the result."""


def train_set(n: int, difficulty: str = DIFFICULTY) -> list[dict[str, Any]]:
    """Training problems (the calc example's, at ``difficulty``)."""
    return _train_set(n, difficulty)  # type: ignore[arg-type]


def heldout_set(n: int, difficulty: str = DIFFICULTY) -> list[dict[str, Any]]:
    """Held-out problems (never among the training ones)."""
    return _heldout_set(n, difficulty)  # type: ignore[arg-type]


def example_items(question: str, difficulty: str = DIFFICULTY) -> list[dict[str, Any]]:
    """The Responses input: a worked example as earlier turns, then ``question``."""
    example, expression, result = EXAMPLES[difficulty]
    return [
        {"role": "user", "content": example},
        {"type": "function_call", "call_id": "call_example", "name": "calculate",
         "arguments": json.dumps({"expression": expression})},
        {"type": "function_call_output", "call_id": "call_example", "output": result},
        {"role": "assistant", "content": f"ANSWER: {result}"},
        {"role": "user", "content": question},
    ]


@dataclass
class Outcome:
    """What one episode did."""

    answer: float | None = None
    expressions: list[str] = field(default_factory=list)
    call_ok: bool = False
    error: str | None = None

    def correct(self, task: dict[str, Any]) -> bool:
        return self.answer is not None and abs(self.answer - float(task["answer"])) < 1e-6

    def reward(self, task: dict[str, Any]) -> float:
        return (1.0 if self.correct(task) else 0.0) + (CALL_BONUS if self.call_ok else 0.0)


async def run_episode(task: dict[str, Any], client: Any, model: str, difficulty: str = DIFFICULTY,
                      **settings: Any) -> Outcome:
    """Run the agent on ``task`` with an ``openai.AsyncOpenAI`` ``client`` (the SDK's
    Responses model); the model's mistakes (a call to an unknown tool, too many turns)
    end the episode with what it got so far, never an exception."""
    from agents import (
        Agent,
        ModelSettings,
        OpenAIResponsesModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from agents.exceptions import AgentsException

    set_tracing_disabled(True)  # the SDK's trace export goes to OpenAI; agentbolt records the calls
    _quiet_model_behaviour_errors()
    outcome = Outcome()

    @function_tool
    def calculate(expression: str) -> str:
        """Evaluate an arithmetic expression with numbers, + - * / and parentheses."""
        outcome.expressions.append(expression)
        try:
            value = safe_eval(expression)
        except CalcError as err:
            return f"Error: {err}"
        outcome.call_ok = True
        return str(value.numerator) if value.denominator == 1 else f"{float(value):.6g}"

    agent = Agent(name="calc", instructions=INSTRUCTIONS, tools=[calculate],
                  model=OpenAIResponsesModel(model=model, openai_client=client),
                  model_settings=ModelSettings(tool_choice="calculate", **settings))
    # tool_choice="calculate" makes the first answer a call of it: the gateway writes the
    # call's opening up to the value of its one argument (`{"expression": "`), the model
    # writes the expression and closes the call; the SDK then resets tool_choice to "auto"
    # (Agent.reset_tool_choice), so the second answer is free text
    try:
        result = await Runner.run(agent, example_items(str(task["question"]), difficulty), max_turns=MAX_TURNS)
        outcome.answer = parse_answer(str(result.final_output or ""))
    except AgentsException as err:  # the model's behaviour, graded as a wrong answer
        outcome.error = type(err).__name__
    return outcome


class _ModelBehaviourErrors(logging.Filter):
    """Drops the SDK's bare "Error getting response" line for the model's own mistakes
    (an answer cut at ``max_tokens`` — ``response.incomplete`` — or a call of an unknown
    tool): the SDK raises ``ModelBehaviorError`` right after, and :func:`run_episode`
    grades that episode as a wrong answer (``Outcome.error``; the ``model_error`` reward
    dimension on the dashboard counts them). Failures of the service
    (connection errors, 5xx) are not model behaviour: they still log, and fail the rollout."""

    def filter(self, record: logging.LogRecord) -> bool:
        from agents.exceptions import ModelBehaviorError

        # the SDK logs inside its ``except`` block, without the exception when it redacts
        # model data (its default): the exception being handled is this thread's
        error = record.exc_info[1] if record.exc_info else sys.exc_info()[1]
        return not isinstance(error, ModelBehaviorError)


def _quiet_model_behaviour_errors() -> None:
    sdk_log = logging.getLogger("openai.agents")
    if not any(isinstance(f, _ModelBehaviourErrors) for f in sdk_log.filters):
        sdk_log.addFilter(_ModelBehaviourErrors())


@agentbolt.rollout
async def calc_tools_agent(task: dict[str, Any], llm: Any) -> float | None:
    """The agent as agentbolt runs it (``llm``: the rollout's gateway LLM)."""
    import openai

    settings = {"max_tokens": MAX_TOKENS, **dict(llm.sampling_parameters)}
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        outcome = await run_episode(task, client, llm.model, **settings)
    value = outcome.reward(task)
    if agentbolt.current_context() is None:
        return value
    agentbolt.emit_reward(value, correct=float(outcome.correct(task)), call_ok=float(outcome.call_ok),
                          model_error=float(outcome.error is not None))  # e.g. cut at max_tokens: on the dashboard
    return None
