"""A fresh copy of a task's workspace, without ``.git`` and the paths marked hidden."""

from __future__ import annotations

import fnmatch
import os
import shutil
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.sandbox.config import HIDDEN_MARKER, Sandbox

__all__ = ["ALWAYS_HIDDEN", "copy_workspace", "hidden_patterns", "task_workspace", "write_files"]

ALWAYS_HIDDEN = (".git", HIDDEN_MARKER)


def task_workspace(config: Sandbox, task: Any) -> tuple[Path | None, list[str]]:
    """The directory a rollout's workspace is copied from (the task's own, named by the
    field ``config.task_workspace_field``, else ``config.workspace``; None: an empty
    one) and the patterns left out of the copy (:func:`hidden_patterns`, with the task's
    ``config.task_hidden_field``). :class:`HarnessConfigError` when it is not a directory."""
    fields = task if isinstance(task, Mapping) else {}
    named = fields.get(config.task_workspace_field)
    source = Path(named).absolute() if named else config.workspace
    if source is not None and not source.is_dir():
        raise HarnessConfigError(
            f"the workspace {source} is not a directory: give Sandbox(workspace=...) an existing directory, or a "
            f"task field {config.task_workspace_field!r} that names one"
        )
    extra = fields.get(config.task_hidden_field) or []
    return source, hidden_patterns(source, [*config.hidden, *map(str, [extra] if isinstance(extra, str) else extra)])


def hidden_patterns(source: Path | None, extra: Iterable[str]) -> list[str]:
    """``.git``, the marker file's patterns (``#`` starts a comment) and ``extra``."""
    patterns = list(ALWAYS_HIDDEN)
    marker = source / HIDDEN_MARKER if source is not None else None
    if marker is not None and marker.is_file():
        for line in marker.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                patterns.append(line)
    patterns.extend(p.strip() for p in extra if p and p.strip())
    return [p.strip("/") for p in patterns]


def _is_hidden(relative: str, name: str, patterns: list[str]) -> bool:
    for pattern in patterns:
        if "/" in pattern:
            if fnmatch.fnmatchcase(relative, pattern):
                return True
        elif fnmatch.fnmatchcase(name, pattern):
            return True
    return False


def copy_workspace(source: Path | None, target: Path, patterns: list[str]) -> list[str]:
    """Copy ``source`` into the empty directory ``target``, leaving hidden paths out
    (symlinks are copied as links). Returns the relative paths left out."""
    target.mkdir(parents=True, exist_ok=True)
    if source is None:
        return []
    if not source.is_dir():
        raise FileNotFoundError(f"the sandbox workspace {source} is not a directory")
    left_out: list[str] = []
    for root, dirs, files in os.walk(source):
        base = Path(root).relative_to(source)
        for name in list(dirs):
            relative = (base / name).as_posix()
            src = Path(root) / name
            if _is_hidden(relative, name, patterns):
                dirs.remove(name)
                left_out.append(relative)
            elif src.is_symlink():
                dirs.remove(name)
                os.symlink(os.readlink(src), target / relative)
            else:
                (target / relative).mkdir()
        for name in files:
            relative = (base / name).as_posix()
            if _is_hidden(relative, name, patterns):
                left_out.append(relative)
                continue
            src = Path(root) / name
            if src.is_symlink():
                os.symlink(os.readlink(src), target / relative)
            elif src.is_file():  # sockets, fifos and devices are not copied
                shutil.copy2(src, target / relative)
    return left_out


def write_files(root: Path, files: Mapping[str, str]) -> Path:
    """Create ``root`` with ``files`` (relative paths inside it, UTF-8 text); ``root``."""
    root.mkdir(parents=True, exist_ok=True)
    for relative, text in files.items():
        target = (root / relative).resolve()
        if root.resolve() not in target.parents:
            raise HarnessConfigError(f"a file written for the program must stay inside {root}, got {relative!r}")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root
