"""Measure the UNTRAINED model on the calc task, straight through the local engine.

A tool for choosing the task's difficulty: GRPO needs an untrained success rate that is
low but above zero. Runs the held-out set greedily (temperature 0) and sampled
(temperature 1.0), all episodes at once so the engine batches them, and prints the
call-format rate, correct-call rate, P(correct answer | correct call), success rate,
mean reward and wall time per mode.

    python examples/calc/probe.py --n 64 --difficulty word --threads 2 --batch 32
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from task import (
    DEFAULT_DIFFICULTY,
    MAX_TOKENS,
    PROTOCOLS,
    CalcEpisode,
    heldout_set,
    reward,
)


@dataclass
class ModeResult:
    """What one pass over the set measured."""

    mode: str
    episodes: list[CalcEpisode]
    seconds: float

    def rate(self, flags: list[bool]) -> float:
        return sum(flags) / len(flags) if flags else float("nan")

    def row(self) -> list[str]:
        eps = self.episodes
        correct_call = [e for e in eps if e.call_correct]
        return [
            self.mode,
            f"{self.rate([e.call_ok for e in eps]):.1%}",
            f"{self.rate([e.call_correct for e in eps]):.1%}",
            f"{self.rate([e.correct for e in correct_call]):.1%}" if correct_call else "n/a",
            f"{self.rate([e.correct for e in eps]):.1%}",
            f"{sum(reward(e) for e in eps) / len(eps):.3f}",
            f"{self.seconds:.1f}",
        ]


async def run_episode(engine: Any, episode: CalcEpisode, temperature: float, seed: int,
                      progress: Progress, bar: Any) -> CalcEpisode:
    turn = 0
    while not episode.done:
        body = {"messages": episode.messages(), "max_tokens": MAX_TOKENS, "temperature": temperature,
                "seed": seed * 10 + turn}
        answer = await engine.chat_completions(body)
        episode.consume(answer["choices"][0]["message"]["content"] or "")
        turn += 1
    progress.advance(bar)
    return episode


async def run_mode(engine: Any, tasks: list[dict[str, Any]], protocol: str, mode: str, seed: int,
                   temperature: float = 1.0) -> ModeResult:
    """All episodes at once; ``greedy`` runs at temperature 0, ``sampled`` at ``temperature``."""
    if mode not in ("greedy", "sampled"):
        raise SystemExit(f"unknown mode {mode!r}; use greedy and/or sampled")
    temperature = 0.0 if mode == "greedy" else temperature
    start = time.perf_counter()
    with Progress(transient=True) as progress:
        bar = progress.add_task(f"{mode} x{len(tasks)}", total=len(tasks))
        episodes = await asyncio.gather(*(
            run_episode(engine, CalcEpisode(t, PROTOCOLS[protocol]), temperature, seed + i, progress, bar)
            for i, t in enumerate(tasks)))
    return ModeResult(mode, list(episodes), time.perf_counter() - start)


async def main(args: argparse.Namespace) -> None:
    import agentbolt.models
    from agentbolt.engines.transformers_engine import TransformersEngine

    console = Console()
    engine = TransformersEngine.from_pretrained(agentbolt.models.smollm2(), num_threads=args.threads,
                                                max_batch_size=args.batch)
    await engine.start()
    try:
        tasks = heldout_set(args.n, args.difficulty)
        prompt_ids = engine.chat_prompt_ids({"messages": CalcEpisode(tasks[0], PROTOCOLS[args.protocol]).messages()})
        console.print(f"protocol={args.protocol} difficulty={args.difficulty} n={args.n} "
                      f"threads={args.threads} batch={args.batch} prompt_tokens={len(prompt_ids)}")
        table = Table(f"mode (sampled at T={args.temperature})", "call ok", "correct call", "P(ans|call)", "success", "mean reward", "seconds")
        for mode in args.modes.split(","):
            result = await run_mode(engine, tasks, args.protocol, mode, args.seed, args.temperature)
            table.add_row(*result.row())
            if args.show:
                for e in result.episodes[: args.show]:
                    console.print(f"[dim]{mode}[/] {e.task['answer']} {e.replies!r} -> {e.answer}")
        console.print(table)
    finally:
        await engine.close()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=64, help="held-out episodes per mode")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--difficulty", default=DEFAULT_DIFFICULTY, choices=["mul", "word", "multi"])
    parser.add_argument("--protocol", default="fewshot2", choices=sorted(PROTOCOLS))
    parser.add_argument("--modes", default="greedy,sampled", help="comma-separated: greedy, sampled")
    parser.add_argument("--temperature", type=float, default=1.0, help="temperature of the sampled mode")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=32, help="engine max_batch_size")
    parser.add_argument("--show", type=int, default=0, help="print the replies of the first N episodes")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
