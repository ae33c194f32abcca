"""The SQL agent's wording and parsing, with no model and no graph (tested on its own).

Two protocols, one behaviour — write a query, run it, read the result or the error,
accept it or rewrite it, at most ``max_turns`` model calls:

* ``text`` — for any chat model, SmolLM2-135M included: the model replies with a query
  (bare, after ``SQL:``, or in a fenced block); the agent runs it and answers
  ``Result: 3 rows: ...`` (or ``Error: ...``) and asks for ``DONE`` or a corrected query;
* ``tools`` — for engines that parse tool calls (vLLM with a tool parser, or the gateway
  on token ids with a model whose template renders tools): the model calls the
  ``run_sql`` function; its result goes back as a ``tool`` message; a reply without a
  call ends the episode.

The prompt is a template with ``{schema}`` and ``{question}``; :data:`INITIAL_PROMPT` is
what the untrained model, SFT and GRPO use, and what APO starts from.
"""

from __future__ import annotations

import re
from typing import Any, Literal

__all__ = ["DEFAULT_MAX_TURNS", "INITIAL_PROMPT", "MAX_TOKENS", "NUDGE", "RUN_SQL_TOOL", "Protocol",
           "feedback", "first_messages", "parse_sql", "says_done"]

Protocol = Literal["text", "tools"]

INITIAL_PROMPT = (
    "You write SQLite queries.\n\n"
    "Tables:\n{schema}\n\n"
    "Question: {question}\n"
    "Write a SQL query that answers the question."
)

DEFAULT_MAX_TURNS = 3
"""Model calls per episode: write, then check (accept or rewrite), then one more rewrite."""

MAX_TOKENS = 48
"""``max_tokens`` per call: the longest gold query is 36 SmolLM2 tokens."""

NUDGE = "No SQL query found. Reply with one SQL query that starts with SELECT."

RUN_SQL_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "run_sql",
        "description": "Run one read-only SQLite query on the database and return its rows or its error.",
        "parameters": {"type": "object", "properties": {"query": {"type": "string", "description": "the SQL query"}},
                       "required": ["query"]},
    },
}
TOOLS_SUFFIX = ("\n\nUse the run_sql tool to run your query and read its result. If the result answers the "
                "question, reply DONE; otherwise call run_sql again with a corrected query.")


def first_messages(template: str, task: dict[str, Any], protocol: Protocol = "text") -> list[dict[str, Any]]:
    """The opening conversation: the filled template as the user's message."""
    text = template.format(schema=task["schema"], question=task["question"])
    if protocol == "tools":
        text += TOOLS_SUFFIX
    return [{"role": "user", "content": text}]


def feedback(result_preview: str, ok: bool) -> str:
    """The user message after a query ran (text protocol)."""
    if ok:
        return (f"Result: {result_preview}\n"
                "If this answers the question, reply DONE. Otherwise reply with a corrected query.")
    return f"{result_preview}\nReply with a corrected query."


_FENCE = re.compile(r"```(?:sql|sqlite)?\s*\n?(.*?)(?:```|$)", re.IGNORECASE | re.DOTALL)
_START = re.compile(r"\b(select|with)\b", re.IGNORECASE)


def parse_sql(reply: str) -> str | None:
    """The query in a reply: the first fenced block's query, else the text from the first
    ``SELECT``/``WITH`` up to a ``;``, a blank line or the end. None when there is none."""
    text = reply
    fenced = _FENCE.search(reply)
    if fenced and _START.search(fenced.group(1)):
        text = fenced.group(1)
    start = _START.search(text)
    if start is None:
        return None
    query = text[start.start():]
    query = re.split(r";|\n\s*\n|```", query, maxsplit=1)[0]
    query = " ".join(query.split())
    return query or None


def says_done(reply: str) -> bool:
    """Whether a reply accepts the last result (``DONE``, any case)."""
    return re.search(r"\bdone\b", reply, re.IGNORECASE) is not None
