"""The harness sandbox: what the program sees and reaches, its limits, and refusing to run
without it."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path

import pytest

from agentbolt import semconv
from agentbolt.algorithms.sandbox_metrics import sandbox_metrics
from agentbolt.runner.harness import Harness, Limits, Sandbox
from agentbolt.runner.harness.sandbox.bwrap import python_paths
from agentbolt.runner.harness.sandbox.config import SYSTEM_PATHS
from agentbolt.runner.harness.sandbox.proxy import GatewayProxy
from agentbolt.runner.harness.sandbox.workspace import copy_workspace, hidden_patterns
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutStatus
from runner.harness.helpers import PY, Served, script

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="bubblewrap is not installed (apt-get install bubblewrap)")


def _running(marker: str) -> list[str]:
    """Pids of this machine's processes whose command line holds ``marker``."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
        except OSError:
            continue
    return found


# ---------------------------------------------------------------------- pure parts
def test_the_copy_leaves_out_git_and_hidden_paths(tmp_path: Path) -> None:
    src = tmp_path / "src"
    (src / ".git").mkdir(parents=True)
    (src / ".git" / "HEAD").write_text("ref")
    (src / "tests" / "hidden").mkdir(parents=True)
    (src / "tests" / "hidden" / "test_secret.py").write_text("x")
    (src / "tests" / "test_public.py").write_text("x")
    (src / "answers.json").write_text("{}")
    (src / "main.py").write_text("print()")
    (src / ".agentbolt-hidden").write_text("# answer keys\nanswers.json\n")
    patterns = hidden_patterns(src, ["tests/hidden"])
    left_out = copy_workspace(src, tmp_path / "copy", patterns)
    copied = sorted(p.relative_to(tmp_path / "copy").as_posix() for p in (tmp_path / "copy").rglob("*"))
    assert copied == ["main.py", "tests", "tests/test_public.py"]
    assert set(left_out) == {".git", "tests/hidden", "answers.json", ".agentbolt-hidden"}


def test_the_relay_lets_through_only_the_attempts_routes(tmp_path: Path) -> None:
    proxy = GatewayProxy(
        tmp_path / "s", "http://127.0.0.1:8000",
        allowed_prefixes=["/rollout/ro-1/attempt/at-1/"], allowed_exact=["/v1/rollouts/ro-1/attempts/at-1/reward"],
        on_denied=lambda m, p: None,
    )
    assert proxy.allows("/rollout/ro-1/attempt/at-1/v1/chat/completions")
    assert proxy.allows("/rollout/ro-1/attempt/at-1/v1/models?x=1")
    assert proxy.allows("/v1/rollouts/ro-1/attempts/at-1/reward")
    for target in [
        "/v1/rollouts", "/", "/dashboard", "/v1/rollouts/ro-2/attempts/at-2/reward",
        "/rollout/ro-2/attempt/at-2/v1/chat/completions",
        "/rollout/ro-1/attempt/at-1/../../../v1/rollouts", "/rollout/ro-1/attempt/at-1/%2e%2e/%2e%2e/x",
        "http://127.0.0.1:8000/v1/rollouts", "/rollout/ro-1/attempt/at-1//v1",
    ]:
        assert not proxy.allows(target), target


def test_limits_and_paths_are_checked() -> None:
    with pytest.raises(ValueError):
        Limits(processes=1)
    assert Sandbox(read_only=["rel"]).read_only[0].is_absolute()


# ---------------------------------------------------------------------- through a runner
@needs_bwrap
async def test_the_program_sees_a_fresh_workspace_and_only_its_gateway(served: Served, tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("original")
    (ws / "answers.txt").write_text("42")
    prog = script(tmp_path, "prog.py", """
        import json, os, sys, urllib.request
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello"}]}).encode()
        req = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body, method="POST",
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
        answer = json.load(urllib.request.urlopen(req, timeout=10))["choices"][0]["message"]["content"]
        view = {"cwd": os.getcwd(), "files": sorted(os.listdir(".")), "answer": answer, "root": sorted(os.listdir("/")),
                "base": os.environ["OPENAI_BASE_URL"], "home": os.environ["HOME"],
                "beside_me": sorted(os.listdir(os.path.dirname(sys.argv[0])))}
        open("notes.txt", "w").write("changed by the program")
        json.dump(view, open("view.json", "w"))
    """)
    seen = tmp_path / "seen.json"
    grader = script(tmp_path, "grade.py", f"""
        import os, pathlib, shutil
        ws = pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"])
        shutil.copy(ws / "view.json", {str(seen)!r})
        print(1.0 if (ws / "notes.txt").read_text() == "changed by the program" else 0.0)
    """)
    sandbox = Sandbox(workspace=ws, hidden=["answers.txt"])
    harness = Harness([PY, prog], evaluator=[PY, grader], server_url=served.url, sandbox=sandbox)
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 1.0
    view = json.loads(seen.read_text())
    rid, aid = rollout.rollout_id, rollout.latest_attempt_id
    port = served.url.rsplit(":", 1)[1]
    assert view["cwd"] == "/workspace" and view["files"] == ["notes.txt"] and view["home"] == "/tmp"
    assert view["answer"] == "echo: hello"  # the model call went through the relay to the gateway
    assert view["base"] == f"http://127.0.0.1:{port}/rollout/{rid}/attempt/{aid}/v1"
    assert view["beside_me"] == ["prog.py"]  # not the evaluator, not the workspace's source
    needed = [*SYSTEM_PATHS, *map(str, python_paths()), str(tmp_path)]  # the system, Python, the script
    allowed = {p.split("/")[1] for p in needed} | {"workspace", "tmp", "proc", "dev", "run", ".agentbolt"}
    assert "workspace" in view["root"] and set(view["root"]) <= allowed, view["root"]
    assert (ws / "notes.txt").read_text() == "original" and not (ws / "view.json").exists()
    spans = await served.store.get_spans(rid, aid)
    assert any("agentbolt.llm.request" in s.attributes for s in spans)
    assert semconv.sandbox_event_counts(spans) == {}
    attempt = await served.store.get_attempt(rid, aid)
    assert attempt.metadata["sandbox"] == {"events": [], "hidden": ["answers.txt"]}  # what the copy left out
    facts = next(s.attributes for s in spans if s.name == "agentbolt.annotation")
    assert facts["agentbolt.annotation.harness.sandboxed"] is True


@needs_bwrap
async def test_by_default_the_workspace_is_empty_and_the_evaluator_reads_it_after(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import os
        assert os.listdir(".") == [], os.listdir(".")
        open("answer.txt", "w").write("4")
    """)
    grader = script(tmp_path, "grade.py", """
        import os, pathlib
        print(float(pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"], "answer.txt").read_text() == "4"))
    """)
    harness = Harness([PY, prog], evaluator=[PY, grader], server_url=served.url)  # sandboxed by default
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 1.0
    spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    assert semconv.sandbox_event_counts(spans) == {}


@needs_bwrap
async def test_wall_time_ends_the_whole_tree_and_is_retried(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import subprocess, sys, time
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", "orphan-7d1f"])  # would outlive it
        time.sleep(60)
    """)
    harness = Harness([PY, prog], server_url=served.url, timeout=1.0)
    [rollout] = await served.run(harness, [{"q": 1}], config=RolloutConfig(max_attempts=1))
    assert rollout.status == RolloutStatus.FAILED
    [attempt] = await served.store.query_attempts(rollout.rollout_id)
    assert attempt.status == AttemptStatus.FAILED and "HarnessTimeoutError" in attempt.error.type
    assert attempt.error.retryable is True
    spans = await served.store.get_spans(rollout.rollout_id, attempt.attempt_id)
    assert semconv.sandbox_event_counts(spans) == {"limit.wall_time": 1}
    assert _running("orphan-7d1f") == []


@needs_bwrap
async def test_output_past_the_limit_is_cut_and_recorded(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import os, sys
        sys.stdout.write("x" * 300_000)
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write("0.5")
    """)
    harness = Harness([PY, prog], server_url=served.url, sandbox=Sandbox(limits=Limits(output_mb=0.1)))
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 0.5
    spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    assert semconv.sandbox_event_counts(spans) == {"limit.output": 1}


async def test_without_bubblewrap_the_harness_refuses_and_says_why(served: Served, tmp_path: Path) -> None:
    ran = tmp_path / "ran"
    prog = script(tmp_path, "prog.py", f"open({str(ran)!r}, 'w')\n")
    harness = Harness([PY, prog], server_url=served.url, sandbox=Sandbox(bwrap="no-such-bwrap"))
    [rollout] = await served.run(harness, [{"q": 1}], config=RolloutConfig(max_attempts=1))
    assert rollout.status == RolloutStatus.FAILED and not ran.exists()
    [attempt] = await served.store.query_attempts(rollout.rollout_id)
    assert "SandboxUnavailableError" in attempt.error.type and attempt.error.retryable is False
    assert "apt-get install bubblewrap" in attempt.error.message and "sandbox=False" in attempt.error.message
    unsandboxed = Harness([PY, prog], server_url=served.url, sandbox=False)
    [rollout] = await served.run(unsandboxed, [{"q": 1}], config=RolloutConfig(max_attempts=1))
    assert ran.exists()  # told explicitly: it runs with this process's rights
    assert await sandbox_metrics(served.store, [rollout.rollout_id]) == {}  # no sandbox, no sandbox metrics


@needs_bwrap
async def test_cancelling_the_rollout_kills_the_sandbox(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "sleeper_3a9c.py", "import time; time.sleep(60)\n")
    harness = Harness([PY, prog], server_url=served.url, timeout=30)
    config = RolloutConfig(timeout_seconds=1.0, max_attempts=1)
    [rollout] = await served.run(harness, [{"q": 1}], config=config)
    assert rollout.status == RolloutStatus.FAILED
    for _ in range(100):
        if not _running("sleeper_3a9c"):
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the sandboxed program outlived its rollout")


@needs_bwrap
async def test_tmp_is_small_and_private_and_a_full_one_is_recorded(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import os
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write("0.5")
        open("/tmp/fill", "wb").write(b"x" * (3 << 20))   # past tmp_mb=1: ENOSPC, a traceback
    """)
    harness = Harness([PY, prog], server_url=served.url, sandbox=Sandbox(limits=Limits(tmp_mb=1)))
    [rollout] = await served.run(harness, [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 0.5  # its reward was written first
    spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    assert semconv.sandbox_event_counts(spans) == {"limit.tmp_size": 1}


async def test_a_missing_workspace_is_a_configuration_error(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", "pass\n")
    harness = Harness([PY, prog], server_url=served.url, sandbox=Sandbox(workspace=tmp_path / "nowhere"))
    [rollout] = await served.run(harness, [{"q": 1}], config=RolloutConfig(max_attempts=1))
    [attempt] = await served.store.query_attempts(rollout.rollout_id)
    assert "HarnessConfigError" in attempt.error.type and "Sandbox(workspace=...)" in attempt.error.message
