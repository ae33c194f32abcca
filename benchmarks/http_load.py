"""The load generators of benchmarks/gateway_overhead.py: ``wrk`` (Debian's package) with a
Lua script for the POST, a small keep-alive asyncio client when wrk is missing, and ``hey``
for a fixed offered rate. Each returns ``requests``/``rps``/``p50_ms``/``p99_ms`` (and
``non_2xx``, ``socket_errors`` where the tool tells)."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
import time
from typing import Any

import httpx

_LUA = """
wrk.method = "POST"
wrk.body = {body}
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer {token}"
"""
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3}


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s)", text.strip())
    if m is None:
        raise ValueError(f"cannot read wrk latency {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def run_wrk(url: str, token: str, connections: int, seconds: float, body: str) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as f:
        f.write(_LUA.format(body=json.dumps(body), token=token))
        script = f.name
    try:
        out = subprocess.run(
            ["wrk", "-t1", f"-c{connections}", f"-d{max(1, round(seconds))}s", "--timeout", "30s", "--latency", "-s",
             script, url],
            capture_output=True,
            text=True,
            check=True,
            timeout=seconds + 60,
        ).stdout
    finally:
        os.unlink(script)
    pct = dict(re.findall(r"^\s+(50|99)(?:\.000)?%\s+(\S+)\s*$", out, re.MULTILINE))  # "1.08s " ends in a space
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    errors = re.search(r"Socket errors: (.*)", out)
    return {
        "requests": requests,
        "rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
        "p50_ms": _ms(pct["50"]),
        "p99_ms": _ms(pct["99"]),
        "non_2xx": int(non2xx.group(1)) if non2xx else 0,
        "socket_errors": errors.group(1) if errors else None,
    }


async def _python_load(url: str, token: str, connections: int, seconds: float, body: str) -> dict[str, Any]:
    """A keep-alive HTTP/1.1 client on raw asyncio streams (when wrk is missing)."""
    parsed = httpx.URL(url)
    data = body.encode()
    request = (
        f"POST {parsed.raw_path.decode()} HTTP/1.1\r\nHost: {parsed.host}:{parsed.port}\r\n"
        f"Content-Type: application/json\r\nAuthorization: Bearer {token}\r\nContent-Length: {len(data)}\r\n\r\n"
    ).encode() + data
    latencies: list[float] = []
    non2xx = 0
    stop = time.perf_counter() + seconds

    async def one() -> None:
        nonlocal non2xx
        reader, writer = await asyncio.open_connection(parsed.host, parsed.port)
        while time.perf_counter() < stop:
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 2"):
                non2xx += 1
            lower = head.lower()
            i = lower.find(b"content-length:")
            await reader.readexactly(int(lower[i + 15 : lower.find(b"\r\n", i)]))
            latencies.append(time.perf_counter() - t0)
        writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(connections)))
    elapsed = time.perf_counter() - t0
    latencies.sort()
    return {
        "requests": len(latencies),
        "rps": len(latencies) / elapsed,
        "p50_ms": latencies[len(latencies) // 2] * 1e3,
        "p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1e3,
        "non_2xx": non2xx,
        "socket_errors": None,
    }


def run_hey(url: str, token: str, rate: float, seconds: float, body: str) -> dict[str, Any]:
    """16 connections at ``rate`` calls/s in all (``hey``: Debian's package), so two codes
    are compared at one offered rate rather than at what each can take (wrk's way)."""
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        f.write(body)
        body_file = f.name
    try:
        out = subprocess.run(
            ["hey", "-z", f"{max(1, round(seconds))}s", "-c", "16", "-q", f"{rate / 16:g}", "-m", "POST",
             "-T", "application/json", "-H", f"Authorization: Bearer {token}", "-D", body_file, url],
            capture_output=True, text=True, check=True, timeout=seconds + 60,
        ).stdout
    finally:
        os.unlink(body_file)
    pct = dict(re.findall(r"(\d+)% in ([\d.]+) secs", out))
    return {"rps": float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)),  # type: ignore[union-attr]
            "p50_ms": float(pct["50"]) * 1e3, "p99_ms": float(pct["99"]) * 1e3}


def load(client: str, url: str, token: str, connections: int, seconds: float, body: str) -> dict[str, Any]:
    """``body`` POSTed over ``connections`` keep-alive connections for ``seconds`` (``client``: wrk or python)."""
    if client == "wrk":
        return run_wrk(url, token, connections, seconds, body)
    return asyncio.run(_python_load(url, token, connections, seconds, body))
