"""Harness through a real runner and a served store: environment, rewards from each
source, and how failures are sorted into retried and not retried."""

from __future__ import annotations

import asyncio
import json
import os
import pickle
from pathlib import Path

import httpx
import pytest

from agentbolt import semconv
from agentbolt.runner.harness import Harness, HarnessConfigError, render_command
from agentbolt.runner.runner import Runner
from agentbolt.store.memory import MemoryStore
from agentbolt.types import AttemptStatus, RolloutConfig, RolloutCreate, RolloutStatus
from runner.harness.helpers import ADMIN, PY, Served, script


async def _annotations(served: Served, rollout_id: str, attempt_id: str) -> dict[str, object]:
    spans = await served.store.get_spans(rollout_id, attempt_id)
    facts: dict[str, object] = {}
    for s in spans:
        if s.name == "agentbolt.annotation":
            facts.update(s.attributes)
    return facts


async def test_the_evaluator_scores_the_program_and_never_sees_its_token(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import os
        print("my answer")
        print("token", os.environ["OPENAI_API_KEY"])
    """)
    grader = script(tmp_path, "grade.py", """
        import json, os, sys
        program_said = sys.stdin.read()
        assert program_said == open(os.environ["AGENTBOLT_OUTPUT_FILE"]).read()
        token = program_said.split("token ")[1].strip()
        assert token not in os.environ.values(), "the evaluator must not get the agent's token"
        task = json.loads(os.environ["AGENTBOLT_TASK"])
        print("grading", task["q"])   # log lines before the verdict are fine
        ok = os.environ["AGENTBOLT_EXIT_CODE"] == "0" and program_said.startswith("my answer")
        print(json.dumps({"value": 0.5 if ok else 0.0}))
    """)
    harness = Harness([PY, prog], evaluator=[PY, grader, "{q}"], server_url=served.url)
    [rollout] = await served.run(harness, [{"q": "two words"}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 0.5
    aid = rollout.latest_attempt_id
    assert aid is not None
    facts = await _annotations(served, rollout.rollout_id, aid)
    assert facts["agentbolt.annotation.harness.exit_code"] == 0
    assert facts["agentbolt.annotation.harness.timed_out"] is False
    attempt = await served.store.get_attempt(rollout.rollout_id, aid)
    assert attempt.metadata["harness"]["harness.exit_code"] == 0


async def test_program_environment(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    prog = script(tmp_path, "prog.py", f"""
        import json, os, sys
        keys = ["OPENAI_BASE_URL", "OPENAI_API_KEY", "AGENTBOLT_ROLLOUT_ID", "AGENTBOLT_ATTEMPT_ID",
                "AGENTBOLT_TASK", "AGENTBOLT_REWARD_URL", "AGENTBOLT_REWARD_FILE"]
        json.dump({{"argv": sys.argv[1:], **{{k: os.environ.get(k) for k in keys}}}}, open({str(out)!r}, "w"))
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write("1")
    """)
    # unsandboxed: the program writes its view into the test's folder, and sees the server as it is
    harness = Harness(f"{PY} {prog} {{q}} --id={{rollout_id}}", server_url=served.url, sandbox=False)
    [rollout] = await served.run(harness, [{"q": "two words", "n": 3}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 1.0
    env = json.loads(out.read_text())
    rid, aid = rollout.rollout_id, rollout.latest_attempt_id
    assert env["argv"] == ["two words", f"--id={rid}"]  # placeholders fill whole arguments
    assert env["OPENAI_BASE_URL"] == f"{served.url}/rollout/{rid}/attempt/{aid}/v1"
    assert env["OPENAI_API_KEY"].startswith("ab1.")  # scoped to this attempt, not the admin token
    assert env["AGENTBOLT_ROLLOUT_ID"] == rid and env["AGENTBOLT_ATTEMPT_ID"] == aid
    assert json.loads(env["AGENTBOLT_TASK"]) == {"q": "two words", "n": 3}
    assert env["AGENTBOLT_REWARD_URL"] == f"{served.url}/v1/rollouts/{rid}/attempts/{aid}/reward"


async def test_the_scoped_token_reaches_only_its_own_attempt(served: Served, tmp_path: Path) -> None:
    out = tmp_path / "env.json"
    prog = script(tmp_path, "prog.py", f"""
        import json, os
        json.dump(dict(os.environ), open({str(out)!r}, "w"))
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write("1")
    """)
    [rollout, other] = await served.run(Harness([PY, prog], server_url=served.url, sandbox=False), [{"i": 1}, {"i": 2}])
    token = json.loads(out.read_text())["OPENAI_API_KEY"]
    env_rollout = json.loads(out.read_text())["AGENTBOLT_ROLLOUT_ID"]
    victim = other if env_rollout == rollout.rollout_id else rollout
    async with httpx.AsyncClient(base_url=served.url, headers={"authorization": f"Bearer {token}"}) as client:
        denied = await client.post(
            f"/v1/rollouts/{victim.rollout_id}/attempts/{victim.latest_attempt_id}/reward", json={"value": 1.0}
        )
    assert denied.status_code == 403


async def test_reward_posted_by_the_program(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import json, os, urllib.request
        req = urllib.request.Request(
            os.environ["AGENTBOLT_REWARD_URL"], data=json.dumps({"value": 0.25}).encode(), method="POST",
            headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"},
        )
        urllib.request.urlopen(req).read()
    """)
    [rollout] = await served.run(Harness([PY, prog], server_url=served.url), [{"q": 1}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 0.25


async def test_named_rewards_from_the_reward_file(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import os
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write('{"rewards": {"acc": 1, "len": 0.2}, "primary": "acc"}')
    """)
    [rollout] = await served.run(Harness([PY, prog], server_url=served.url), [{"q": 1}])
    spans = await served.store.get_spans(rollout.rollout_id, rollout.latest_attempt_id)
    [reward] = [s for s in spans if s.name == semconv.REWARD_SPAN]
    assert reward.attributes[semconv.REWARD_PREFIX + "len"] == 0.2
    assert rollout.reward == 1.0


async def test_a_crash_without_reward_fails_and_is_not_retried_by_default(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", """
        import sys
        sys.stderr.write("Traceback: the model said something odd\\n")
        sys.exit(2)
    """)
    [rollout] = await served.run(Harness([PY, prog], server_url=served.url), [{"q": 1}])
    assert rollout.status == RolloutStatus.FAILED and rollout.attempt_count == 1
    assert rollout.reward is None  # never scored 0
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert attempt.error is not None and attempt.error.retryable is None
    assert "exited with code 2" in attempt.error.message
    assert "the model said something odd" in attempt.error.message
    facts = await _annotations(served, rollout.rollout_id, attempt.attempt_id)
    assert facts["agentbolt.annotation.harness.exit_code"] == 2
    assert "the model said something odd" in str(facts["agentbolt.annotation.harness.stderr_tail"])


async def test_a_crash_is_retried_when_the_rollout_asks(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", "import sys; sys.exit(1)\n")
    config = RolloutConfig(max_attempts=2, retry_on=[AttemptStatus.FAILED])
    [rollout] = await served.run(Harness([PY, prog], server_url=served.url), [{"q": 1}], config=config)
    assert rollout.status == RolloutStatus.FAILED and rollout.attempt_count == 2


async def test_a_program_that_reports_nothing_fails(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", "print('done')\n")
    [rollout] = await served.run(Harness([PY, prog], server_url=served.url), [{"q": 1}])
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert rollout.status == RolloutStatus.FAILED
    assert "without reporting a reward" in attempt.error.message
    [ok] = await served.run(Harness([PY, prog], server_url=served.url, require_reward=False), [{"q": 1}])
    assert ok.status == RolloutStatus.SUCCEEDED and ok.reward is None


async def test_infrastructure_failures_are_retried_never_scored(served: Served, tmp_path: Path) -> None:
    marker = tmp_path / "started-once"
    prog = script(tmp_path, "prog.py", f"""
        import os, time
        if not os.path.exists({str(marker)!r}):
            open({str(marker)!r}, "w").close()
            time.sleep(60)   # hangs on the first attempt only
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write("1")
    """)
    config = RolloutConfig(max_attempts=3)
    harness = Harness([PY, prog], server_url=served.url, timeout=1.0, sandbox=False)  # a marker on the host
    [rollout] = await served.run(harness, [{"q": 1}], config=config)
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.attempt_count == 2 and rollout.reward == 1.0
    first, second = await served.store.query_attempts(rollout.rollout_id)
    assert first.status == AttemptStatus.FAILED and first.error.retryable is True
    assert "ran longer than 1.0 s" in first.error.message
    assert second.status == AttemptStatus.SUCCEEDED
    first_spans = await served.store.get_spans(rollout.rollout_id, first.attempt_id)
    assert not [s for s in first_spans if s.name == semconv.REWARD_SPAN]

    [missing] = await served.run(Harness([str(tmp_path / "no-such-program")], server_url=served.url), [{"q": 1}],
                                 config=RolloutConfig(max_attempts=2))
    assert missing.status == RolloutStatus.FAILED and missing.attempt_count == 2
    attempt = await served.store.get_attempt(missing.rollout_id, missing.latest_attempt_id)
    assert "could not start" in attempt.error.message and attempt.error.retryable is True


async def test_the_rollouts_own_timeout_stops_the_program_too(served: Served, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    prog = script(tmp_path, "prog.py", f"""
        import os, time
        open({str(pidfile)!r}, "w").write(str(os.getpid()))
        time.sleep(60)
    """)
    config = RolloutConfig(timeout_seconds=1.0, max_attempts=1)
    harness = Harness([PY, prog], server_url=served.url, sandbox=False)  # its pid, as the host sees it
    [rollout] = await served.run(harness, [{"q": 1}], config=config)
    assert rollout.status == RolloutStatus.FAILED
    [attempt] = await served.store.query_attempts(rollout.rollout_id)
    assert attempt.status == AttemptStatus.TIMEOUT
    pid = int(pidfile.read_text())
    for _ in range(100):  # the kill finishes in the background, within the kill grace
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        await asyncio.sleep(0.05)
    else:
        pytest.fail("the program outlived its rollout's timeout")


async def test_a_broken_evaluator_is_retried_not_scored(served: Served, tmp_path: Path) -> None:
    prog = script(tmp_path, "prog.py", "print('answer')\n")
    grader = script(tmp_path, "grade.py", "print('looks right to me')\n")
    [rollout] = await served.run(
        Harness([PY, prog], evaluator=[PY, grader], server_url=served.url), [{"q": 1}],
        config=RolloutConfig(max_attempts=2),
    )
    assert rollout.status == RolloutStatus.FAILED and rollout.attempt_count == 2 and rollout.reward is None
    attempt = await served.store.get_attempt(rollout.rollout_id, rollout.latest_attempt_id)
    assert "not a reward" in attempt.error.message


async def test_without_a_server_the_error_says_what_to_do(tmp_path: Path) -> None:
    store = MemoryStore()
    [created] = await store.enqueue_rollouts([RolloutCreate(input={"q": 1})])
    await Runner(Harness([PY, "-c", "pass"]), store=store, poll_interval=0.05).run(stop_when_idle=True)
    attempt = (await store.query_attempts(created.rollout_id))[0]
    assert attempt.error is not None and "HarnessConfigError" in attempt.error.type
    assert "server_url" in attempt.error.message and "multiprocess" in attempt.error.message


async def test_a_server_without_a_gateway_is_refused_before_the_program_runs(tmp_path: Path) -> None:
    from agentbolt.server.testing import serve_in_thread

    ran = tmp_path / "ran"
    store = MemoryStore()
    with serve_in_thread(store, admin_token=ADMIN) as url:
        [created] = await store.enqueue_rollouts([RolloutCreate(input={"q": 1})])
        harness = Harness([PY, "-c", f"open({str(ran)!r}, 'w')"], server_url=url + "/")
        await Runner(harness, store=store, poll_interval=0.05).run(stop_when_idle=True)
        attempt = (await store.query_attempts(created.rollout_id))[0]
    assert attempt.error is not None and "has no model gateway" in attempt.error.message
    assert not ran.exists()


def test_templates_name_the_missing_field() -> None:
    assert render_command(["run", "{a}", "{{literal}}"], {"a": "x y"}) == ["run", "x y", "{literal}"]
    with pytest.raises(HarnessConfigError, match="no field 'b'"):
        render_command(["run", "{b}"], {"a": "1"})


def test_concurrency_must_be_positive() -> None:
    with pytest.raises(ValueError, match="concurrency"):
        Harness("python x.py", concurrency=0)


async def test_a_runner_over_http_finds_the_server_by_itself(served: Served, tmp_path: Path) -> None:
    """Runners in other processes talk to the server through an HttpStore: the harness
    takes the server URL from it (no server_url needed)."""
    from agentbolt.store.http import HttpStore

    out = tmp_path / "env.json"
    prog = script(tmp_path, "prog.py", f"""
        import json, os
        json.dump({{k: os.environ[k] for k in ("OPENAI_BASE_URL", "AGENTBOLT_REWARD_URL")}}, open({str(out)!r}, "w"))
        open(os.environ["AGENTBOLT_REWARD_FILE"], "w").write("0.5")
    """)
    [created] = await served.store.enqueue_rollouts([RolloutCreate(input={"q": 1})])
    remote = HttpStore(served.url, token=ADMIN)
    await Runner(Harness([PY, prog], sandbox=False), store=remote, poll_interval=0.05).run(stop_when_idle=True)
    await remote.close()
    rollout = await served.store.get_rollout(created.rollout_id)
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 0.5
    env = json.loads(out.read_text())
    assert env["OPENAI_BASE_URL"] == f"{served.url}/rollout/{rollout.rollout_id}/attempt/{rollout.latest_attempt_id}/v1"


def test_a_harness_travels_to_runner_processes() -> None:
    harness = Harness("python agent.py --q {q}", evaluator="python grade.py", timeout=5, concurrency=2)
    copy = pickle.loads(pickle.dumps(harness))
    assert copy.command == ["python", "agent.py", "--q", "{q}"] and copy.concurrency == 2 and copy.timeout == 5
