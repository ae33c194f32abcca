"""``Trainer.dev``: run a handful of rollouts, no training, and show what happened —
a span tree per rollout (names, key attributes, rewards) and the training samples the
algorithm's adapter makes from it (by default the RL adapter: what GRPO trains on). The
quickest way to see whether an agent is wired up right before spending compute on it.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.text import Text
from rich.tree import Tree

from agentbolt import semconv
from agentbolt.types import Rollout, Span

if TYPE_CHECKING:
    from agentbolt.algorithms.base import Algorithm

__all__ = ["DevRollout", "preview_adapter", "render_dev_rollout", "span_tree", "training_samples"]

_HIDDEN_PREFIXES = (
    semconv.ROLLOUT_ID, semconv.ATTEMPT_ID, semconv.SEQUENCE_ID, semconv.LLM_PREFIX, semconv.OTEL_PREFIX
)
_PREVIEW = 100


@dataclass
class DevRollout:
    """One rollout of a dev run: the rollout as stored, its spans (latest attempt), the
    training samples made from them (None when none could be made: why is the last of
    ``notes``), and the failure."""

    rollout: Rollout
    spans: list[Span]
    samples: list[Any] | None = None
    error: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def output(self) -> Any:
        """What the agent returned when it was not a reward (its answer); None if nothing."""
        return semconv.output_of(self.spans)[1]


def _preview(value: Any, limit: int = _PREVIEW) -> str:
    text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _last_message(raw: Any, key: str) -> str | None:
    """A preview of the last message in a JSON request/response attribute."""
    try:
        data = json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    if key == "request":
        messages = data.get("messages") or []
        if messages and isinstance(messages[-1], dict):
            return f"{messages[-1].get('role', '?')}: {_preview(messages[-1].get('content'), 70)}"
        if "prompt" in data:
            return f"prompt: {_preview(data['prompt'], 70)}"
        return None
    choices = data.get("choices") or []
    if choices and isinstance(choices[0], dict):
        message = choices[0].get("message") or {}
        if message.get("tool_calls"):
            names = [c.get("function", {}).get("name", "?") for c in message["tool_calls"] if isinstance(c, dict)]
            return f"tool calls: {', '.join(names)}"
        content = message.get("content", choices[0].get("text"))
        return f"→ {_preview(content, 70)}"
    return None


def _label(span: Span) -> Text:
    attrs = span.attributes
    label = Text(span.name, style="bold")
    if span.end_time is not None:
        label.append(f"  {(span.end_time - span.start_time) * 1000:.1f} ms", style="dim")
    if span.status.value == "error":
        label.append("  error", style="red")
        if span.status_message:
            label.append(f": {_preview(span.status_message, 60)}", style="red")
    details: list[str] = []
    if span.name == semconv.REWARD_SPAN:
        named = {k[len(semconv.REWARD_PREFIX) :]: v for k, v in attrs.items() if k.startswith(semconv.REWARD_PREFIX)}
        value = attrs.get(semconv.REWARD_VALUE)
        label.append(f"  reward = {value}", style="bold green")
        if len(named) > 1:
            details.append(", ".join(f"{k}={v}" for k, v in named.items()))
    elif semconv.GEN_AI_OPERATION in attrs or semconv.GEN_AI_REQUEST_MODEL in attrs:
        model = attrs.get(semconv.GEN_AI_RESPONSE_MODEL) or attrs.get(semconv.GEN_AI_REQUEST_MODEL)
        inp, outp = attrs.get(semconv.GEN_AI_INPUT_TOKENS, "?"), attrs.get(semconv.GEN_AI_OUTPUT_TOKENS, "?")
        tokens = f"{inp} in / {outp} out"
        label.append(f"  {model}  {tokens} tokens", style="cyan")
        source = attrs.get(semconv.LLM_TOKEN_IDS_SOURCE)
        if source is not None:
            details.append(f"token ids: {source}")
        for key, which in ((semconv.LLM_REQUEST, "request"), (semconv.LLM_RESPONSE, "response")):
            text = _last_message(attrs.get(key), which)
            if text:
                details.append(text)
    else:
        shown = [
            f"{k}={_preview(v, 60)}"
            for k, v in attrs.items()
            if not k.startswith(_HIDDEN_PREFIXES) and not k.startswith(semconv.EXCEPTION_STACKTRACE)
        ][:4]
        details.extend(shown)
    for line in details:
        label.append(f"\n  {line}", style="dim")
    return label


def span_tree(spans: Sequence[Span], title: str = "spans") -> Tree:
    """The spans of one attempt as a tree (children under their parent, in time order)."""
    tree = Tree(Text(title, style="bold"))
    ids = {s.span_id for s in spans}
    children: dict[str | None, list[Span]] = {}
    for span in spans:
        parent = span.parent_id if span.parent_id in ids else None
        children.setdefault(parent, []).append(span)
    for group in children.values():
        group.sort(key=lambda s: (s.start_time, s.sequence_id or 0))

    def add(node: Tree, parent: str | None, depth: int) -> None:
        for span in children.get(parent, []):
            branch = node.add(_label(span))
            if depth < 50:
                add(branch, span.span_id, depth + 1)

    add(tree, None, 0)
    if not spans:
        tree.add(Text("(no spans)", style="dim"))
    return tree


def preview_adapter(algorithm: Algorithm) -> Callable[[list[Span]], Iterable[Any]] | None:
    """The adapter whose samples ``Trainer.dev`` shows: the algorithm's own
    :attr:`~agentbolt.algorithms.base.Algorithm.adapter` (GRPO's
    :class:`~agentbolt.adapters.SampleAdapter` with its ``agent_match``) when it has one,
    else None (the RL adapter, see :func:`training_samples`)."""
    return algorithm.adapter


def training_samples(spans: list[Span], adapter: Any = None) -> tuple[list[Any] | None, str | None]:
    """What ``adapter`` makes of ``spans`` — by default the RL adapter
    (:class:`~agentbolt.adapters.SampleAdapter`), so the samples shown are those GRPO
    trains on — or (None, why not): among the reasons, a rollout that made no recorded model
    call, said as the runner and the algorithms say it (:mod:`agentbolt.adapters.no_model_call`)."""
    from agentbolt.adapters import MissingTokenIdsError, SampleAdapter, is_model_call
    from agentbolt.adapters.no_model_call import why_no_samples

    adapter = adapter if adapter is not None else SampleAdapter()
    try:
        samples = list(adapter(spans))
    except MissingTokenIdsError as exc:
        return None, f"none for RL: {exc}"
    except Exception as exc:  # noqa: BLE001 — dev shows why there are no samples instead of failing
        return None, f"{type(adapter).__name__} failed on these spans: {type(exc).__name__}: {exc}"
    if not samples and not any(is_model_call(s) for s in spans):
        return None, f"none: {why_no_samples()}"
    return samples, None


@runtime_checkable
class _ShownAsDict(Protocol):
    """A sample that says how it is shown (:class:`~agentbolt.adapters.Sample`; a user's adapter's may too)."""

    def as_dict(self) -> dict[str, Any]: ...


def _sample_view(sample: Any) -> Text:
    if isinstance(sample, _ShownAsDict):
        data = sample.as_dict()
    elif hasattr(sample, "model_dump"):  # a pydantic model (Triplet, or a user's)
        data = sample.model_dump()
    else:
        data = sample if isinstance(sample, dict) else getattr(sample, "__dict__", sample)  # third-party: any object
    if not isinstance(data, dict):
        return Text(_preview(data, 200))
    text = Text()
    for key, value in data.items():
        if key == "calls" and isinstance(value, list):
            shown = ", ".join(f"{c.get('agent_name') or '(unnamed)'} {'trained' if c.get('trained') else 'context'} "
                              f"{c.get('length')} tokens" for c in value if isinstance(c, dict))
        elif isinstance(value, list) and value and all(isinstance(v, (int, float)) for v in value):
            shown = f"[{len(value)} numbers] {_preview(value, 60)}"
        else:
            shown = _preview(value, 100)
        text.append(f"{key}: ", style="bold")
        text.append(shown + "\n")
    return text


def render_dev_rollout(index: int, dev: DevRollout) -> RenderableType:
    r = dev.rollout
    style = {"succeeded": "green", "failed": "red"}.get(r.status.value, "yellow")
    reward = "—" if r.reward is None else f"{r.reward:g}"
    header = Text()
    header.append("input: ", style="bold")
    header.append(_preview(r.input, 200))
    parts: list[RenderableType] = [header]
    if dev.error:
        parts.append(Text(f"error: {dev.error}", style="red"))
    found, output = semconv.output_of(dev.spans)
    if found:
        line = Text()
        line.append("output: ", style="bold")
        line.append(_preview(output, 500))
        parts.append(line)
    parts.append(span_tree(dev.spans, title=f"trace ({len(dev.spans)} spans, attempt {r.attempt_count})"))
    if dev.samples is None:
        parts.append(Text(f"training samples: {dev.notes[-1] if dev.notes else 'not available'}", style="yellow"))
    else:
        parts.append(Text(f"training samples: {len(dev.samples)}", style="bold"))
        for i, sample in enumerate(dev.samples):
            parts.append(Panel(_sample_view(sample), title=f"sample {i}", title_align="left", border_style="dim"))
    title = f"rollout {index}  [{style}]{r.status.value}[/{style}]  reward {reward}  ({r.rollout_id})"
    return Panel(Group(*parts), title=title, title_align="left")


def print_dev_rollouts(results: Sequence[DevRollout], console: Console | None = None) -> None:
    console = console or Console()
    for i, dev in enumerate(results):
        console.print(render_dev_rollout(i, dev))
