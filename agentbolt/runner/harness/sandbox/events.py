"""Sandbox events: what the sandbox refused during one run, and how it is recorded. An
event always means that something was refused — a connection, a write, an allocation, a
process, time — never that a program came close to a limit.

Every event is one ``agentbolt.sandbox`` span on the attempt (kind, detail, count; see
:mod:`agentbolt.semconv`), the same list lies under ``metadata["sandbox"]`` of the
attempt, and algorithms count them (``sandbox/events``): a rising count warns that the
policy is learning to cheat.

Where they come from:

* the kernel's counters of the sandbox's network namespace — ``network.unreachable``
  (another host: no route, no packet left) and ``network.refused`` (a local port other
  than the gateway's: the store's admin API, a database, the dashboard);
* the gateway relay — ``network.denied`` (an HTTP request for anything but the
  attempt's own model calls and reward);
* the sandbox's init — ``limit.processes``, ``limit.threads``, ``limit.wall_time``, ``limit.cpu``,
  ``limit.file_size``, ``limit.connections`` (connections the relay closed);
* the controller's side of the relay — ``limit.connections`` (requests past the limit at
  once), ``limit.request_time`` (a request head too slow);
* the controller — ``limit.output`` (stdout past ``output_mb``);
* the program's own error messages — ``path.denied`` (a write to the read-only system,
  or a hidden path it looked for), ``limit.memory`` (an allocation refused) and
  ``limit.tmp_size`` (``/tmp`` or ``/dev/shm`` full). These
  are evidence the program printed, so a program that hides its errors hides them; the
  blocking itself never depends on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from agentbolt.runner.harness.events import SandboxEvent

__all__ = ["SandboxEvent", "emit_events", "events_from_output", "events_from_report", "merge"]


def events_from_report(report: dict[str, Any]) -> list[SandboxEvent]:
    """Events the sandbox's init reported (limits) and read from the kernel (network)."""
    events = [SandboxEvent(str(e["kind"]), str(e["detail"])) for e in report.get("events", [])]
    if report.get("relay_refused"):
        events.append(SandboxEvent("limit.connections", "connections to the gateway past the limit at once were "
                                                        "closed by the relay", int(report["relay_refused"])))
    net = report.get("network") or {}
    if net.get("unroutable"):
        events.append(SandboxEvent(
            "network.unreachable",
            "connections to addresses outside the sandbox were refused (only the gateway is reachable)",
            int(net["unroutable"]),
        ))
    refused = int(net.get("refused_tcp", 0)) + int(net.get("refused_udp", 0))
    if refused:
        events.append(SandboxEvent(
            "network.refused",
            "connections to local ports other than the gateway's were refused (store, dashboard, databases)",
            refused,
        ))
    # a process near the memory limit is no event: nothing was refused (runtimes reserve
    # most of what they may); the peak is a fact of the run (harness.peak_memory_mb)
    return events


_READ_ONLY = re.compile(r"read-only file system", re.IGNORECASE)
_NO_MEMORY = re.compile(r"MemoryError|Cannot allocate memory|out of memory|std::bad_alloc", re.IGNORECASE)
_MISSING = re.compile(r"no such file or directory|permission denied|cannot open|can't open", re.IGNORECASE)
_NO_SPACE = re.compile(r"no space left on device", re.IGNORECASE)
_NO_GIT = re.compile(r"not a git repository", re.IGNORECASE)  # .git is never in the copy


def events_from_output(text: str, hidden_names: Sequence[str]) -> list[SandboxEvent]:
    """Evidence in the program's stderr: writes refused by the read-only system, hidden
    paths it looked for, allocations refused by the memory limit."""
    denied_writes: list[str] = []
    hidden_hits: list[str] = []
    memory: list[str] = []
    full: list[str] = []
    names = [n for n in hidden_names if n]
    for line in text.splitlines():
        if _READ_ONLY.search(line):
            denied_writes.append(line.strip())
        elif _NO_MEMORY.search(line):
            memory.append(line.strip())
        elif _NO_SPACE.search(line):
            full.append(line.strip())
        elif _NO_GIT.search(line) or (_MISSING.search(line) and any(n in line for n in names)):
            hidden_hits.append(line.strip())
    events: list[SandboxEvent] = []
    if denied_writes:
        events.append(
            SandboxEvent(
                "path.denied", f"write outside the workspace refused: {denied_writes[0][:300]}", len(denied_writes)
            )
        )
    if hidden_hits:
        events.append(SandboxEvent("path.denied", f"hidden path looked for: {hidden_hits[0][:300]}", len(hidden_hits)))
    if full:
        events.append(
            SandboxEvent("limit.tmp_size", f"a write found /tmp or /dev/shm full: {full[0][:300]}", len(full))
        )
    if memory:
        events.append(SandboxEvent("limit.memory", f"an allocation was refused: {memory[0][:300]}", len(memory)))
    return events


def merge(events: Iterable[SandboxEvent]) -> list[SandboxEvent]:
    """One event per (kind, detail) with the counts summed; memory limit reported once."""
    merged: dict[tuple[str, str], SandboxEvent] = {}
    seen_memory = False
    for e in events:
        if e.kind == "limit.memory":
            if seen_memory:
                continue
            seen_memory = True
        key = (e.kind, e.detail)
        old = merged.get(key)
        merged[key] = e if old is None else SandboxEvent(e.kind, e.detail, old.count + e.count)
    return list(merged.values())


def emit_events(events: Sequence[SandboxEvent]) -> None:
    """One ``agentbolt.sandbox`` span per event, on the current attempt."""
    from agentbolt import semconv
    from agentbolt.tracing.context import require_context

    tracer = require_context().tracer.otel_tracer
    for e in events:
        tracer.start_span(
            semconv.SANDBOX_SPAN,
            attributes={semconv.SANDBOX_KIND: e.kind, semconv.SANDBOX_DETAIL: e.detail, semconv.SANDBOX_COUNT: e.count},
        ).end()
