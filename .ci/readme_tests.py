#!/usr/bin/env python3
"""Run the README's test command as printed, in a fresh copy of the checkout, and check it.

The command is read from README.md (the bash block under "2. Install and run the tests")
and run verbatim with ``bash -c`` in a fresh copy of the working tree (tracked and
untracked, not ignored, files: no ``.venv``), so everything the suite needs must come from
that command itself. The run passes when the command exits 0 and pytest's last line
reports no failure and no error.

Why: once, CI installed AutoGen by itself while the README's command did not, so the
README's command failed on a fresh machine (``No module named 'autogen_ext'``) while CI
stayed green.

    python3 .ci/readme_tests.py                        # the whole suite, as printed
    python3 .ci/readme_tests.py --print                # only show the command
    python3 .ci/readme_tests.py --readme OLD.md -- tests/frameworks   # another README, fewer tests
"""

from __future__ import annotations

import argparse
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from readme import ROOT, TESTS, command, fresh_copy  # noqa: E402

FINAL = re.compile(r"^=*\s*(?P<counts>(\d+ \w+(, )?)+) in [\d.]+s", re.MULTILINE)


def problems_in(output: str, returncode: int) -> list[str]:
    """What is wrong with a run of the test command (nothing: it passed)."""
    found = [f"the command exited with {returncode}"] if returncode else []
    finals = FINAL.findall(output)
    if not finals:
        found.append("pytest printed no final summary line: the command stopped before the tests ended")
    else:
        counts = finals[-1][0]
        for bad in ("failed", "error", "errors"):
            if re.search(rf"\d+ {bad}\b", counts):
                found.append(f"pytest reported {counts}")
                break
    return found


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--print", action="store_true", help="print the command and exit")
    p.add_argument("--keep", action="store_true", help="keep the copy (its path is printed)")
    p.add_argument("--readme", type=Path, default=ROOT / "README.md", help="the README to read the command from")
    p.add_argument("--timeout", type=float, default=4800.0, help="seconds for install + tests")
    p.add_argument("pytest_args", nargs="*", help="appended to the command (after --): fewer tests")
    args = p.parse_args(argv)
    line = command(args.readme.read_text(), TESTS)
    if args.pytest_args:
        line = f"{line} {shlex.join(args.pytest_args)}"
    print(f"[readme-tests] {line}", flush=True)
    if args.print:
        return 0
    with fresh_copy("readme-tests", keep=args.keep) as work:
        print(f"[readme-tests] in a fresh copy: {work}", flush=True)
        t0 = time.monotonic()
        tail: list[str] = []
        limit = ["timeout", "--kill-after=60", str(int(args.timeout))]
        with subprocess.Popen([*limit, "bash", "-c", line], cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, stdin=subprocess.DEVNULL) as proc:
            assert proc.stdout is not None
            for out in proc.stdout:  # streamed: the suite runs for many minutes
                sys.stdout.write(out)
                sys.stdout.flush()
                tail = [*tail, out][-400:]
        if proc.returncode in (124, 137):
            print(f"[readme-tests] FAILED: stopped after {args.timeout:.0f} s (exit {proc.returncode})")
            return 1
        problems = problems_in("".join(tail), proc.returncode)
        print(f"[readme-tests] exit {proc.returncode} after {time.monotonic() - t0:.0f} s", flush=True)
        for problem in problems:
            print(f"[readme-tests] FAILED: {problem}")
        return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
