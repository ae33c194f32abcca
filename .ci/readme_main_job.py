#!/usr/bin/env python3
"""Run the README's main-job command as a newcomer would, in smoke mode, and check it.

The command is read from README.md itself (the bash block under "1. Install and run the
main job"), so the README and this check cannot drift apart. It runs verbatim — with
``--smoke`` added to its last part, the main job — in a fresh copy of the working tree
(tracked and untracked, not ignored, files), so its ``python3 -m venv .venv`` makes a
brand-new virtual environment that holds only what the README's line installs. Then the
job's output must show a held-out evaluation that scored rollouts (not "n/a").

Why: once, every rollout of the main job failed on a fresh machine (``openai`` was only
in the ``dev`` extra) while CI, which installs ``.[dev,torch]``, stayed green.

    python3 .ci/readme_main_job.py            # exit 0 when the main job works as printed
    python3 .ci/readme_main_job.py --print    # only show the command it would run
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme import MAIN_JOB, ROOT, command, fresh_copy  # noqa: E402

HEADING = MAIN_JOB
SCORED = re.compile(r"held-out rollouts scored: before (\d+)/(\d+), after (\d+)/(\d+)")


def main_job_command(readme: str) -> str:
    """The one-line bash command of the README's main-job block."""
    return command(readme, MAIN_JOB)


def smoke_command(command: str) -> str:
    """The command with ``--smoke`` given to its last part (the main job)."""
    if "examples/calc/train.py" not in command.split("&&")[-1]:
        raise SystemExit(f"the main job's command does not end by running examples/calc/train.py: {command}")
    return command + " --smoke"


def check_output(text: str) -> list[str]:
    """What is wrong with the main job's output (nothing: it trained and scored)."""
    problems = []
    found = SCORED.search(text)
    if found is None:
        problems.append("no 'held-out rollouts scored: ...' line: the job stopped before its summary")
    else:
        before, after = int(found.group(1)), int(found.group(3))
        if before == 0 or after == 0:
            problems.append(f"the held-out evaluation scored no rollout ({found.group(0)})")
    if re.search(r"held-out success .*n/a", text):
        problems.append("held-out success is 'n/a'")
    return problems


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--print", action="store_true", help="print the command and exit")
    p.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds for install + smoke run")
    args = p.parse_args(argv)
    command = smoke_command(main_job_command((ROOT / "README.md").read_text()))
    print(f"[readme-main-job] {command}", flush=True)
    if args.print:
        return 0
    with fresh_copy("readme-main-job", keep=args.keep) as work:
        t0 = time.monotonic()
        run = subprocess.run(["bash", "-c", command], cwd=work, capture_output=True, text=True,
                             timeout=args.timeout, check=False, stdin=subprocess.DEVNULL)
        output = run.stdout + run.stderr
        print(f"[readme-main-job] exit {run.returncode} after {time.monotonic() - t0:.0f} s", flush=True)
        problems = [f"the command exited with {run.returncode}"] if run.returncode else []
        problems += check_output(run.stdout)
        if problems:
            print(output[-6000:])
            for problem in problems:
                print(f"[readme-main-job] FAILED: {problem}")
            return 1
        print("[readme-main-job] " + "; ".join(
            line for line in run.stdout.splitlines() if line.startswith(("held-out success", "held-out rollouts"))))
        return 0


if __name__ == "__main__":
    sys.exit(main())
