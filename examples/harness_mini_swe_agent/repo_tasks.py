"""Generated small repo tasks, each a directory with a failing test and a one-line issue.

Three kinds: fix a constant the test expects, rename a function so the test's import
works, create a file the test reads. Names and values are drawn from a seed; training
and held-out tasks use disjoint seeds, so a held-out repo is never trained on.
"""

from __future__ import annotations

import random
from pathlib import Path

NAMES = ["limit", "retries", "width", "depth", "timeout", "port", "size", "count", "level", "speed"]
VERBS = ["compute", "parse", "render", "merge", "scale", "count", "check", "load", "split", "join"]
WORDS = ["hello", "ready", "done", "ok", "green", "alpha", "delta", "omega", "sigma", "kappa"]


def _constant(rng: random.Random, repo: Path) -> str:
    name = rng.choice(NAMES).upper()
    wrong, right = rng.sample(range(2, 99), 2)
    (repo / "settings.py").write_text(f"{name} = {wrong}\n")
    (repo / "test_settings.py").write_text(f"from settings import {name}\n\n\ndef test_value():\n"
                                           f"    assert {name} == {right}\n")
    return f"The test test_settings.py fails: {name} in settings.py must be {right}. Fix settings.py."


def _rename(rng: random.Random, repo: Path) -> str:
    verb, noun = rng.choice(VERBS), rng.choice(NAMES)
    old, new = f"{verb}_{noun}s", f"{verb}_{noun}"
    (repo / "tool.py").write_text(f"def {old}(x):\n    return x\n")
    (repo / "test_tool.py").write_text(f"from tool import {new}\n\n\ndef test_call():\n    assert {new}(3) == 3\n")
    return f"The test test_tool.py fails: rename the function {old} in tool.py to {new}."


def _create(rng: random.Random, repo: Path) -> str:
    word = rng.choice(WORDS)
    stem = rng.choice(NAMES)
    (repo / "test_file.py").write_text(f"from pathlib import Path\n\n\ndef test_file():\n"
                                       f"    assert Path('{stem}.txt').read_text().strip() == '{word}'\n")
    return f"The test test_file.py fails: create the file {stem}.txt containing the word {word}."


KINDS = (_constant, _rename, _create)


def make_tasks(root: Path, n: int, seed: int, prefix: str) -> list[dict[str, str]]:
    """``n`` tasks under ``root`` (one repo directory each), as task dicts for the harness
    (``id``, ``repo``, ``problem``: the issue, ``kind``: constant, rename or create)."""
    tasks = []
    for i in range(n):
        rng = random.Random(f"{prefix}-{seed}-{i}")
        repo = root / f"{prefix}-{i:04d}"
        repo.mkdir(parents=True, exist_ok=True)
        kind = KINDS[i % len(KINDS)]
        problem = kind(rng, repo)
        tasks.append({"id": repo.name, "repo": str(repo), "problem": problem, "kind": kind.__name__.lstrip("_")})
    return tasks
