"""A scripted critic and editor for APO on the SQL agent (no network, no model).

APO asks a critic what went wrong in failing traces and an editor to rewrite the prompt
template. With a strong model behind an OpenAI-compatible endpoint, pass it to
``train.py --critic-endpoint``; on this machine a 135M model cannot critique (see
``examples/room_selector``), so this deterministic stand-in plays both parts through
APO's ``ChatModel`` interface:

* **critic** — always answers :data:`CRITIQUE`: the replies were prose or half-queries,
  not a bare query over the listed tables, and asks for :data:`INSTRUCTION`;
* **editor** — returns the template it was given (between ``<current_template>`` tags)
  with :data:`INSTRUCTION` inserted before the last line, placeholders untouched.

It proves the APO path on the real agent and model — traces reach the critic, the edit
is validated, candidates are scored on validation, the best is kept — and measures what
that one instruction does for SmolLM2; it is not a claim about what a real critic writes.
"""

from __future__ import annotations

import re

__all__ = ["CRITIQUE", "INSTRUCTION", "ScriptedCritic"]

INSTRUCTION = ("Reply with only the SQL query, on one line, starting with SELECT. Use only the tables and "
               "columns listed above, and put text values in single quotes, for example: "
               "SELECT name FROM authors WHERE country = 'Japan'")

CRITIQUE = (
    "Diagnosis: the failing replies explain in prose, repeat the question, or write queries over tables and "
    "columns that do not exist. Causes: the template never says what the reply must look like. Changes: add "
    f"this instruction before the last line: \"{INSTRUCTION}\""
)

_TEMPLATE = re.compile(r"<current_template>\n?(.*?)\n?</current_template>", re.DOTALL)


class ScriptedCritic:
    """APO's ``ChatModel``: the critic's and the editor's answers, told apart by the request."""

    def __init__(self) -> None:
        self.critiques = 0
        self.edits = 0

    async def chat(self, messages: list[dict[str, str]], *, temperature: float | None = None,
                   max_tokens: int | None = None) -> str:
        text = "\n".join(str(m.get("content") or "") for m in messages)
        found = _TEMPLATE.search(text)
        if "<feedback>" in text and found is not None:
            self.edits += 1
            return "```\n" + self.edit(found.group(1)) + "\n```"
        self.critiques += 1
        return CRITIQUE

    @staticmethod
    def edit(template: str) -> str:
        """``template`` with :data:`INSTRUCTION` before its last line (once)."""
        if INSTRUCTION in template:
            return template
        head, _, last = template.rpartition("\n")
        return f"{head}\n{INSTRUCTION}\n{last}" if head else f"{template}\n{INSTRUCTION}"

    async def aclose(self) -> None:
        return None
