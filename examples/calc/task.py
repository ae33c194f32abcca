"""The calc task: a math agent that may use a calculator, graded on its final answer.

The protocol is pure logic (no client, no model), so it is tested on its own and driven
the same way by the agent (:func:`calc_agent`, through an OpenAI-compatible endpoint)
and by the probe (``probe.py``, straight through a local engine):

1. turn 1 — the model sees the question and should reply ``CALC(<expression>)``;
2. the episode evaluates the expression safely (:func:`safe_eval`) and adds a user
   message ``Result: N. Now give the final answer as ANSWER: <number>.``;
3. turn 2 — the model answers. At most :data:`MAX_MODEL_CALLS` calls per episode.

A reply without a call is graded as a direct answer. Answers are read leniently: the
number after the last ``ANSWER:``, else the last number of the reply.

Importing this module does no work (runner processes import it).
"""

from __future__ import annotations

import ast
import random
import re
import zlib
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

import agentbolt

__all__ = [
    "CALL_BONUS",
    "DEFAULT_DIFFICULTY",
    "DEFAULT_PROTOCOL",
    "HELDOUT_SEED",
    "MAX_MODEL_CALLS",
    "MAX_TOKENS",
    "PROTOCOLS",
    "TRAIN_SEED",
    "CalcCall",
    "CalcEpisode",
    "CalcError",
    "Difficulty",
    "Protocol",
    "calc_agent",
    "heldout_set",
    "make_dataset",
    "parse_answer",
    "parse_call",
    "reward",
    "safe_eval",
    "train_set",
]

MAX_MODEL_CALLS = 2
"""Model calls per episode: one to call the calculator, one to answer."""

MAX_TOKENS = 32
"""``max_tokens`` per model call: a call or an answer is a dozen tokens."""

CALL_BONUS = 0.1
"""Shaping reward for a well-formed calculator call (an expression that evaluates)."""

TRAIN_SEED = 0
HELDOUT_SEED = 1
_HELDOUT_BUCKETS = 5  # 1 problem in 5 belongs to the held-out split, the rest to train

Difficulty = Literal["mul", "word", "multi"]
DEFAULT_DIFFICULTY: Difficulty = "multi"


# ----------------------------------------------------------------------------- safe evaluator
class CalcError(ValueError):
    """An expression the calculator refuses or cannot compute (the message says why)."""


_MAX_EXPR_CHARS = 120
_MAX_MAGNITUDE = Fraction(10) ** 15
_BINOPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b}


def safe_eval(expr: str) -> Fraction:
    """Evaluate ``+ - * / ( )`` over numbers exactly; anything else raises :class:`CalcError`.

    Never ``eval``: the expression is parsed with :mod:`ast` and only number literals,
    the four operators and unary signs are walked. Results beyond 1e15 are refused.
    """
    if len(expr) > _MAX_EXPR_CHARS:
        raise CalcError(f"expression longer than {_MAX_EXPR_CHARS} characters")
    try:
        tree = ast.parse(expr.strip(), mode="eval")
    except SyntaxError:
        raise CalcError(f"not an arithmetic expression: {expr!r}") from None
    return _walk(tree.body)


def _walk(node: ast.AST) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = Fraction(node.value)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _walk(node.operand)
        value = -inner if isinstance(node.op, ast.USub) else inner
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINOPS:
        value = _BINOPS[type(node.op)](_walk(node.left), _walk(node.right))
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        left, right = _walk(node.left), _walk(node.right)
        if right == 0:
            raise CalcError("division by zero")
        value = left / right
    else:
        raise CalcError(f"only numbers, + - * / and parentheses are allowed, not {type(node).__name__}")
    if abs(value) > _MAX_MAGNITUDE:
        raise CalcError("number too large (over 1e15)")
    return value


def _number_text(value: Fraction) -> str:
    if value.denominator == 1:
        return str(value.numerator)
    return f"{float(value):.6g}"


# ----------------------------------------------------------------------------- parsing
@dataclass(frozen=True)
class CalcCall:
    """A calculator call found in a reply: its expression and value, or why it failed."""

    expression: str
    value: Fraction | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.value is not None


_CALL_START = re.compile(r"calc(?:ulate|ulator)?\s*[(\[]", re.IGNORECASE)
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


def _normalize_expression(text: str) -> str:
    text = _THOUSANDS.sub("", text)
    text = text.replace("×", "*").replace("÷", "/").replace("−", "-")
    text = re.sub(r"(?<=[\d)\s])[xX](?=[\s\d(])", "*", text)  # 12 x 3
    return text.strip().rstrip("=").strip()


def parse_call(reply: str) -> CalcCall | None:
    """The first ``CALC(<expr>)`` (also ``calc[...]``, ``Calculate(...)``) of a reply.

    Lenient: case-insensitive, ``x``/``×``/``÷`` and ``1,234`` accepted, a trailing ``=``
    dropped, and a missing final ``)`` tolerated (the reply may be cut by ``max_tokens``).
    Returns None when the reply makes no call.
    """
    match = _CALL_START.search(reply)
    if match is None:
        return None
    closing = ")" if reply[match.end() - 1] == "(" else "]"
    depth, end = 0, len(reply)
    for i in range(match.end(), len(reply)):
        ch = reply[i]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                end = i
                break
            depth -= 1
        elif ch == "\n" and closing == ")":
            end = i
            break
    expression = _normalize_expression(reply[match.end():end])
    try:
        return CalcCall(expression, value=safe_eval(expression))
    except CalcError as err:
        return CalcCall(expression, error=str(err))


_NUMBER = r"-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_ANSWER = re.compile(r"answer\s*(?:is)?\s*[:=]?\s*\$?\s*(" + _NUMBER + ")", re.IGNORECASE)
_ANY_NUMBER = re.compile(_NUMBER)


def parse_answer(reply: str) -> float | None:
    """The final answer of a reply: the number after the last ``ANSWER:``, else the
    last number in it; None when it holds no number."""
    found = _ANSWER.findall(reply) or _ANY_NUMBER.findall(reply)
    return float(found[-1].replace(",", "")) if found else None


# ----------------------------------------------------------------------------- problems
_WORD_TEMPLATES = [
    "A box holds {a} apples. How many apples are in {b} boxes?",
    "A ticket costs {a} dollars. How much do {b} tickets cost?",
    "A train travels {a} km each hour. How far does it travel in {b} hours?",
    "A shelf has {a} books. How many books are on {b} shelves?",
    "A farmer plants {b} rows of {a} trees. How many trees does he plant?",
    "Each bag weighs {a} grams. What do {b} bags weigh in grams?",
]
_MULTI_TEMPLATES = [
    ("Sam buys {b} packs of {a} cards and then finds {c} more cards. How many cards does he have?", "+"),
    ("A school has {b} classes of {a} pupils, and {c} pupils are absent. How many pupils are present?", "-"),
    ("A bakery makes {a} loaves a day for {b} days and sells all but {c}. How many loaves does it sell?", "-"),
]


def _problem(rng: random.Random, difficulty: Difficulty) -> tuple[str, str]:
    """A question and the expression that answers it."""
    a, b = rng.randint(12, 99), rng.randint(12, 99)
    if difficulty == "mul":
        return f"What is {a} * {b}?", f"{a} * {b}"
    if difficulty == "word":
        return rng.choice(_WORD_TEMPLATES).format(a=a, b=b), f"{a} * {b}"
    if difficulty == "multi":
        template, op = rng.choice(_MULTI_TEMPLATES)
        c = rng.randint(11, 99)
        return template.format(a=a, b=b, c=c), f"{a} * {b} {op} {c}"
    raise ValueError(f"unknown difficulty {difficulty!r}; use one of 'mul', 'word', 'multi'")


def _split_of(question: str) -> str:
    return "heldout" if zlib.crc32(question.encode()) % _HELDOUT_BUCKETS == 0 else "train"


def make_dataset(n: int, seed: int, difficulty: Difficulty = DEFAULT_DIFFICULTY,
                 split: Literal["train", "heldout"] | None = None) -> list[dict[str, Any]]:
    """``n`` distinct problems drawn with ``seed``: ``{"id", "question", "answer", "expression"}``
    (``expression`` is a reference solution for tests and warm starts; the agent never sees it).

    ``split`` keeps only problems of that split (a fixed hash of the question), so a
    train and a held-out set never share a question whatever their sizes and seeds.
    """
    rng = random.Random(f"calc-{difficulty}-{seed}")
    items: list[dict[str, Any]] = []
    seen: set[str] = set()
    while len(items) < n:
        question, expression = _problem(rng, difficulty)
        if question in seen or (split is not None and _split_of(question) != split):
            continue
        seen.add(question)
        items.append({"id": f"{difficulty}-{seed}-{len(items)}", "question": question,
                      "answer": int(safe_eval(expression)), "expression": expression})
    return items


def train_set(n: int, difficulty: Difficulty = DEFAULT_DIFFICULTY) -> list[dict[str, Any]]:
    """The training problems (seed :data:`TRAIN_SEED`, train split)."""
    return make_dataset(n, TRAIN_SEED, difficulty, split="train")


def heldout_set(n: int, difficulty: Difficulty = DEFAULT_DIFFICULTY) -> list[dict[str, Any]]:
    """The held-out problems (seed :data:`HELDOUT_SEED`, held-out split)."""
    return make_dataset(n, HELDOUT_SEED, difficulty, split="heldout")


# ----------------------------------------------------------------------------- protocol
class Protocol(BaseModel):
    """The wording of an episode: system prompt, optional worked example given as
    earlier turns, and the tool-result message."""

    model_config = ConfigDict(frozen=True)

    system: str
    example: tuple[str, str, str, str] | None = None  # question, call reply, result message, answer reply
    result: str = "Result: {result}. Now give the final answer as ANSWER: <number>."
    error: str = "Error: {error}. Now give the final answer as ANSWER: <number>."

    def opening(self, question: str) -> list[dict[str, str]]:
        messages = [{"role": "system", "content": self.system}]
        if self.example is not None:
            q, call, result, answer = self.example
            messages += [{"role": "user", "content": q}, {"role": "assistant", "content": call},
                         {"role": "user", "content": result}, {"role": "assistant", "content": answer}]
        return messages + [{"role": "user", "content": question}]


_SYSTEM = ("You solve math problems with a calculator. First reply with only CALC(<expression>), "
           "for example CALC(12 * 34). You will get the result. Then reply with ANSWER: <number>.")
_EXAMPLE = ("A pack has 23 pens. How many pens are in 41 packs?", "CALC(23 * 41)",
            "Result: 943. Now give the final answer as ANSWER: <number>.", "ANSWER: 943")

_TWO_STEP_EXAMPLE = ("Ann buys 41 packs of 23 pens and loses 15 pens. How many pens does she have?",
                     "CALC(41 * 23 - 15)", "Result: 928. Now give the final answer as ANSWER: <number>.",
                     "ANSWER: 928")

PROTOCOLS: dict[str, Protocol] = {
    "system": Protocol(system=_SYSTEM + " Example: user: What is 23 * 41? assistant: CALC(23 * 41) "
                       "user: Result: 943. assistant: ANSWER: 943"),
    "fewshot": Protocol(system=_SYSTEM, example=_EXAMPLE),
    "fewshot2": Protocol(system=_SYSTEM, example=_TWO_STEP_EXAMPLE),
}
"""Named wordings the probe compares; ``DEFAULT_PROTOCOL`` is the chosen one. Untrained
SmolLM2-135M, 64 held-out problems (greedy / sampled at T=1.0 success): fewshot + word
100 % / 16 % (too easy); fewshot + multi 0 % / 0 %; system + word 0 % / 0 %;
fewshot2 + multi 31 % / 5 % (chosen: the model must pick the operands and the sign)."""

DEFAULT_PROTOCOL = PROTOCOLS["fewshot2"]


@dataclass
class CalcEpisode:
    """One problem, driven turn by turn: :meth:`messages` for the next model call,
    :meth:`consume` for its reply, until :attr:`done`."""

    task: dict[str, Any]
    protocol: Protocol = DEFAULT_PROTOCOL
    history: list[dict[str, str]] = field(default_factory=list)
    replies: list[str] = field(default_factory=list)
    call: CalcCall | None = None
    answer: float | None = None
    done: bool = False

    def __post_init__(self) -> None:
        if not self.history:
            self.history = self.protocol.opening(str(self.task["question"]))

    def messages(self) -> list[dict[str, str]]:
        """The chat messages of the next model call (a copy)."""
        if self.done:
            raise RuntimeError("the episode is over; read its reward instead")
        return [dict(m) for m in self.history]

    def consume(self, reply: str) -> None:
        """Take the model's reply: run its calculator call, or read its answer."""
        if self.done:
            raise RuntimeError("the episode is over; it takes no more replies")
        self.replies.append(reply)
        self.history.append({"role": "assistant", "content": reply})
        call = parse_call(reply) if len(self.replies) == 1 else None
        if call is None or len(self.replies) >= MAX_MODEL_CALLS:
            self.answer = parse_answer(reply)
            self.done = True
            return
        self.call = call
        text = (self.protocol.result.format(result=_number_text(call.value)) if call.value is not None
                else self.protocol.error.format(error=call.error))
        self.history.append({"role": "user", "content": text})

    @property
    def correct(self) -> bool:
        """Success: the final answer equals the task's answer."""
        return self.answer is not None and abs(self.answer - float(self.task["answer"])) < 1e-6

    @property
    def call_ok(self) -> bool:
        """A well-formed calculator call (its expression evaluated)."""
        return self.call is not None and self.call.ok

    @property
    def call_correct(self) -> bool:
        """The call's value is the task's answer (copying it back would succeed)."""
        return self.call_ok and self.call.value == self.task["answer"]  # type: ignore[union-attr]


def reward(episode: CalcEpisode) -> float:
    """1.0 for a correct final answer, plus :data:`CALL_BONUS` for a well-formed call."""
    return (1.0 if episode.correct else 0.0) + (CALL_BONUS if episode.call_ok else 0.0)


# ----------------------------------------------------------------------------- the agent
@agentbolt.rollout
async def calc_agent(task: dict[str, Any], llm: Any) -> float | None:
    """The agent as agentbolt runs it: drive a :class:`CalcEpisode` through ``llm``.

    Inside a rollout it emits ``reward`` (primary) with ``correct`` and ``call_ok``
    beside it and returns None; called directly it returns the reward.
    """
    import openai

    episode = CalcEpisode(task)
    sampling = {"max_tokens": MAX_TOKENS, **dict(llm.sampling_parameters)}
    async with openai.AsyncOpenAI(base_url=llm.endpoint, api_key=llm.api_key or "none", max_retries=5) as client:
        while not episode.done:
            response = await client.chat.completions.create(model=llm.model, messages=episode.messages(),
                                                            **sampling)
            episode.consume(response.choices[0].message.content or "")
    value = reward(episode)
    if agentbolt.current_context() is None:
        return value
    agentbolt.emit_reward(value, correct=float(episode.correct), call_ok=float(episode.call_ok))
    return None
