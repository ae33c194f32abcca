"""A multi-turn harness episode end to end: a long system prompt, ten tool turns, through
agentbolt's gateway with token-exact history, beside the same episode against llama.cpp's
own OpenAI-compatible server (llama-cpp-python's) on the same F32 weights — one run.

    python benchmarks/episode.py --threads 2           # SmolLM2-135M, fp32
    python benchmarks/episode.py --smoke --json        # tiny random model, seconds

The episode (the shape of a real coding harness such as mini-swe-agent, whose tool output
comes back as the next user turn):

* a system prompt of ``--system-tokens`` (6,000) tokens — the tool manual and rules a
  harness sends, numbered paragraphs so no two are alike — and a task;
* ``--turns`` (10) turns: the model answers (greedy, at most ``--answer-tokens`` = 24
  tokens), the script appends that answer verbatim and an observation of
  ``--observation-tokens`` (~120) tokens, and calls again. The conversation is sent whole
  every turn, as harnesses do.

Measured per turn and in total: wall seconds seen by the client, prompt tokens, and the
tokens each engine actually ran through the model (prefilled):

* agentbolt: one rollout's URL on an in-process server (MemoryStore, every call recorded
  as a span) whose gateway serves the continuous-batching engine; its history rebuilds
  each prompt token-exact from the previous call's prompt + sampled ids, and the engine's
  prefix cache reuses their K/V. Prefilled = ``engine.stats.prompt_tokens_computed``.
* llama.cpp: ``python -m llama_cpp.server`` (``pip install 'agentbolt[bench]'``) in a
  subprocess, same threads and context; it renders the chat template from the messages
  and reuses the longest common token prefix of its previous evaluation. Prefilled = what
  its log says it evaluated (``prefix-match hit, remaining N prompt tokens``; the whole
  prompt when it reports no hit).

The ``ratio`` row: llama.cpp's total seconds over agentbolt's (above 1, agentbolt is
faster). Both answer greedily from the same weights, so their answers — and so the
conversations — are nearly the same; each row says how many answer tokens it generated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import httpx
import torch

ADMIN = "bench-admin"
PARAGRAPH = ("{n}. When a command fails, read its error output before the next step; rule {n} applies to the files "
             "under src/ and tests/, and tool number {n} prints at most {k} lines of a file with line numbers so "
             "that an edit can name the exact lines it replaces.")
OBSERVATION = ("<returncode>0</returncode>\n<output>\n{lines}</output>\nTurn {t}: the command ran; continue with the "
               "task or say DONE.")


def system_prompt(tokenizer: Any, tokens: int) -> str:
    """Numbered paragraphs until the text is ``tokens`` tokens long (within one paragraph)."""
    parts = ["You are a coding agent working in a repository. Follow these rules."]
    n = 1
    while len(tokenizer(" ".join(parts))["input_ids"]) < tokens:
        parts.append(PARAGRAPH.format(n=n, k=20 + n % 50))
        n += 1
    return " ".join(parts)


def observation(tokenizer: Any, turn: int, tokens: int) -> str:
    lines, i = "", 0
    while len(tokenizer(lines)["input_ids"]) < tokens:
        lines += f"src/module_{turn}_{i}.py:{10 + i}: def handler_{i}(request): return route(request, {i})\n"
        i += 1
    return OBSERVATION.format(lines=lines, t=turn)


def run_episode(url: str, headers: dict[str, str], model: str, system: str, observations: list[str],
                answer_tokens: int, prefilled: Any) -> list[dict[str, Any]]:
    """Play the episode against an OpenAI chat-completions ``url``; one row per turn.
    ``prefilled()`` returns the engine's prompt tokens computed so far (a counter)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": system},
                                      {"role": "user", "content": "Fix the failing test in tests/test_routes.py."}]
    rows = []
    with httpx.Client(timeout=600, headers=headers) as client:
        for turn, obs in enumerate(observations, 1):
            before = prefilled()
            start = time.perf_counter()
            r = client.post(url, json={"model": model, "messages": messages, "max_tokens": answer_tokens,
                                       "temperature": 0.0})
            seconds = time.perf_counter() - start
            if r.status_code != 200:
                raise RuntimeError(f"turn {turn}: HTTP {r.status_code}: {r.text[:300]}")
            body = r.json()
            answer = body["choices"][0]["message"]["content"] or ""
            rows.append({"turn": turn, "seconds": round(seconds, 3), "prompt_tokens": body["usage"]["prompt_tokens"],
                         "answer_tokens": body["usage"]["completion_tokens"], "prefilled": prefilled() - before})
            messages += [{"role": "assistant", "content": answer}, {"role": "user", "content": obs}]
    return rows


def summary(engine: str, rows: list[dict[str, Any]]) -> dict[str, Any]:
    later = rows[1:]
    return {"engine": engine, "turns": len(rows), "total_s": round(sum(r["seconds"] for r in rows), 2),
            "first_turn_s": rows[0]["seconds"], "later_turns_s": round(sum(r["seconds"] for r in later), 2),
            "prefilled_total": sum(r["prefilled"] for r in rows),
            "prompt_tokens_total": sum(r["prompt_tokens"] for r in rows),
            "prefilled_per_later_turn": round(sum(r["prefilled"] for r in later) / max(1, len(later)), 1),
            "answer_tokens": sum(r["answer_tokens"] for r in rows)}


# ----------------------------------------------------------------------------- agentbolt
def agentbolt_episode(model: Any, tokenizer: Any, name: str, threads: int, limit: int, system: str,
                      observations: list[str], answer_tokens: int) -> list[dict[str, Any]]:
    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway
    from agentbolt.server.testing import serve_in_thread
    from agentbolt.store.memory import MemoryStore

    engine = TransformersEngine(model, tokenizer, max_batch_size=1, num_threads=threads, model_name=name,
                                prefix_cache_tokens=2 * limit)
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=Gateway(engine)) as base:
        admin = httpx.Client(base_url=base, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=60)
        admin.post("/v1/rollouts", json={"rollouts": [{"rollout_id": "episode"}]}).raise_for_status()
        claim = admin.post("/v1/claims", json={"worker_id": "bench", "limit": 1}).json()[0]
        admin.close()
        url = f"{base}/rollout/episode/attempt/{claim['attempt']['attempt_id']}/v1/chat/completions"
        headers = {"Authorization": f"Bearer {claim['token']}"}
        run_episode(url, headers, name, "Warm up.", ["ok"], 2, lambda: 0)  # warm-up: another conversation
        return run_episode(url, headers, name, system, observations, answer_tokens,
                           lambda: engine.stats.prompt_tokens_computed)


# ----------------------------------------------------------------------------- llama.cpp
class LlamaLog:
    """Prompt tokens llama-cpp-python's server evaluated, read from its verbose log."""

    HIT = re.compile(r"prefix-match hit, remaining (\d+) prompt tokens to eval")

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = 0
        self.evaluated = 0

    def __call__(self) -> int:
        text = self.path.read_text(errors="replace")
        new, self.seen = text[self.seen:], len(text)
        for block in new.split("Llama.generate")[1:] if "Llama.generate" in new else []:
            if m := self.HIT.search(block):
                self.evaluated += int(m.group(1))
        for m in re.finditer(r"prompt eval time =.*?/\s*(\d+) tokens", new):
            if "prefix-match hit" not in new:
                self.evaluated += int(m.group(1))
        return self.evaluated


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def llama_server(gguf: Path, threads: int, limit: int, log: Path) -> Iterator[str]:
    port = _free_port()
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
           "--n_ctx", str(limit), "--n_threads", str(threads), "--n_threads_batch", str(threads),
           "--n_batch", "512", "--verbose", "true"]
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 120
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"llama_cpp.server exited with {proc.returncode}: {log.read_text()[-1500:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError("llama_cpp.server did not start in 120 s")
            time.sleep(0.5)
        yield f"http://127.0.0.1:{port}/v1/chat/completions"
    finally:
        proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
        if proc.poll() is None:
            proc.kill()


def llama_episode(threads: int, limit: int, system: str, observations: list[str],
                  answer_tokens: int) -> list[dict[str, Any]] | str:
    try:
        import llama_cpp.server  # noqa: F401
    except ImportError as exc:
        return (f"llama-cpp-python's server is not installed ({exc}): pip install 'agentbolt[bench]' "
                "(llama-cpp-python[server]==0.3.36, compiles C++)")
    from f32_gguf import smollm2_f32_gguf

    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "server.log"
        with llama_server(smollm2_f32_gguf(), threads, limit, log) as url:
            counter = LlamaLog(log)
            run_episode(url, {}, "local", "Warm up.", ["ok"], 2, lambda: 0)
            counter()
            return run_episode(url, {}, "local", system, observations, answer_tokens, counter)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny random model, short prompts, no llama.cpp (seconds)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--turns", type=int, default=None, help="default 10 (smoke 3)")
    ap.add_argument("--system-tokens", type=int, default=None, help="default 6000 (smoke 100)")
    ap.add_argument("--observation-tokens", type=int, default=None, help="default 120 (smoke 20)")
    ap.add_argument("--answer-tokens", type=int, default=24)
    ap.add_argument("--peers", default="llama.cpp", help="llama.cpp or none")
    ap.add_argument("--per-turn", action="store_true", help="print every turn's row too")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)

    def emit(row: dict[str, Any]) -> None:
        print(json.dumps(row) if args.json else "  ".join(f"{k}={v}" for k, v in row.items()), flush=True)

    if args.smoke:
        from agentbolt.models.tiny import tiny_model

        model, tokenizer = tiny_model(vocab="bytes")
        name = "tiny"
    else:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from agentbolt.models.smollm2 import smollm2

        path = smollm2()
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
        tokenizer = AutoTokenizer.from_pretrained(path)
        name = "SmolLM2-135M-Instruct"
    limit = int(model.config.max_position_embeddings)
    args.turns = args.turns or (3 if args.smoke else 10)
    system = system_prompt(tokenizer, args.system_tokens or (100 if args.smoke else 6000))
    observations = [observation(tokenizer, t, args.observation_tokens or (20 if args.smoke else 120))
                    for t in range(1, args.turns + 1)]
    emit({"model": name, "threads": args.threads, "context_limit": limit, "turns": args.turns,
          "system_tokens": len(tokenizer(system)["input_ids"]), "answer_tokens_max": args.answer_tokens})
    ours = agentbolt_episode(model, tokenizer, name, args.threads, limit, system, observations, args.answer_tokens)
    if args.per_turn:
        for row in ours:
            emit({"engine": "agentbolt", **row})
    a = summary("agentbolt", ours)
    emit(a)
    if "llama.cpp" not in args.peers.split(","):
        return 0
    if args.smoke:
        emit({"engine": "llama.cpp", "skipped": "smoke mode: the tiny random model has no GGUF"})
        return 0
    theirs = llama_episode(args.threads, limit, system, observations, args.answer_tokens)
    if isinstance(theirs, str):
        emit({"engine": "llama.cpp", "skipped": theirs})
        return 0
    if args.per_turn:
        for row in theirs:
            emit({"engine": "llama.cpp", **row})
    b = summary("llama.cpp", theirs)
    emit(b)
    emit({"ratio": "agentbolt vs llama.cpp", "x_total": round(b["total_s"] / a["total_s"], 2),
          "x_later_turns": round(b["later_turns_s"] / a["later_turns_s"], 2)})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
