"""``agentbolt sandbox check``: what the sandbox enforces here, seen from inside one."""

from __future__ import annotations

import json
import shutil

import pytest
from typer.testing import CliRunner

from agentbolt.cli import app
from agentbolt.runner.harness import Sandbox
from agentbolt.runner.harness.sandbox import SandboxUnavailableError
from agentbolt.runner.harness.sandbox.check import check_sandbox, findings_from_probe

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")


@needs_bwrap
async def test_every_guarantee_holds_on_this_machine() -> None:
    result = await check_sandbox()
    broken = [(f.item, f.detail) for f in result.findings if f.guarantee and not f.holds]
    assert result.ok and not broken, broken
    items = {f.item for f in result.findings}
    assert {"user", "pid", "net", "no capabilities", "/proc/sys/kernel/core_pattern read-only", "/workspace writable",
            "loopback only", "only what the harness gives", "memory (data)"} <= items


@needs_bwrap
async def test_a_probe_that_saw_a_hole_fails_the_check() -> None:
    result = await check_sandbox()
    seen_hole = {f.item: f for f in result.findings}
    assert seen_hole["/proc/sys/kernel/core_pattern read-only"].holds
    # the same report, had /proc/sys been writable and the network shared
    probe = _probe_report(writable={"/proc/sys/kernel/core_pattern": "writable"}, interfaces=["eth0", "lo"])
    by_item = {f.item: f for f in findings_from_probe(probe, Sandbox())}
    assert not by_item["/proc/sys/kernel/core_pattern read-only"].holds
    assert not by_item["loopback only"].holds


def _probe_report(**changes: object) -> dict[str, object]:
    report: dict[str, object] = {
        "uid": 0, "uid_map": ["0", "1000", "1"], "ns": {}, "nested_userns": "ENOSPC", "keyring": "EPERM",
        "status": {"CapEff": "0", "CapPrm": "0", "CapBnd": "0", "CapAmb": "0", "NoNewPrivs": "1", "Seccomp": "2"},
        "writable": {"/": "EROFS", "/workspace": "writable"}, "masked": {"/proc/kcore": "absent"}, "sys": "absent",
        "dev": ["null"], "interfaces": ["lo"], "outside": "ENETUNREACH", "gateway": "connected", "env": ["PATH"],
        "rlimits": {"memory (data)": 2048 << 20, "cpu seconds": 600, "file size": 256 << 20, "open files": 1024,
                    "core dumps": 0},
        "home": {},
    }
    report.update(changes)
    return report


@needs_bwrap
def test_the_cli_prints_the_table_and_json() -> None:
    table = CliRunner().invoke(app, ["sandbox", "check"])
    assert table.exit_code == 0, table.output
    assert "core_pattern read-only" in table.output and "every guarantee holds" in table.output
    done = CliRunner().invoke(app, ["sandbox", "check", "--json"])
    report = json.loads(done.output)
    assert done.exit_code == 0 and report["ok"] is True and report["bwrap_version"]


async def test_no_bubblewrap_says_what_to_do() -> None:
    with pytest.raises(SandboxUnavailableError, match="install it"):
        await check_sandbox(Sandbox(bwrap="no-such-bwrap-here"))
