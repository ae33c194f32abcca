"""Attacks on the controller's secrets from inside the sandbox (issue 29, class 6): its
environment (an admin token, cloud keys), its keyrings, the host's credential files,
file descriptors it holds. The honest control still finds what it needs (PATH, its
own variables, the gateway)."""

from __future__ import annotations

import ctypes
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from agentbolt.types import RolloutStatus
from runner.harness.attacks import run_attacks, stderr_tails
from runner.harness.helpers import Served

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

ADMIN_VALUE = "admin-token-of-the-controller"
CLOUD_VALUE = "cloud-key-of-the-controller"
KEY_VALUE = b"keyring-secret-of-the-controller"
KEY_NAME = b"agentbolt-test-29"

BODY = r'''
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
SECRETS = sys.argv[2].split(",")
def has_secret(text):
    return any(s in text for s in SECRETS)
KEYCTL = {"x86_64": 250, "aarch64": 219}[os.uname().machine]
if attack == "honest":
    assert os.environ["OPENAI_BASE_URL"].startswith("http://127.0.0.1:"), os.environ
    assert "OPENAI_API_KEY" in os.environ and os.environ["PATH"]
    assert os.environ["AGENTBOLT_TASK"]
    import shutil; assert shutil.which("sh")
    answer()
elif attack == "environment":
    if has_secret(json.dumps(dict(os.environ))): pwned("env")
    for pid in os.listdir("/proc"):
        try:
            if pid.isdigit() and has_secret(open(f"/proc/{pid}/environ", "rb").read().decode("latin-1")):
                pwned("environ of " + pid)
        except OSError:
            pass
elif attack == "keyring":
    for ring in (-3, -4, -5):      # session, user, user session
        found = libc.syscall(KEYCTL, 10, ring, b"user", b"agentbolt-test-29", 0)   # KEYCTL_SEARCH
        if found > 0:
            buf = ctypes.create_string_buffer(256)
            n = libc.syscall(KEYCTL, 11, found, buf, 256)                           # KEYCTL_READ
            pwned(("key", ring, buf.raw[:max(n, 0)]))
    try:
        if "agentbolt-test-29" in open("/proc/keys").read(): pwned("/proc/keys")
    except OSError:
        pass
elif attack == "credential_files":
    import glob
    for path in ["/etc/shadow", "/etc/gshadow", "/etc/sudoers", *glob.glob("/etc/ssh/ssh_host_*_key"),
                 *glob.glob("/etc/ssl/private/*"), *glob.glob("/root/*"), *glob.glob("/root/.*"),
                 *glob.glob("/home/*/.*")]:
        try:
            if open(path, "rb").read(64): pwned(path)
        except OSError:
            pass
elif attack == "descriptors":      # anything the controller left open
    for fd in range(3, 1024):
        try:
            os.fstat(fd)
        except OSError:
            continue
        if os.readlink(f"/proc/self/fd/{fd}") != "/proc/self/fd": pwned(("fd", fd, os.readlink(f"/proc/self/fd/{fd}")))
'''

ATTACKS = ["environment", "keyring", "credential_files", "descriptors"]


@pytest.fixture
def controller_key() -> Iterator[None]:
    """A secret in the controller's session and user keyrings."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    nr = {"x86_64": (248, 250), "aarch64": (217, 219)}.get(os.uname().machine)
    if nr is None:
        pytest.skip("no keyctl numbers for this machine here")
    keys = [libc.syscall(nr[0], b"user", KEY_NAME, KEY_VALUE, len(KEY_VALUE), ring) for ring in (-3, -4)]  # @s, @u
    if min(keys) < 0:
        pytest.skip(f"the kernel's key store is not available here (errno {ctypes.get_errno()})")
    try:
        yield
    finally:
        for key in keys:
            libc.syscall(nr[1], 21, key)  # KEYCTL_INVALIDATE


@pytest.mark.timeout(120)
async def test_no_secret_of_the_controller_reaches_the_program(
    served: Served, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, controller_key: None
) -> None:
    monkeypatch.setenv("AGENTBOLT_ADMIN_TOKEN", ADMIN_VALUE)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", CLOUD_VALUE)
    by = await run_attacks(served, tmp_path, BODY, ATTACKS, extra=[f"{ADMIN_VALUE},{CLOUD_VALUE}"])
    assert by["honest"].status == RolloutStatus.SUCCEEDED and by["honest"].reward == 1.0
    assert {a: (by[a].status, by[a].reward) for a in ATTACKS} == dict.fromkeys(ATTACKS, (
        RolloutStatus.SUCCEEDED, 0.0)), await stderr_tails(served, by)
