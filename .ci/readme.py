"""The README's set-up commands, read from README.md itself, and a fresh copy to run them in.

Shared by ``.ci/readme_main_job.py`` (the first command, the main job) and
``.ci/readme_tests.py`` (the second, the tests): CI runs what a newcomer copies, so the
README and CI cannot drift apart.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAIN_JOB = "1. Install and run the main job"
TESTS = "2. Install and run the tests"


def command(readme: str, heading: str) -> str:
    """The one-line bash command of the README's ``heading`` section."""
    start = readme.find(heading)
    if start < 0:
        raise SystemExit(f"README.md has no '{heading}' section: its command cannot be found")
    block = re.search(r"```bash\n(.*?)\n```", readme[start:], re.DOTALL)
    if block is None:
        raise SystemExit(f"README.md's '{heading}' section has no ```bash block")
    lines = [ln.strip() for ln in block.group(1).splitlines() if ln.strip() and not ln.strip().startswith("#")]
    if len(lines) != 1:
        raise SystemExit(f"the '{heading}' block should be one command line, found {len(lines)}: {lines}")
    return lines[0]


def copy_tree(dest: Path) -> None:
    """Tracked and untracked, not ignored, files of the checkout (no .venv, no runs/), modes kept."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            check=True, capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        src = ROOT / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)


@contextmanager
def fresh_copy(tag: str, *, keep: bool = False) -> Iterator[Path]:
    """A new temporary directory holding :func:`copy_tree`'s files; removed afterwards
    unless ``keep`` (then its path is printed, prefixed with ``[tag]``)."""
    work = Path(tempfile.mkdtemp(prefix=f"agentbolt-{tag}-"))
    try:
        copy_tree(work)
        yield work
    finally:
        if keep:
            print(f"[{tag}] kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
