"""Responses API tools as the chat function tools the engine's template renders.

* ``function`` tools are kept (flat ``{"type": "function", "name", ...}`` → nested).
* ``namespace`` tools (Codex sends its sub-agent functions in one: ``{"type":
  "namespace", "name": "multi_agent_v1", "tools": [<function tools>]}``) are flattened
  into their function tools. A function keeps its own name in the prompt unless another
  tool has it too; then it is ``<namespace>__<name>``. The model's calls are mapped back:
  the ``function_call`` item names the function and carries its ``namespace``, as
  OpenAI's API answers a call of a namespaced function; earlier calls sent back with a
  ``namespace`` get the prompt's name again, so the history renders as it was sampled.
* ``custom`` (free-form) tools — Codex can send its ``apply_patch`` as one — become function tools
  taking one string, ``input`` (their grammar, if any, told in the description); the
  model's call comes back as a ``custom_tool_call`` item with that ``input``, and one sent
  back renders as the call it was.
* tools the engine cannot run — hosted ones (``web_search``, ``file_search``,
  ``code_interpreter``, ``image_generation``, ``computer_use_preview``, ``mcp``,
  ``local_shell``, ``tool_search``…) — are left out of the prompt, and named in
  :attr:`ToolSet.dropped`, which the gateway records on the call's span
  (``agentbolt.llm.dropped_tools``). The call goes on without them: the model cannot
  call what it was not shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agentbolt.engines.chat_template import bad_request
from agentbolt.responses_chat import CUSTOM_INPUT

__all__ = ["ToolSet", "chat_tool_choice", "tool_set"]


@dataclass
class ToolSet:
    """The chat tools of one request and how their names map to the request's tools."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    """Chat function tools, in the request's order (namespaces flattened in place)."""
    dropped: list[str] = field(default_factory=list)
    """The tools left out: ``type`` (and ``:name`` where they have one)."""
    origins: dict[str, tuple[str | None, str]] = field(default_factory=dict)
    """Prompt name → (namespace or None, the function's own name)."""
    custom: set[str] = field(default_factory=set)
    """Prompt names of ``custom`` (free-form) tools: their calls' one argument is ``input``."""

    def prompt_name(self, namespace: str | None, name: str) -> str:
        """The name the prompt shows for a request function (``namespace`` None: a plain one)."""
        for prompt, origin in self.origins.items():
            if origin == (namespace, name):
                return prompt
        return name

    def origin(self, prompt_name: str) -> tuple[str | None, str]:
        """(namespace, name) of the function the prompt calls ``prompt_name``."""
        return self.origins.get(prompt_name, (None, prompt_name))


def _custom_function(tool: dict[str, Any]) -> dict[str, Any]:
    """A custom tool as a function tool of one string argument."""
    description = str(tool.get("description") or "")
    fmt = tool.get("format")
    if isinstance(fmt, dict) and fmt.get("type") == "grammar" and fmt.get("definition"):
        description += (f"\n\nThe input is free-form text in this {fmt.get('syntax') or ''} grammar:\n"
                        f"{fmt['definition']}")
    schema = {"type": "object", "required": [CUSTOM_INPUT],
              "properties": {CUSTOM_INPUT: {"type": "string", "description": "the tool's whole input, as text"}}}
    return {"description": description.strip(), "parameters": schema}


def _function(tool: dict[str, Any], name: str) -> dict[str, Any]:
    fn = {k: tool[k] for k in ("description", "parameters", "strict") if tool.get(k) is not None}
    return {"type": "function", "function": {"name": name, **fn}}


def tool_set(tools: Any) -> ToolSet:
    """The :class:`ToolSet` of a request's ``tools``; 400 for what is not a tool at all."""
    out = ToolSet()
    if not tools:
        return out
    if not isinstance(tools, list) or not all(isinstance(t, dict) for t in tools):
        raise bad_request("'tools' must be a list of tool objects", "tools")
    flat: list[tuple[str | None, dict[str, Any]]] = []
    custom: set[int] = set()  # positions in flat of custom tools
    for tool in tools:
        kind = tool.get("type")
        if kind == "function":
            flat.append((None, tool))
        elif kind == "custom" and isinstance(tool.get("name"), str) and tool["name"]:
            custom.add(len(flat))
            flat.append((None, {"name": tool["name"], **_custom_function(tool)}))
        elif kind == "namespace" and isinstance(tool.get("tools"), list):
            for inner in tool["tools"]:
                if isinstance(inner, dict) and inner.get("type", "function") == "function":
                    flat.append((str(tool.get("name") or ""), inner))
                else:
                    out.dropped.append(_label(inner, tool.get("name")))
        else:
            out.dropped.append(_label(tool, None))
    counts: dict[str, int] = {}
    for _, fn in flat:
        counts[str(fn.get("name"))] = counts.get(str(fn.get("name")), 0) + 1
    for i, (namespace, fn) in enumerate(flat):
        name = str(fn.get("name"))
        if not name or name == "None":
            raise bad_request("each function tool needs a 'name'", "tools")
        prompt = name if counts[name] == 1 or namespace is None else f"{namespace}__{name}"
        out.origins[prompt] = (namespace, name)
        out.tools.append(_function(fn, prompt))
        if i in custom:
            out.custom.add(prompt)
    return out


def _label(tool: Any, namespace: Any) -> str:
    if not isinstance(tool, dict):
        return type(tool).__name__
    kind = str(tool.get("type") or "tool")
    name = tool.get("name") or tool.get("server_label")
    label = f"{kind}:{name}" if name else kind
    return f"{namespace}.{label}" if namespace else label


def chat_tool_choice(choice: Any, tools: ToolSet) -> Any:
    """Chat ``tool_choice`` for a Responses one: a named function (of a namespace too)
    nested; a choice of a dropped hosted tool, or ``allowed_tools``, is ``auto``."""
    if isinstance(choice, dict) and choice.get("type") in ("function", "custom"):
        name = tools.prompt_name(choice.get("namespace"), str(choice.get("name")))
        return {"type": "function", "function": {"name": name}}
    if isinstance(choice, dict) and choice.get("type") == "allowed_tools":
        return choice.get("mode") if choice.get("mode") in ("auto", "required") else "auto"
    if isinstance(choice, dict):
        return "auto"  # a hosted tool the engine cannot run: the model chooses among the rest
    return choice
