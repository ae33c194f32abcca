"""The sandbox's system-call filter: no handle to the kernel's key store.

The kernel keeps keys (``keyctl``, ``add_key``, ``request_key``) per user, not per mount
or pid namespace: a program that is uid 0 of the host (a root controller's) would read
the controller's session and user keyrings — tokens, Kerberos tickets, the keys of
encrypted directories. The filter answers those three calls with ``EPERM`` (as Docker's
default profile does) and lets everything else through. It is a classic BPF program
handed to bubblewrap (``--seccomp FD``), built here without libseccomp: it checks the
architecture first, so a 32-bit call on a 64-bit kernel is filtered by its own numbers.
"""

from __future__ import annotations

import os
import platform
import struct

__all__ = ["FILTERED_CALLS", "filter_fd", "keyring_filter", "supported"]

FILTERED_CALLS = ("add_key", "request_key", "keyctl")

_X32 = 0x40000000
# AUDIT_ARCH_* -> the numbers of add_key, request_key, keyctl on it
_ARCHES: dict[str, list[tuple[int, tuple[int, ...]]]] = {
    "x86_64": [
        (0xC000003E, (248, 249, 250, _X32 | 248, _X32 | 249, _X32 | 250)),  # x86_64 and its x32 ABI
        (0x40000003, (286, 287, 288)),  # i386 binaries on the same kernel
    ],
    "aarch64": [
        (0xC00000B7, (217, 218, 219)),
        (0x40000028, (309, 310, 311)),  # 32-bit ARM (EABI) binaries
    ],
}

_LD_W_ABS = 0x20
_JEQ_K = 0x15
_RET_K = 0x06
_ALLOW = 0x7FFF0000
_ERRNO_EPERM = 0x00050000 | 1
_ARCH_OFFSET = 4  # struct seccomp_data: int nr; __u32 arch; ...
_NR_OFFSET = 0


def supported() -> bool:
    """Whether this machine's architecture has a filter here."""
    return platform.machine() in _ARCHES


def keyring_filter() -> bytes:
    """The filter as an array of ``struct sock_filter`` (what ``--seccomp`` reads)."""
    prog: list[tuple[int, int, int, int]] = []
    for arch, numbers in _ARCHES.get(platform.machine(), []):
        rest: list[tuple[int, int, int, int]] = [(_LD_W_ABS, 0, 0, _NR_OFFSET)]
        for i, nr in enumerate(numbers):
            rest.append((_JEQ_K, len(numbers) - i, 0, nr))  # to the EPERM after the ALLOW
        rest += [(_RET_K, 0, 0, _ALLOW), (_RET_K, 0, 0, _ERRNO_EPERM)]
        prog += [(_LD_W_ABS, 0, 0, _ARCH_OFFSET), (_JEQ_K, 0, len(rest), arch), *rest]
    prog.append((_RET_K, 0, 0, _ALLOW))  # another architecture: not one this kernel runs here
    return b"".join(struct.pack("=HBBI", *ins) for ins in prog)


def filter_fd() -> int:
    """A file descriptor positioned at the start of :func:`keyring_filter` (a memfd)."""
    fd = os.memfd_create("agentbolt-seccomp", 0)
    os.write(fd, keyring_filter())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
