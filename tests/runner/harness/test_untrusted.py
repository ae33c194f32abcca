"""Host code reading what a program left: no link followed, nothing that blocks, bounded."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from agentbolt.runner.harness.untrusted import LeftFileError, defuse_tree, read_left, write_new


@pytest.fixture
def left(tmp_path: Path) -> Path:
    """A directory a program wrote, and a host secret beside it."""
    (tmp_path / "secret").write_text("host secret\n")
    root = tmp_path / "left"
    (root / "sub").mkdir(parents=True)
    (root / "sub" / "ok.txt").write_text("0.5\n")
    return root


def test_a_regular_file_is_read(left: Path) -> None:
    assert read_left(left, "sub/ok.txt", limit=100) == b"0.5\n"
    assert read_left(left, "absent", limit=100) is None
    assert read_left(left, "nodir/absent", limit=100) is None


def test_a_link_as_the_file_is_not_followed(left: Path) -> None:
    (left / "reward").symlink_to(left.parent / "secret")
    with pytest.raises(LeftFileError, match="symbolic link") as caught:
        read_left(left, "reward", limit=100)
    assert "host secret" not in str(caught.value)


def test_a_link_on_the_way_is_not_followed(left: Path) -> None:
    (left / "up").symlink_to(left.parent)
    with pytest.raises(LeftFileError, match="not followed"):
        read_left(left, "up/secret", limit=100)


def test_a_path_that_climbs_is_refused(left: Path) -> None:
    with pytest.raises(LeftFileError):
        read_left(left, "../secret", limit=100)
    with pytest.raises(LeftFileError):
        read_left(left, str(left.parent / "secret"), limit=100)


def test_a_fifo_is_refused_without_blocking(left: Path) -> None:
    os.mkfifo(left / "reward")  # opening it for reading would wait for a writer forever
    with pytest.raises(LeftFileError, match="FIFO"):
        read_left(left, "reward", limit=100)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_is_refused(left: Path) -> None:
    os.mknod(left / "reward", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero: endless
    with pytest.raises(LeftFileError, match="character device"):
        read_left(left, "reward", limit=100)


def test_a_file_past_the_limit_is_refused(left: Path) -> None:
    (left / "big").write_bytes(b"1" * 101)
    with pytest.raises(LeftFileError, match="101 bytes"):
        read_left(left, "big", limit=100)
    assert read_left(left, "big", limit=101) == b"1" * 101


def test_writing_never_goes_through_a_planted_link(left: Path) -> None:
    (left / "output").symlink_to(left.parent / "secret")
    with pytest.raises(FileExistsError):
        write_new(left / "output", b"program output")
    assert (left.parent / "secret").read_text() == "host secret\n"
    write_new(left / "fresh", b"x")
    assert (left / "fresh").read_bytes() == b"x"


def test_defusing_keeps_links_inside_and_removes_links_out(left: Path) -> None:
    outside = left.parent / "secret"
    links = {
        "inside_relative": "sub/ok.txt",              # stays: means the same anywhere
        "inside_absolute": "/workspace/sub/ok.txt",   # the program's view: rewritten relative
        "out_absolute": str(outside),                 # a host file
        "out_system": "/etc/passwd",                  # visible read-only inside, writable for a host evaluator
        "out_climb": "../secret",
        "sub/out_deep": "../../secret",
        "loop": "loop",
    }
    for name, target in links.items():
        os.symlink(target, left / name)
    # a link to its own parent, then a climb through it: the kernel leaves the workspace
    os.symlink("..", left / "sub" / "parent")
    os.symlink("parent/../secret", left / "sub" / "via_parent")
    os.mkfifo(left / "pipe")
    (left / "tool").write_text("#!/bin/sh\n")
    os.chmod(left / "tool", 0o4755)

    done = defuse_tree(left)

    assert sorted(done.removed_links) == sorted(
        ["out_absolute", "out_system", "out_climb", "sub/out_deep", "loop", "sub/via_parent"]
    )
    assert done.removed_special == ["pipe"] and done.cleared_setid == ["tool"]
    assert os.readlink(left / "inside_relative") == "sub/ok.txt"
    assert os.readlink(left / "inside_absolute") == "sub/ok.txt"
    assert (left / "inside_absolute").read_text() == "0.5\n"
    assert os.readlink(left / "sub" / "parent") == ".."  # its own parent: the workspace's top, inside
    assert stat.S_IMODE((left / "tool").stat().st_mode) == 0o755
    for name in done.removed:
        assert not os.path.lexists(left / name)
    # what remains resolves inside, for host code that follows links
    for path in left.rglob("*"):
        if path.is_symlink():
            assert Path(os.path.realpath(path)).is_relative_to(left.resolve()), path
