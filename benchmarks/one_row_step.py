"""Time per one-row decode step of the local engine (``OneRowStep``): its ops on one
intra-op thread (as the engine runs it) against torch's 2 intra-op threads (as it ran
before), alternating in one process, from a worker thread with ``torch.set_num_threads(2)``
as the engine runs it.

    python benchmarks/one_row_step.py                 # SmolLM2-135M, fp32, 40 steps x 4 rounds
    python benchmarks/one_row_step.py --smoke --json  # tiny random model, seconds

Per candidate and round: wall ms per step, the process's CPU ms per step and the CPU ms of
the engine's thread (the rest is torch's other intra-op thread). On a shared machine
the wall time follows the load; the CPU times say what a step costs, the load aside (they
still include memory stalls from other processes' traffic). The load average is printed
beside every round.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from agentbolt.engines.local.llama_forward import RaggedLlama, Step
from agentbolt.engines.local.one_row import OneRowStep
from agentbolt.models.tiny import tiny_model


def _model(smoke: bool) -> Any:
    if smoke:
        return tiny_model()[0]
    from transformers import AutoModelForCausalLM

    from agentbolt.models.smollm2 import smollm2

    return AutoModelForCausalLM.from_pretrained(smollm2(), dtype=torch.float32).eval()


def measure(model: Any, steps: int, rounds: int, prompt_len: int = 40) -> list[dict[str, Any]]:
    """Rows ``{"step", "round", "wall_ms", "process_cpu_ms", "engine_thread_cpu_ms", "load"}``."""
    runner = RaggedLlama(model, slots=1, max_len=prompt_len + steps + 8, device=torch.device("cpu"))
    one = runner.one_row
    two = OneRowStep(model, runner.linear, heads=runner.heads, kv_heads=runner.kv_heads, head_dim=runner.head_dim,
                     cos=one.cos, sin=one.sin, threads=None)
    rows: list[dict[str, Any]] = []

    def work() -> None:
        torch.set_num_threads(2)
        with torch.inference_mode():
            runner.forward(Step([], [], [list(range(100, 100 + prompt_len))], [0]))
            runner.reserve(prompt_len + steps + 1)
            for r in range(rounds):
                order = [("1 intra-op", one), ("2 intra-op", two)]
                for name, step in order if r % 2 == 0 else order[::-1]:
                    step(5, prompt_len, runner.k, runner.v)  # warm: the weight copies exist
                    wall, cpu, mine = time.perf_counter(), time.process_time(), time.thread_time()
                    for i in range(steps):
                        step(5, prompt_len + i, runner.k, runner.v)
                    rows.append({"step": name, "round": r,
                                 "wall_ms": round(1e3 * (time.perf_counter() - wall) / steps, 2),
                                 "process_cpu_ms": round(1e3 * (time.process_time() - cpu) / steps, 2),
                                 "engine_thread_cpu_ms": round(1e3 * (time.thread_time() - mine) / steps, 2),
                                 "load": os.getloadavg()[0]})

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--smoke", action="store_true", help="tiny random model, few steps (seconds)")
    ap.add_argument("--steps", type=int, default=None, help="steps per round (default 40, smoke 4)")
    ap.add_argument("--rounds", type=int, default=4, help="rounds, alternating which step runs first (default 4)")
    ap.add_argument("--json", action="store_true", help="print one JSON line per round")
    args = ap.parse_args()
    steps = args.steps or (4 if args.smoke else 40)
    for row in measure(_model(args.smoke), steps, args.rounds):
        print(json.dumps(row) if args.json else
              f"round {row['round']} {row['step']:>10}: wall {row['wall_ms']:7.1f} ms/step, "
              f"CPU {row['process_cpu_ms']:6.1f} (engine thread {row['engine_thread_cpu_ms']:5.1f}), "
              f"load {row['load']:.2f}", flush=True)


if __name__ == "__main__":
    main()
