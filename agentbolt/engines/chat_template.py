"""Chat requests as prompt token ids, with tools: the gateway's own chat templating.

For engines that take token ids, agentbolt renders the chat itself with the policy's
tokenizer, so it can parse tool calls and build each prompt from the attempt's earlier
calls (:mod:`agentbolt.engines.history`). ``tools`` and ``tool_choice`` are applied here:

* ``auto`` (the default with tools): the tools go into the template, the answer is parsed;
* ``none``: no tools in the prompt, nothing parsed;
* ``required`` / ``{"type": "function", "function": {"name": ...}}``: the tools go in and
  the answer is *forced to start* like a call (of that function), by putting the parser's
  call opening after the generation prompt. Those tokens are prompt tokens (masked in
  training), and the parser reads them with the sampled text. A named function that takes
  exactly one argument, a required one, gets that argument opened too
  (``{"expression": "``): vLLM decodes a named call under its JSON schema, and this is the
  part of that schema a forced start can give.

A template that ignores ``tools`` (SmolLM2's) gets them described in the system prompt by
the parser, and earlier ``tool_calls`` written into the assistant turns in the parser's
format, so the model sees calls the way it is asked to write them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentbolt.engines.engine import EngineError
from agentbolt.engines.tools import (
    ToolParser,
    default_parser_name,
    get_parser,
    template_renders_tools,
    tool_functions,
)

__all__ = ["ChatTemplate", "ToolMode", "bad_request", "closes_turn", "keep_first_call", "load_tokenizer",
           "sole_argument_opening", "text_of"]

_STAND_IN = "AGENTBOLT-EARLIER-ANSWER-9f3c1e"  # stands for the sampled answer when rendering around it


def bad_request(message: str, param: str | None = None) -> EngineError:
    """A 400 in OpenAI's error shape."""
    return EngineError(400, message, {"error": {"message": message, "type": "invalid_request_error",
                                                "param": param, "code": None}})


def load_tokenizer(value: Any) -> Any:
    """A tokenizer object as is; a directory or Hub name (``"smollm2"``: the offline
    SmolLM2) loaded with ``transformers.AutoTokenizer``."""
    if not isinstance(value, str):
        return value
    try:
        from transformers import AutoTokenizer
    except ImportError as exc:
        raise ImportError("a tokenizer given by name needs transformers: pip install 'agentbolt[torch]'") from exc
    if value == "smollm2":
        from agentbolt.models import smollm2

        value = str(smollm2())
    return AutoTokenizer.from_pretrained(value)


def text_of(content: Any) -> str:
    """Message content as text (OpenAI text parts joined); other parts are refused."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") in ("text", "input_text", "output_text"):
                parts.append(str(part.get("text", "")))
            elif isinstance(part, dict):
                raise bad_request(f"only text content parts can be rendered for this model, got {part.get('type')!r}",
                                  "messages")
            else:
                parts.append(str(part))
        return "".join(parts)
    return str(content)


def sole_argument_opening(function: dict[str, Any]) -> str:
    """``{"<name>": `` (and the opening quote of a string) when ``function`` takes exactly
    one argument and requires it; else ``""``: the arguments are left to the model."""
    params = function.get("parameters")
    if not isinstance(params, dict):
        return ""
    props = params.get("properties")
    if not isinstance(props, dict) or len(props) != 1:
        return ""
    (key, schema), = props.items()
    if key not in (params.get("required") or ()):
        return ""
    quote = '"' if isinstance(schema, dict) and schema.get("type") == "string" else ""
    return "{" + json.dumps(key, ensure_ascii=False) + ": " + quote


@dataclass(frozen=True, slots=True)
class ToolMode:
    """How one request uses its tools: what the template gets, whether the answer is
    parsed, and the forced start of the answer (``""``: none)."""

    tools: list[dict[str, Any]] | None
    parser: ToolParser | None
    prefix: str = ""
    parallel: bool = True

    def key(self) -> str:
        """What of it changes how the conversation renders (history must agree on it);
        a forced start only ends a prompt, so calls with and without one still match."""
        return json.dumps(self.tools, sort_keys=True, default=str)


class ChatTemplate:
    """The policy's chat template plus a tool-call parser (``parser``: a name from
    :data:`agentbolt.engines.tools.PARSERS`; default: read from the template)."""

    def __init__(self, tokenizer: Any, parser: str | None = None) -> None:
        template = getattr(tokenizer, "chat_template", None)  # third-party: a tokenizer may have no template
        if not template:
            raise ValueError("the tokenizer has no chat template; set tokenizer.chat_template "
                             "(e.g. agentbolt.models.CHATML_TEMPLATE) before serving chat completions")
        self.tokenizer = tokenizer
        self.parser_name = parser or default_parser_name(template)
        self.parser = get_parser(self.parser_name)
        self.native_tools = template_renders_tools(template)
        self.native_calls = "tool_calls" in template

    # ---- tools -----------------------------------------------------------------------------
    def tool_mode(self, body: dict[str, Any]) -> ToolMode:
        """Read ``tools``, ``tool_choice`` and ``parallel_tool_calls``; 400 when they disagree."""
        tools = body.get("tools") or None
        if tools is not None and (not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools)):
            raise bad_request("'tools' must be a list of {'type': 'function', 'function': {...}} objects", "tools")
        choice = body.get("tool_choice")
        parallel = body.get("parallel_tool_calls") is not False
        if choice is None:
            choice = "auto" if tools else "none"
        if choice == "none" or not tools:
            if choice not in ("none", "auto"):
                raise bad_request(f"tool_choice={choice!r} needs tools", "tool_choice")
            return ToolMode(None, None)
        if choice == "auto":
            return ToolMode(tools, self.parser, "", parallel)
        if choice == "required":
            return ToolMode(tools, self.parser, self.parser.forced_prefix(None), parallel)
        name = (choice.get("function") or {}).get("name") if isinstance(choice, dict) else None
        if not isinstance(name, str):
            raise bad_request("tool_choice must be 'auto', 'none', 'required' or "
                              "{'type': 'function', 'function': {'name': ...}}", "tool_choice")
        if name not in {f.get("name") for f in tool_functions(tools)}:
            raise bad_request(f"tool_choice names the function {name!r}, which is not among the tools", "tool_choice")
        function = next(f for f in tool_functions(tools) if f.get("name") == name)
        return ToolMode(tools, self.parser, self.parser.forced_prefix(name) + sole_argument_opening(function),
                        parallel)

    # ---- rendering -------------------------------------------------------------------------
    def template_messages(self, messages: Any, mode: ToolMode) -> list[dict[str, Any]]:
        """The messages as the template gets them: text content; tools described and
        calls written out when the template does not do it itself."""
        if not isinstance(messages, list) or not messages:
            raise bad_request("'messages' must be a non-empty list", "messages")
        out: list[dict[str, Any]] = []
        for m in messages:
            if not isinstance(m, dict) or "role" not in m:
                raise bad_request("each message needs a 'role'", "messages")
            msg = {**m, "content": text_of(m.get("content"))}
            if m.get("tool_calls") and not self.native_calls:
                written = self.parser.format_calls(m["tool_calls"])
                msg["content"] = f"{msg['content']}\n{written}" if msg["content"] else written
                msg.pop("tool_calls")
            out.append(msg)
        if mode.tools and not self.native_tools:
            described = self.parser.describe_tools(mode.tools)
            if out[0]["role"] in ("system", "developer"):
                out[0] = {**out[0], "content": f"{out[0]['content']}\n\n{described}"}
            else:
                out.insert(0, {"role": "system", "content": described})
        return out

    def render_text(self, messages: list[dict[str, Any]], mode: ToolMode, *, generation: bool) -> str:
        """The template's text for already prepared messages (see :meth:`template_messages`)."""
        kwargs: dict[str, Any] = {"add_generation_prompt": generation, "tokenize": False}
        if mode.tools and self.native_tools:
            kwargs["tools"] = mode.tools
        try:
            return str(self.tokenizer.apply_chat_template(messages, **kwargs))
        except Exception as exc:
            raise bad_request(f"the model's chat template rejected these messages: {exc}", "messages") from exc

    def encode(self, text: str) -> list[int]:
        """Token ids of template text (special tokens in it are read as such, none added)."""
        return [int(t) for t in self.tokenizer(text, add_special_tokens=False)["input_ids"]]

    def prompt_ids(self, body: dict[str, Any], mode: ToolMode) -> list[int]:
        """The whole conversation rendered, plus the forced answer start."""
        text = self.render_text(self.template_messages(body.get("messages"), mode), mode, generation=True)
        return self.encode(text + mode.prefix)

    def continuation(self, messages: list[dict[str, Any]], answered: int, earlier: list[int],
                     sampled: list[int], mode: ToolMode) -> list[int] | None:
        """Prompt ids for ``messages`` whose ``messages[answered]`` is the answer of an
        earlier call (prompt ids ``earlier``, sampled ids ``sampled``): those ids, the end
        of the assistant turn the template writes after them, then the later turns as the
        template renders them. None when the template renders the earlier turns differently
        once later ones follow (then the caller re-renders everything)."""
        stand_in = {"role": "assistant", "content": _STAND_IN}
        base = self.template_messages([*messages[:answered], stand_in], mode)
        full = self.template_messages([*messages[:answered], stand_in, *messages[answered + 1:]], mode)
        base_text = self.render_text(base, mode, generation=False)
        full_text = self.render_text(full, mode, generation=True)
        at = base_text.rfind(_STAND_IN)
        if at < 0 or not full_text.startswith(base_text):
            return None
        after = self.encode(base_text[at + len(_STAND_IN):] + full_text[len(base_text):] + mode.prefix)
        if closes_turn(sampled, after):  # the model's own end-of-turn token already closes the turn
            after = after[1:]
        return [*earlier, *sampled, *after]


def closes_turn(sampled: Sequence[int], after: Sequence[int]) -> bool:
    """Whether the answer's last sampled token is the token the template writes first after
    an answer (its end-of-turn token, which the model sampled to stop). Decided by token
    id: an answer cut right after a token that *decodes* like the start of that text (``<``
    before ``<|im_end|>``) has not closed its turn, and the end-of-turn token still follows."""
    return bool(sampled) and bool(after) and sampled[-1] == after[0]


def keep_first_call(calls: Sequence[Any], parallel: bool) -> list[Any]:
    """``parallel_tool_calls: false`` keeps the first call only."""
    return list(calls) if parallel else list(calls[:1])
