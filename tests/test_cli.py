"""The ``agentbolt`` command line: what each command prints for a known store, and how
it fails (one line on stderr, exit code 2 for a bad request, 1 for a runtime failure)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner, Result

from agentbolt import __version__, semconv
from agentbolt.cli import app
from agentbolt.store.sqlite import SqliteStore
from agentbolt.types import LLM, AttemptStatus, PromptTemplate, RolloutMode, Span

SECRET_KEY = "sk-do-not-print-me"
ADMIN_TOKEN = "cli-test-admin"


@dataclass(frozen=True)
class Prepared:
    """A SQLite store file with a known content."""

    url: str
    path: Path
    done_id: str
    """Claimed by ``worker-1``, two spans (one a 0.75 reward), succeeded."""
    done_attempt_id: str
    running_id: str
    """Claimed by ``worker-2`` and heartbeating."""
    queued_id: str
    """A validation rollout nobody claimed yet."""


async def _prepare(path: Path) -> Prepared:
    async with SqliteStore(path) as store:
        await store.add_resources(
            {"llm": LLM(endpoint="http://127.0.0.1:9/v1", model="tiny-model", api_key=SECRET_KEY)},
            {"note": "first"},
        )
        await store.add_resources({"prompt": PromptTemplate(template="Solve {task}")})
        done = await store.enqueue_rollout({"task": "1+1"}, rollout_id="task-1")
        running = await store.enqueue_rollout({"task": "2+2"}, rollout_id="task-2")
        queued = await store.enqueue_rollout({"task": "3+3"}, rollout_id="task-3", mode=RolloutMode.VAL)
        first = await store.claim_rollout("worker-1")
        second = await store.claim_rollout("worker-2")
        assert first is not None and second is not None
        assert first.rollout.rollout_id == done.rollout_id
        rid, aid = first.rollout.rollout_id, first.attempt.attempt_id
        await store.add_spans(
            [
                Span(
                    rollout_id=rid,
                    attempt_id=aid,
                    span_id="span-llm",
                    name="llm.chat",
                    attributes={"gen_ai.request.model": "tiny-model"},
                ),
                Span(
                    rollout_id=rid,
                    attempt_id=aid,
                    span_id="span-reward",
                    name=semconv.REWARD_SPAN,
                    attributes=semconv.reward_span_attributes({"reward": 0.75}, "reward"),
                ),
            ]
        )
        await store.update_attempt(rid, aid, status=AttemptStatus.SUCCEEDED)
        await store.heartbeat(second.rollout.rollout_id, second.attempt.attempt_id)
    return Prepared(
        url=f"sqlite:///{path}",
        path=path,
        done_id=done.rollout_id,
        done_attempt_id=aid,
        running_id=running.rollout_id,
        queued_id=queued.rollout_id,
    )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory: pytest.TempPathFactory) -> Prepared:
    return asyncio.run(_prepare(tmp_path_factory.mktemp("cli") / "store.db"))


def run_cli(*args: str, env: dict[str, str | None] | None = None) -> Result:
    """Invoke the CLI in-process, with no AGENTBOLT_* settings leaking in from outside."""
    clean: dict[str, str | None] = {
        "AGENTBOLT_STORE": None,
        "AGENTBOLT_TOKEN": None,
        "AGENTBOLT_ADMIN_TOKEN": None,
        "COLUMNS": None,
    }
    clean.update(env or {})
    return CliRunner().invoke(app, list(args), env=clean)


def json_lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def assert_one_line_error(result: Result, exit_code: int, *fragments: str) -> None:
    assert result.exit_code == exit_code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: ")
    for fragment in fragments:
        assert fragment in lines[0]
    assert "Traceback" not in result.output


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---------------------------------------------------------------- version
def test_version_prints_the_package_version() -> None:
    result = run_cli("version")
    assert result.exit_code == 0
    assert f"agentbolt {__version__}" in result.stdout


def test_python_dash_m_runs_the_same_cli() -> None:
    out = subprocess.run([sys.executable, "-m", "agentbolt", "version"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"agentbolt {__version__}")


# ---------------------------------------------------------------- stats
def test_stats_shows_totals_and_counts_by_status(prepared: Prepared) -> None:
    result = run_cli("store", "stats", "--store", prepared.url)
    assert result.exit_code == 0, result.output
    lines = {" ".join(line.split()) for line in result.stdout.splitlines()}
    assert "rollouts 3" in lines
    assert "queue depth 1" in lines
    assert "spans 2" in lines
    assert "workers 2" in lines
    assert "resources version 2" in lines
    assert any(line.startswith("succeeded 1") for line in lines)


def test_stats_json_is_one_parseable_object(prepared: Prepared) -> None:
    result = run_cli("store", "stats", "--store", prepared.url, "--json")
    assert result.exit_code == 0, result.output
    (stats,) = json_lines(result.stdout)
    assert stats["total_rollouts"] == 3
    assert stats["rollouts_by_status"]["succeeded"] == 1
    assert stats["rollouts_by_status"]["running"] == 1
    assert stats["rollouts_by_status"]["queuing"] == 1
    assert stats["total_spans"] == 2
    assert stats["latest_resources_version"] == 2


def test_store_url_can_come_from_the_environment(prepared: Prepared) -> None:
    result = run_cli("store", "stats", "--json", env={"AGENTBOLT_STORE": prepared.url})
    assert result.exit_code == 0, result.output
    assert json_lines(result.stdout)[0]["total_rollouts"] == 3


# ---------------------------------------------------------------- rollouts
def test_rollouts_table_lists_every_rollout_with_its_status(prepared: Prepared) -> None:
    result = run_cli("store", "rollouts", "--store", prepared.url)
    assert result.exit_code == 0, result.output
    rows = {line.split()[0]: line.split() for line in result.stdout.splitlines() if line.strip().startswith("task-")}
    assert set(rows) == {prepared.done_id, prepared.running_id, prepared.queued_id}
    assert rows[prepared.done_id][1:4] == ["succeeded", "train", "0.75"]
    assert rows[prepared.running_id][1] == "running"
    assert rows[prepared.queued_id][1:3] == ["queuing", "val"]
    assert "--cursor" not in result.stdout


def test_rollouts_filter_by_status_and_mode(prepared: Prepared) -> None:
    by_status = run_cli(
        "store", "rollouts", "--store", prepared.url, "--status", "queuing", "--status", "running", "--json"
    )
    assert by_status.exit_code == 0, by_status.output
    assert {r["rollout_id"] for r in json_lines(by_status.stdout)} == {prepared.running_id, prepared.queued_id}

    by_mode = run_cli("store", "rollouts", "--store", prepared.url, "--mode", "val", "--json")
    assert [r["rollout_id"] for r in json_lines(by_mode.stdout)] == [prepared.queued_id]


def test_rollouts_sort_descending(prepared: Prepared) -> None:
    result = run_cli("store", "rollouts", "--store", prepared.url, "--sort-by", "rollout_id", "--desc", "--json")
    assert result.exit_code == 0, result.output
    assert [r["rollout_id"] for r in json_lines(result.stdout)] == ["task-3", "task-2", "task-1"]


def test_rollouts_pages_follow_the_printed_cursor(prepared: Prepared) -> None:
    first = run_cli("store", "rollouts", "--store", prepared.url, "--limit", "2", "--json")
    assert first.exit_code == 0, first.output
    page1 = [r["rollout_id"] for r in json_lines(first.stdout)]
    assert len(page1) == 2
    assert first.stderr.startswith("next cursor: ")
    cursor = first.stderr.split("next cursor: ", 1)[1].strip()

    second = run_cli("store", "rollouts", "--store", prepared.url, "--limit", "2", "--json", "--cursor", cursor)
    assert second.exit_code == 0, second.output
    page2 = [r["rollout_id"] for r in json_lines(second.stdout)]
    assert second.stderr == ""  # last page: no cursor
    assert sorted(page1 + page2) == ["task-1", "task-2", "task-3"]

    human = run_cli("store", "rollouts", "--store", prepared.url, "--limit", "2")
    assert f"--cursor {cursor}" in human.stdout


# ---------------------------------------------------------------- one rollout
def test_rollout_shows_the_rollout_and_its_attempts(prepared: Prepared) -> None:
    result = run_cli("store", "rollout", prepared.done_id, "--store", prepared.url)
    assert result.exit_code == 0, result.output
    assert prepared.done_id in result.stdout
    assert prepared.done_attempt_id in result.stdout
    assert "worker-1" in result.stdout
    assert "succeeded" in result.stdout
    assert "0.75" in result.stdout
    assert '"task":"1+1"' in result.stdout


def test_rollout_json_holds_rollout_and_attempts(prepared: Prepared) -> None:
    result = run_cli("store", "rollout", prepared.running_id, "--store", prepared.url, "--json")
    assert result.exit_code == 0, result.output
    (doc,) = json_lines(result.stdout)
    assert doc["rollout"]["rollout_id"] == prepared.running_id
    assert [a["worker_id"] for a in doc["attempts"]] == ["worker-2"]
    assert doc["attempts"][0]["status"] == "running"


def test_unclaimed_rollout_says_it_has_no_attempts(prepared: Prepared) -> None:
    result = run_cli("store", "rollout", prepared.queued_id, "--store", prepared.url)
    assert result.exit_code == 0, result.output
    assert "no attempts yet" in result.stdout


# ---------------------------------------------------------------- spans
def test_spans_table_shows_names_and_reward(prepared: Prepared) -> None:
    result = run_cli("store", "spans", prepared.done_id, "--store", prepared.url)
    assert result.exit_code == 0, result.output
    rows = [line.split() for line in result.stdout.splitlines() if "span-" in line]
    # "#" is attempt.sequence: attempt 1, sequence ids 0 and 1
    assert [(row[0], row[1]) for row in rows] == [("1.0", "llm.chat"), ("1.1", semconv.REWARD_SPAN)]
    assert "span-llm" in rows[0]
    assert rows[1][-1] == "reward=0.75"


def test_spans_json_lines_and_paging(prepared: Prepared) -> None:
    result = run_cli("store", "spans", prepared.done_id, "--store", prepared.url, "--attempt", "latest", "--json")
    assert result.exit_code == 0, result.output
    spans = json_lines(result.stdout)
    assert [(s["span_id"], s["sequence_id"]) for s in spans] == [("span-llm", 0), ("span-reward", 1)]

    first = run_cli("store", "spans", prepared.done_id, "--store", prepared.url, "--limit", "1", "--json")
    cursor = first.stderr.split("next cursor: ", 1)[1].strip()
    second = run_cli(
        "store", "spans", prepared.done_id, "--store", prepared.url, "--limit", "1", "--json", "--cursor", cursor
    )
    assert [s["span_id"] for s in json_lines(first.stdout) + json_lines(second.stdout)] == ["span-llm", "span-reward"]


def test_spans_of_a_rollout_without_spans(prepared: Prepared) -> None:
    result = run_cli("store", "spans", prepared.queued_id, "--store", prepared.url)
    assert result.exit_code == 0, result.output
    assert "no spans" in result.stdout


# ---------------------------------------------------------------- resources & workers
def test_resources_lists_versions_newest_first(prepared: Prepared) -> None:
    result = run_cli("store", "resources", "--store", prepared.url)
    assert result.exit_code == 0, result.output
    assert result.stdout.index("v2") < result.stdout.index("v1")
    assert "llm (llm)" in result.stdout
    assert "prompt (prompt_template)" in result.stdout


def test_one_resources_version_masks_api_keys_unless_asked(prepared: Prepared) -> None:
    shown = run_cli("store", "resources", "--store", prepared.url, "--version", "1")
    assert shown.exit_code == 0, shown.output
    assert "tiny-model" in shown.stdout
    assert "***" in shown.stdout
    assert SECRET_KEY not in shown.stdout

    as_json = run_cli("store", "resources", "--store", prepared.url, "--version", "1", "--json")
    (doc,) = json_lines(as_json.stdout)
    assert doc["version"] == 1
    assert doc["resources"]["llm"]["api_key"] == "***"

    revealed = run_cli("store", "resources", "--store", prepared.url, "--version", "1", "--show-secrets", "--json")
    assert json_lines(revealed.stdout)[0]["resources"]["llm"]["api_key"] == SECRET_KEY


def test_workers_shows_each_worker_and_its_work(prepared: Prepared) -> None:
    result = run_cli("store", "workers", "--store", prepared.url)
    assert result.exit_code == 0, result.output
    assert "worker-1" in result.stdout
    row = next(line.split() for line in result.stdout.splitlines() if "worker-2" in line)
    assert row[1] == "busy"
    assert prepared.running_id in row

    workers = json_lines(run_cli("store", "workers", "--store", prepared.url, "--json").stdout)
    assert {w["worker_id"] for w in workers} == {"worker-1", "worker-2"}


# ---------------------------------------------------------------- failures
def test_unknown_rollout_is_a_one_line_error(prepared: Prepared) -> None:
    assert_one_line_error(
        run_cli("store", "rollout", "no-such-rollout", "--store", prepared.url), 2, "no-such-rollout", "not found"
    )
    assert_one_line_error(run_cli("store", "spans", "no-such-rollout", "--store", prepared.url), 2, "not found")


def test_unknown_resources_version_is_a_one_line_error(prepared: Prepared) -> None:
    assert_one_line_error(run_cli("store", "resources", "--store", prepared.url, "--version", "99"), 2, "99")


def test_bad_cursor_is_a_one_line_error(prepared: Prepared) -> None:
    assert_one_line_error(
        run_cli("store", "rollouts", "--store", prepared.url, "--cursor", "not-a-cursor"), 2, "cursor"
    )


def test_unknown_store_url_is_a_one_line_error() -> None:
    assert_one_line_error(run_cli("store", "stats", "--store", "ftp://example.org/db"), 2, "unknown store URL")


def test_memory_store_is_refused_for_inspection() -> None:
    assert_one_line_error(run_cli("store", "stats", "--store", "memory://"), 2, "memory://")


def test_missing_sqlite_file_is_an_error_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "absent.db"
    assert_one_line_error(run_cli("store", "rollouts", "--store", f"sqlite:///{path}"), 2, "does not exist")
    assert not path.exists()


def test_unreachable_server_is_a_runtime_error() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    started = time.monotonic()
    assert_one_line_error(run_cli("store", "stats", "--store", url), 1)
    assert time.monotonic() - started < 60


def test_bad_option_value_is_a_usage_error(prepared: Prepared) -> None:
    result = run_cli("store", "rollouts", "--store", prepared.url, "--status", "bogus")
    assert result.exit_code == 2
    assert "bogus" in result.stderr


# ---------------------------------------------------------------- over HTTP
@pytest.fixture(scope="module")
def served(prepared: Prepared) -> Iterator[str]:
    """The prepared store behind a real server that requires an admin token."""
    from agentbolt.server.testing import serve_in_thread

    with serve_in_thread(SqliteStore(prepared.path), admin_token=ADMIN_TOKEN) as base_url:
        yield base_url


def test_http_store_shows_the_same_rollouts_as_the_file(prepared: Prepared, served: str) -> None:
    over_http = run_cli("store", "rollouts", "--store", served, "--token", ADMIN_TOKEN, "--json")
    from_file = run_cli("store", "rollouts", "--store", prepared.url, "--json")
    assert over_http.exit_code == 0, over_http.output
    assert json_lines(over_http.stdout) == json_lines(from_file.stdout)

    detail = run_cli(
        "store", "rollout", prepared.done_id, "--json", env={"AGENTBOLT_STORE": served, "AGENTBOLT_TOKEN": ADMIN_TOKEN}
    )
    assert detail.exit_code == 0, detail.output
    assert json_lines(detail.stdout)[0]["attempts"][0]["attempt_id"] == prepared.done_attempt_id


def test_http_store_without_or_with_a_wrong_token_is_a_one_line_error(served: str) -> None:
    assert_one_line_error(run_cli("store", "stats", "--store", served), 2, "token", "AGENTBOLT_TOKEN")
    assert_one_line_error(run_cli("store", "stats", "--store", served, "--token", "wrong"), 2, "invalid token")


# ---------------------------------------------------------------- the real server
def _wait_healthy(proc: subprocess.Popen[str], base_url: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"server exited with {proc.returncode}: {proc.communicate()[1][-2000:]}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError(f"server at {base_url} not healthy after {timeout} s")


def _server_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOLT_")}


def test_server_command_serves_a_store_the_cli_can_read(tmp_path: Path) -> None:
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "agentbolt",
            "server",
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_server_env(),
    )
    try:
        _wait_healthy(proc, base_url)
        result = run_cli("store", "stats", "--store", base_url, "--json")
        assert result.exit_code == 0, result.output
        stats = json_lines(result.stdout)[0]
        assert stats["total_rollouts"] == 0
        assert stats["latest_resources_version"] is None
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=15)
    assert (tmp_path / "s.db").exists()


def test_server_on_all_interfaces_without_token_refuses_to_start(tmp_path: Path) -> None:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "agentbolt",
            "server",
            "--store",
            f"sqlite:///{tmp_path / 's.db'}",
            "--host",
            "0.0.0.0",
            "--port",
            str(free_port()),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=_server_env(),
    )
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), out.stderr
    assert "token" in lines[0].lower()
    assert "Traceback" not in out.stderr


def test_server_on_a_taken_port_exits_1_with_a_message(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "agentbolt",
                "server",
                "--store",
                f"sqlite:///{tmp_path / 's.db'}",
                "--port",
                str(port),
                "--log-level",
                "warning",
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env=_server_env(),
        )
    assert out.returncode == 1, out.stderr
    assert out.stderr.strip().splitlines()[-1].startswith(f"Error: the server on 127.0.0.1:{port} could not start")
    assert "Traceback" not in out.stderr
