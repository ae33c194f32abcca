"""Attacks on the kernel's interfaces from inside the sandbox (issue 29, class 1): host-wide
``/proc`` knobs, the kernel's memory and keys, capabilities, namespaces, devices. Every
probe is harmless even if it got through (files are opened, never written)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentbolt.types import RolloutStatus
from runner.harness.attacks import run_attacks, stderr_tails
from runner.harness.helpers import Served

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

BODY = r'''
libc = ctypes.CDLL(None, use_errno=True)
def opens(path, flags):
    try:
        os.close(os.open(path, flags | os.O_NONBLOCK))
        return True
    except OSError:
        return False
def reads(path):
    try:
        with open(path, "rb") as fh:
            return len(fh.read(4096)) > 0
    except OSError:
        return False
if attack == "honest":                 # the ordinary parts of /proc still work
    assert reads("/proc/self/status") and reads("/proc/cpuinfo") and reads("/proc/meminfo")
    assert reads("/proc/sys/kernel/osrelease")    # readable, not writable
    answer()
elif attack == "sysctl_core_pattern":  # host-wide: where core dumps go (a pipe to a program = host root)
    if opens("/proc/sys/kernel/core_pattern", os.O_WRONLY): pwned("core_pattern writable")
elif attack == "sysctl_any":           # any host-wide or namespaced knob
    for path in ("/proc/sys/vm/drop_caches", "/proc/sys/kernel/modprobe", "/proc/sys/fs/file-max",
                 "/proc/sys/net/ipv4/ip_forward", "/proc/sys/kernel/hostname"):
        if opens(path, os.O_WRONLY): pwned(path)
elif attack == "sysrq":
    for path in ("/proc/sysrq-trigger", "/proc/irq/default_smp_affinity"):
        if opens(path, os.O_WRONLY): pwned(path)
elif attack == "kernel_secrets":       # the kernel's memory, symbols, log, the controller's keys
    for path in ("/proc/kcore", "/proc/kallsyms", "/proc/kmsg", "/proc/keys", "/proc/key-users",
                 "/proc/timer_list", "/proc/kpageflags"):
        if reads(path): pwned(path)
elif attack == "capabilities":
    status = open("/proc/self/status").read()
    caps = {l.split(":")[0]: int(l.split()[1], 16) for l in status.splitlines() if l.startswith("Cap")}
    if caps["CapEff"] or caps["CapPrm"] or caps["CapBnd"] or caps["CapAmb"]: pwned(caps)
    if libc.mount(b"none", b"/tmp", b"tmpfs", 0, None) == 0: pwned("mount")
    if libc.umount2(b"/proc/sys", 2) == 0: pwned("umount /proc/sys")
elif attack == "namespaces":           # a user namespace of its own would give it every capability there
    for flag in (0x10000000, 0x00020000 | 0x10000000):   # CLONE_NEWUSER, CLONE_NEWNS|NEWUSER
        if libc.unshare(flag) == 0: pwned(f"unshare {flag:#x}")
    try:
        os.setns(os.open("/proc/1/ns/net", os.O_RDONLY), 0)
    except OSError:
        pass
    if os.path.exists("/sys/class") or os.path.exists("/sys/fs/cgroup/memory"): pwned("/sys")
elif attack == "devices":
    for path in ("/dev/shm/null", "/tmp/mem", "/workspace/sda"):
        try:
            os.mknod(path, 0o20600, os.makedev(1, 1))   # /dev/mem
            pwned("mknod " + path)
        except OSError:
            pass
    if opens("/dev/newfile", os.O_WRONLY | os.O_CREAT): pwned("/dev writable")
    for path in ("/dev/mem", "/dev/kmsg", "/dev/sda", "/dev/vda", "/dev/fuse", "/dev/kvm"):
        if os.path.exists(path): pwned(path)
elif attack == "init":                 # the sandbox's init holds the report pipe
    for path in ("/proc/1/mem", "/proc/1/environ", "/proc/1/fd/3", "/proc/1/fd/4"):
        if reads(path): pwned(path)
'''

ATTACKS = ["sysctl_core_pattern", "sysctl_any", "sysrq", "kernel_secrets", "capabilities", "namespaces", "devices",
           "init"]


@pytest.mark.timeout(120)
async def test_kernel_interfaces_are_out_of_reach(served: Served, tmp_path: Path) -> None:
    core_pattern = Path("/proc/sys/kernel/core_pattern").read_text()
    by = await run_attacks(served, tmp_path, BODY, ATTACKS)
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 1.0
    assert {a: (by[a].status, by[a].reward) for a in ATTACKS} == dict.fromkeys(ATTACKS, (
        RolloutStatus.SUCCEEDED, 0.0)), await stderr_tails(served, by)
    assert Path("/proc/sys/kernel/core_pattern").read_text() == core_pattern
