"""Samples per rollout and the share of prompt tokens computed once, before/after merging
by lineage (issue 35), on recorded episodes of real harnesses and frameworks.

The episodes are in ``benchmarks/data/harness_episodes`` (mini-swe-agent, aider,
OpenHands, Codex, Claude Code, opencode: ``tests/runner/harness/test_harness_episodes.py``)
and ``benchmarks/data/framework_episodes`` (smolagents, LlamaIndex ReAct, DSPy ReAct:
``tests/frameworks/test_framework_episodes.py``), one rollout each, its spans as JSON
lines (xz). Nothing here needs the harnesses or frameworks.

The two rules, over an attempt's model calls in start order (every call trained):

* **before** — a call continues the current sample when its prompt token ids start with
  the *previous* call's prompt + answer; otherwise it starts a new, independent sample,
  which the update runs in full.
* **after** — :class:`~agentbolt.adapters.samples.SampleAdapter`: a call continues the
  sample whose tokens are the longest exact prefix of its prompt among *all* earlier
  ones; a sample that starts sharing a long prefix with an earlier one (``diverged``)
  has that prefix run once in the update (``MergeCounts.tokens_shared``).

Columns: ``calls``; ``samples`` before → after; ``conv`` (conversations) and the breaks
after (``new`` conversation, ``div`` diverged); ``prompt tok`` — the untrained tokens
(prompts, tool output) the update runs, before → after; ``once`` — the share of those
that are run once, before → after: the distinct untrained tokens (the prefix tree of all
calls' prompt + answer, less the answers) over the untrained tokens run. 100% would be
every prompt token through the model once.

    python benchmarks/lineage_merging.py            # the table
    python benchmarks/lineage_merging.py --json     # one JSON line per episode
"""

from __future__ import annotations

import argparse
import json
import lzma
import sys
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from agentbolt.adapters.calls import ModelCall, extract_model_calls  # noqa: E402
from agentbolt.adapters.lineage import common_prefix  # noqa: E402
from agentbolt.adapters.samples import SampleAdapter  # noqa: E402
from agentbolt.types import Span  # noqa: E402

DATA = Path(__file__).resolve().parent / "data"
SOURCES = {"harness": DATA / "harness_episodes", "framework": DATA / "framework_episodes"}


@dataclass(frozen=True)
class Row:
    kind: str
    name: str
    calls: int
    samples_before: int
    samples_after: int
    conversations: int
    new_conversation: int
    diverged: int
    trained: int
    """Response tokens: every call's answer, trained once by either rule."""
    prompt_tokens_before: int
    prompt_tokens_after: int
    prompt_tokens_distinct: int
    reward: float | None

    @property
    def once_before(self) -> float:
        return self.prompt_tokens_distinct / self.prompt_tokens_before

    @property
    def once_after(self) -> float:
        return self.prompt_tokens_distinct / self.prompt_tokens_after


def load(path: Path) -> list[Span]:
    """The spans of one recorded episode."""
    return [Span.model_validate_json(line) for line in lzma.decompress(path.read_bytes()).decode().splitlines()]


def previous_only(calls: Sequence[ModelCall]) -> list[list[int]]:
    """The samples' token ids by the old rule: a call continues the current sample only
    when its prompt starts with the previous call's prompt + answer."""
    samples: list[list[int]] = []
    for call in calls:
        prompt, answer = call.prompt_token_ids or [], call.response_token_ids or []
        if samples and prompt[:len(samples[-1])] == samples[-1]:
            samples[-1] = [*prompt, *answer]
        else:
            samples.append([*prompt, *answer])
    return samples


def distinct_tokens(sequences: Sequence[Sequence[int]]) -> int:
    """The size of the prefix tree of ``sequences``: each adds its tokens past the longest
    prefix it shares with an earlier one."""
    return sum(len(s) - max([0, *(common_prefix(s, e) for e in sequences[:i])]) for i, s in enumerate(sequences))


def measure(kind: str, name: str, spans: Sequence[Span]) -> Row:
    calls = [c for c in extract_model_calls(spans) if not c.failed and c.has_token_ids]
    [after] = SampleAdapter().adapt(spans)
    counts = after.counts
    trained = sum(len(c.response_token_ids or []) for c in calls)
    before = previous_only(calls)
    tree = distinct_tokens([[*(c.prompt_token_ids or []), *(c.response_token_ids or [])] for c in calls])
    return Row(kind, name, len(calls), len(before), counts.samples, counts.conversations,
               counts.breaks.get("new_conversation", 0), counts.breaks.get("diverged", 0), trained,
               sum(map(len, before)) - trained, counts.tokens_context - counts.tokens_shared, tree - trained,
               after.reward)


def rows(sources: dict[str, Path] = SOURCES) -> list[Row]:
    return [measure(kind, path.name.removesuffix(".jsonl.xz"), load(path))
            for kind, folder in sources.items() for path in sorted(folder.glob("*.jsonl.xz"))]


def table(found: Sequence[Row]) -> str:
    lines = ["| episode | calls | samples before → after | conv | breaks new / div | prompt tok run before → after "
             "| computed once before → after |", "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in found:
        lines.append(f"| {r.name} ({r.kind}) | {r.calls} | {r.samples_before} → {r.samples_after} | "
                     f"{r.conversations} | {r.new_conversation} / {r.diverged} | "
                     f"{r.prompt_tokens_before:,} → {r.prompt_tokens_after:,} | "
                     f"{r.once_before:.0%} → {r.once_after:.0%} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="one JSON line per episode")
    args = parser.parse_args()
    found = rows()
    if args.json:
        for r in found:
            once = {"once_before": round(r.once_before, 4), "once_after": round(r.once_after, 4)}
            print(json.dumps({**asdict(r), **once}))
        return
    print(table(found))
    print("\nbefore: a call continues a sample only if its prompt extends the previous call's prompt + answer; "
          "after: SampleAdapter (longest exact prefix among all samples; a diverged sample's shared prefix run once).")
    print("prompt tok: untrained tokens the update runs; computed once: distinct untrained tokens / those run.")


if __name__ == "__main__":
    main()
