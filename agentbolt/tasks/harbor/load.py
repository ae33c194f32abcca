"""``load(path)``: a Harbor dataset — one task directory, or a directory of them."""

from __future__ import annotations

from pathlib import Path

from agentbolt.tasks.harbor.errors import HarborTaskError
from agentbolt.tasks.harbor.task import HarborTask

__all__ = ["load"]


def load(path: str | Path) -> list[HarborTask]:
    """The tasks at ``path``: the task itself when it holds a ``task.toml``, else every
    subdirectory that does (sorted by name). A subdirectory that looks like a task but is
    broken fails loudly; a directory with no task at all is an error."""
    root = Path(path)
    if not root.is_dir():
        raise HarborTaskError(f"{root} is not a directory of Harbor tasks")
    if (root / "task.toml").is_file():
        return [HarborTask.read(root)]
    tasks = [HarborTask.read(d) for d in sorted(root.iterdir()) if d.is_dir() and (d / "task.toml").is_file()]
    if not tasks:
        raise HarborTaskError(f"{root} holds no Harbor task (no task.toml in it or in its subdirectories)")
    return tasks
