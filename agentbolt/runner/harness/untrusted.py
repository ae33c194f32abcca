"""Host code meeting what an untrusted program left: read it, write next to it, defuse it.

A program run by the harness may leave anything in the directories it could write (its
workspace, the reward file's directory): symbolic links to host files, links that climb
out (``../../etc``), FIFOs that block whoever opens them, devices, huge files, setuid
bits. Everything the controller does with those directories after the run goes through
this module (one helper everyone uses):

* :func:`read_left` reads one file *inside* a directory: every path component is opened
  with ``O_NOFOLLOW`` relative to its parent (an ``openat`` walk), so no link is followed
  anywhere on the way; only a regular file is read (a FIFO, socket or device is refused
  before it is opened for reading: no open can block); at most ``limit`` bytes.
* :func:`write_new` creates a file that did not exist (``O_EXCL | O_NOFOLLOW``): a link
  planted at its name is refused, never written through.
* :func:`defuse_tree` prepares a workspace for host code that knows none of this (a
  user's evaluator, which follows links): links whose target, resolved the way the
  program saw it (``/workspace`` at the root of its view), stays inside are rewritten as
  relative links to the same place; links that lead out, FIFOs, sockets and devices are
  removed; setuid and setgid bits are cleared. Run it after the program and every
  process it started has ended (the sandbox's end ensures that): then nothing races it.
"""

from __future__ import annotations

import errno
import os
import posixpath
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

__all__ = ["Defused", "LeftFileError", "defuse_tree", "read_left", "write_new"]

_LINK_HOPS = 40
"""Links followed while resolving one path, as the kernel's own limit (ELOOP)."""


class LeftFileError(ValueError):
    """A file a program left cannot be read safely; the message says what it is instead."""


def _walk_to_parent(root: Path, relative: PurePosixPath) -> int:
    """An fd of the directory holding ``relative``'s last component, no link followed."""
    parts = relative.parts
    if relative.is_absolute() or any(p in ("..", ".") for p in parts) or not parts:
        raise LeftFileError(f"{relative} is not a plain relative path inside {root}")
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                nxt = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise LeftFileError(f"{relative}: {part!r} is a link or not a directory; not followed") from None
                raise
            os.close(fd)
            fd = nxt
    except BaseException:
        os.close(fd)
        raise
    return fd


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def read_left(root: Path, relative: str | PurePosixPath, *, limit: int) -> bytes | None:
    """The bytes of the regular file ``root/relative``, or ``None`` when there is none.

    No link is followed (in any component), nothing but a regular file is opened for
    reading, and a file longer than ``limit`` bytes is refused. Raises
    :class:`LeftFileError` saying what is there instead."""
    rel = PurePosixPath(relative)
    try:
        parent = _walk_to_parent(root, rel)
    except FileNotFoundError:
        return None
    try:
        name = rel.parts[-1]
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            return None
        if not stat.S_ISREG(st.st_mode):
            raise LeftFileError(f"{rel} is {_kind(st.st_mode)}, not a regular file; it was not read")
        if st.st_size > limit:
            raise LeftFileError(f"{rel} holds {st.st_size} bytes, more than the {limit} read")
        # O_NONBLOCK: should it have been swapped for a FIFO since the stat, the open does not wait
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY
        try:
            fd = os.open(name, flags, dir_fd=parent)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise LeftFileError(f"{rel} is a symbolic link; it was not followed") from None
            raise
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise LeftFileError(f"{rel} changed into something else than a regular file; it was not read")
            data = bytearray()
            while len(data) <= limit and (chunk := os.read(fd, min(65536, limit + 1 - len(data)))):
                data += chunk
            if len(data) > limit:
                raise LeftFileError(f"{rel} holds more than the {limit} bytes read")
            return bytes(data)
        finally:
            os.close(fd)
    finally:
        os.close(parent)


def write_new(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Create ``path`` (which must not exist, not even as a link) and write ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


@dataclass
class Defused:
    """What :func:`defuse_tree` changed (relative paths)."""

    removed_links: list[str] = field(default_factory=list)
    """Links that led out of the workspace (or looped)."""
    rewritten_links: list[str] = field(default_factory=list)
    """Links into the workspace, now relative so they mean the same outside the sandbox."""
    removed_special: list[str] = field(default_factory=list)
    """FIFOs, sockets and devices."""
    cleared_setid: list[str] = field(default_factory=list)
    """Files whose setuid/setgid bits were cleared."""

    @property
    def removed(self) -> list[str]:
        return [*self.removed_links, *self.removed_special]


def defuse_tree(root: Path, *, seen_at: str = "/workspace") -> Defused:
    """Make ``root`` (a workspace the program saw at ``seen_at``) safe for host code that
    follows links: see the module docstring. Never follows a link itself."""
    done = Defused()
    stack = [""]
    while stack:
        rel_dir = stack.pop()
        with os.scandir(root / rel_dir if rel_dir else root) as entries:
            listed = list(entries)
        for entry in listed:
            rel = posixpath.join(rel_dir, entry.name) if rel_dir else entry.name
            st = entry.stat(follow_symlinks=False)
            if stat.S_ISLNK(st.st_mode):
                _defuse_link(root, rel, seen_at, done)
            elif stat.S_ISDIR(st.st_mode):
                stack.append(rel)
            elif not stat.S_ISREG(st.st_mode):
                os.unlink(entry.path)
                done.removed_special.append(rel)
            elif st.st_mode & (stat.S_ISUID | stat.S_ISGID):
                os.chmod(entry.path, stat.S_IMODE(st.st_mode) & ~(stat.S_ISUID | stat.S_ISGID))
                done.cleared_setid.append(rel)
    return done


def _defuse_link(root: Path, rel: str, seen_at: str, done: Defused) -> None:
    path = root / rel
    target = os.readlink(path)
    split = _split(target, seen_at)
    start = split if isinstance(split, _Absolute) else [*PurePosixPath(rel).parent.parts, *split]
    resolved = _resolve_inside(root, start, seen_at)
    os.unlink(path)
    if resolved is None:
        done.removed_links.append(rel)
        return
    relative = posixpath.relpath(posixpath.join("/", *resolved), posixpath.join("/", *PurePosixPath(rel).parent.parts))
    os.symlink(relative, path)
    if relative != target:
        done.rewritten_links.append(rel)


def _split(target: str, seen_at: str) -> list[str] | _Absolute:
    if target.startswith("/"):
        return _Absolute(target, seen_at)
    return [p for p in target.split("/") if p]


class _Absolute(list[str]):
    """An absolute link target: inside the workspace's view, or out."""

    def __init__(self, target: str, seen_at: str) -> None:
        norm = target.rstrip("/") or "/"
        base = seen_at.rstrip("/")
        inside = norm == base or norm.startswith(base + "/")
        super().__init__([p for p in norm[len(base):].split("/") if p] if inside else [])
        self.inside = inside


def _resolve_inside(root: Path, parts: list[str] | _Absolute, seen_at: str) -> list[str] | None:
    """Resolve ``parts`` (components from the workspace's top) the way the kernel would
    inside the sandbox; ``None`` when that leads out of the workspace or loops."""
    if isinstance(parts, _Absolute) and not parts.inside:
        return None
    todo = list(parts)
    current: list[str] = []
    hops = 0
    while todo:
        part = todo.pop(0)
        if part in ("", "."):
            continue
        if part == "..":
            if not current:
                return None
            current.pop()
            continue
        candidate = [*current, part]
        try:
            st = os.lstat(root.joinpath(*candidate))
        except FileNotFoundError:
            current = candidate  # dangling inside: harmless
            continue
        if not stat.S_ISLNK(st.st_mode):
            current = candidate
            continue
        hops += 1
        if hops > _LINK_HOPS:
            return None
        target = os.readlink(root.joinpath(*candidate))
        split = _split(target, seen_at)
        if isinstance(split, _Absolute):
            if not split.inside:
                return None
            current = []
        todo = [*split, *todo]
    return current
