"""Sandbox events mean that something was refused (issue 29, class 7): an honest program
that probes its own base URL, or grows close to the memory limit without being refused,
records none; the same program when refused records one."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from agentbolt.runner.harness import Limits, Sandbox
from agentbolt.types import RolloutStatus
from runner.harness.attacks import event_kinds, run_attacks, stderr_tails
from runner.harness.helpers import Served

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed")

MEMORY_MB = 256

BODY = r'''
import http.client, urllib.request
base = os.environ["OPENAI_BASE_URL"]
auth = {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
def status(method, url, target=None):
    host = url.split("/")[2]
    conn = http.client.HTTPConnection(host, timeout=10)
    conn.request(method, target or url[len("http://" + host):] or "/", headers=auth)
    code = conn.getresponse().status
    conn.close()
    return code
if attack == "probe_base_url":          # what SDKs and CLIs do before the first call
    for url in (base, base + "/", base + "/models", base.rsplit("/v1", 1)[0], base.rsplit("/v1", 1)[0] + "/"):
        for method in ("HEAD", "GET", "OPTIONS"):
            status(method, url)
    status("HEAD", base, target=base)     # an absolute-form target, as some proxies and clients send
    answer()
elif attack == "near_memory_limit":     # a runtime reserving most of its heap, then living in it
    hog = bytearray(int(MEMORY_MB * 0.93) << 20)
    for i in range(0, len(hog), 4096):
        hog[i] = 1
    answer()
elif attack == "refused_memory":
    try:
        hog = bytearray((MEMORY_MB + 64) << 20)
    except MemoryError:
        sys.stderr.write("MemoryError: the allocation was refused\n")
elif attack == "refused_route":          # the store's API: refused, and recorded
    status("GET", base.split("/rollout/")[0] + "/v1/rollouts")
elif attack == "honest":
    answer()
'''.replace("MEMORY_MB", str(MEMORY_MB))

HONEST = ["probe_base_url", "near_memory_limit"]


@pytest.mark.timeout(120)
async def test_an_event_means_something_was_refused(served: Served, tmp_path: Path) -> None:
    by = await run_attacks(served, tmp_path, BODY, [*HONEST, "refused_memory", "refused_route"],
                           sandbox=Sandbox(limits=Limits(memory_mb=MEMORY_MB)))
    tails = await stderr_tails(served, by)
    for name in ["honest", *HONEST]:
        assert (by[name].status, by[name].reward) == (RolloutStatus.SUCCEEDED, 1.0), (name, tails)
        assert await event_kinds(served, by[name]) == set(), name
    assert "limit.memory" in await event_kinds(served, by["refused_memory"])
    assert "network.denied" in await event_kinds(served, by["refused_route"])
