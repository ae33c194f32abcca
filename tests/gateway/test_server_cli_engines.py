"""``agentbolt server --engine ...``: the model gateway from the command line, in a real
server process, in front of a real engine.

* ``--engine openai --engine-url <server>``: a claim's scoped token calls its rollout's
  ``/v1/chat/completions``; the call is forwarded, answered, and recorded as a span, with
  the validation temperature forced;
* ``--engine transformers --model-path <dir>``: a tiny model saved to disk is served by
  the server process itself; the span holds the engine's prompt and response token ids;
* bad option combinations and a missing torch are one-line errors saying what to do.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fakes.openai_server import serve_fake_openai
from typer.testing import CliRunner

from agentbolt.cli import app
from agentbolt.execution.children import free_port
from agentbolt.gateway import rollout_base_url

ADMIN = "cli-gateway-admin"


@contextmanager
def agentbolt_server(tmp_path: Path, *engine_args: str, startup: float = 60.0) -> Iterator[str]:
    """``python -m agentbolt server`` with ``engine_args`` in a subprocess; yields its URL."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOLT_")}
    cmd = [sys.executable, "-m", "agentbolt", "server", "--store", f"sqlite:///{tmp_path / 's.db'}",
           "--port", str(port), "--admin-token", ADMIN, "--log-level", "warning", *engine_args]
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    try:
        deadline = time.monotonic() + startup
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"the server exited with {proc.returncode}: {proc.communicate()[1][-3000:]}")
            try:
                if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the server did not answer within {startup} s"
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


def claim(admin: httpx.Client, rollout_id: str, mode: str) -> tuple[str, str]:
    """Enqueue and claim one rollout; returns (attempt id, scoped token)."""
    admin.post("/v1/rollouts", json={"rollouts": [{"rollout_id": rollout_id, "mode": mode}]}).raise_for_status()
    (got,) = admin.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()
    assert got["rollout"]["rollout_id"] == rollout_id
    return got["attempt"]["attempt_id"], got["token"]


def model_call_span(admin: httpx.Client, rollout_id: str, timeout: float = 10.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        items = admin.get(f"/v1/rollouts/{rollout_id}/spans").json()["items"]
        calls = [s for s in items if "agentbolt.llm.request" in s["attributes"]]
        if calls:
            assert len(calls) == 1, calls
            return calls[0]["attributes"]  # type: ignore[no-any-return]
        assert time.monotonic() < deadline, f"no model-call span for {rollout_id} within {timeout} s"
        time.sleep(0.05)


def admin_client(url: str) -> httpx.Client:
    return httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)


@pytest.mark.timeout(60)
def test_server_with_an_openai_engine_forwards_and_records_a_rollouts_call(tmp_path: Path) -> None:
    with serve_fake_openai() as llm, agentbolt_server(
        tmp_path, "--engine", "openai", "--engine-url", llm, "--engine-model", "served-model", "--val-temperature", "0"
    ) as url, admin_client(url) as admin:
        aid, token = claim(admin, "ro-cli", "val")
        response = httpx.post(
            rollout_base_url(url, "ro-cli", aid) + "/chat/completions",
            headers={"Authorization": f"Bearer {token}"},
            json={"model": "gpt-4o", "temperature": 0.9, "messages": [{"role": "user", "content": "hi there"}]},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        assert response.json()["choices"][0]["message"]["content"] == "echo: hi there"
        (sent,) = llm.bodies("/v1/chat/completions")
        assert sent["model"] == "served-model" and sent["temperature"] == 0  # --engine-model, --val-temperature
        assert "return_token_ids" not in sent  # an OpenAI-compatible provider is not asked for token ids
        span = model_call_span(admin, "ro-cli")
        assert span["agentbolt.llm.engine"] == "openai"
        assert json.loads(span["agentbolt.llm.request"])["messages"][0]["content"] == "hi there"
        assert json.loads(span["agentbolt.llm.response"])["choices"][0]["message"]["content"] == "echo: hi there"
        # the scoped token is good for its own rollout only
        other = httpx.post(
            rollout_base_url(url, "ro-other", "at-x") + "/chat/completions",
            headers={"Authorization": f"Bearer {token}"},
            json={"model": "m", "messages": [{"role": "user", "content": "x"}]},
            timeout=30,
        )
        assert other.status_code == 403


@pytest.mark.timeout(90)
def test_server_with_the_transformers_engine_records_the_engines_token_ids(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the transformers engine needs torch")
    from agentbolt.models import tiny_model

    model, tokenizer = tiny_model(seed=3, vocab="bytes")
    model_dir = tmp_path / "tiny"
    model.save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    messages = [{"role": "user", "content": "count to three"}]
    expected_prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
    if not isinstance(expected_prompt, list):  # newer transformers return a BatchEncoding
        expected_prompt = expected_prompt["input_ids"]

    context = len(expected_prompt) + 20
    with agentbolt_server(
        tmp_path, "--engine", "transformers", "--model-path", str(model_dir), "--train-temperature", "1.0",
        "--context-length", str(context),
    ) as url, admin_client(url) as admin:
        aid, token = claim(admin, "ro-tiny", "train")
        response = httpx.post(
            rollout_base_url(url, "ro-tiny", aid) + "/chat/completions",
            headers={"Authorization": f"Bearer {token}"},
            json={"model": "tiny", "messages": messages, "max_tokens": 6, "seed": 1},
            timeout=60,
        )
        assert response.status_code == 200, response.text
        answer = response.json()
        span = model_call_span(admin, "ro-tiny")
        # no limit asked: the answer may fill what the context leaves (not a fixed default)
        unlimited = httpx.post(rollout_base_url(url, "ro-tiny", aid) + "/chat/completions",
                               headers={"Authorization": f"Bearer {token}"}, timeout=60,
                               json={"model": "tiny", "messages": messages, "ignore_eos": True, "seed": 2})
        assert unlimited.json()["usage"]["completion_tokens"] == context - len(expected_prompt)
        too_long = httpx.post(rollout_base_url(url, "ro-tiny", aid) + "/chat/completions",
                              headers={"Authorization": f"Bearer {token}"}, timeout=60,
                              json={"model": "tiny", "messages": [{"role": "user", "content": "x" * context}]})
        assert too_long.status_code == 400 and too_long.json()["error"]["code"] == "context_length_exceeded"
    assert span["agentbolt.llm.engine"] == "transformers"
    assert span["agentbolt.llm.token_ids_source"] == "engine"
    assert list(span["agentbolt.llm.prompt_token_ids"]) == list(expected_prompt)
    response_ids = list(span["agentbolt.llm.response_token_ids"])
    assert 1 <= len(response_ids) <= 6
    assert len(response_ids) == answer["usage"]["completion_tokens"]
    assert len(span["agentbolt.llm.response_logprobs"]) == len(response_ids)
    assert json.loads(span["agentbolt.llm.request"])["temperature"] == 1.0  # --train-temperature


# ------------------------------------------------------------------ errors
def run_cli(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, ["server", "--store", "memory://", *args], env={"AGENTBOLT_ADMIN_TOKEN": ""})
    return result.exit_code, result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--engine", "vllm"], "--engine vllm needs --engine-url"),
        (["--engine", "openai", "--engine-url", "http://x/v1", "--model-path", "m"], "--model-path is for --engine transformers"),
        (["--engine", "transformers"], "--engine transformers needs --model-path"),
        (["--engine", "transformers", "--model-path", "m", "--engine-url", "http://x/v1"], "--engine-url is for"),
        (["--engine-url", "http://x/v1"], "add --engine"),
        (["--val-temperature", "0"], "add --engine"),
        (["--max-tokens", "64"], "add --engine"),
        (["--engine", "openai", "--engine-url", "http://x/v1", "--context-length", "4096"], "give the openai engine"),
    ],
)
def test_engine_options_that_cannot_work_are_usage_errors(args: Sequence[str], says: str) -> None:
    code, output = run_cli(*args)
    assert code == 2, output
    assert says in " ".join(output.split()), output


def test_a_model_directory_that_does_not_load_is_a_one_line_error(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="loading a model needs torch")
    code, output = run_cli("--engine", "transformers", "--model-path", str(tmp_path / "nothing-here"))
    assert code == 1, output
    assert "cannot load the model" in output and "smollm2" in output


def test_without_torch_the_transformers_engine_says_what_to_install(tmp_path: Path) -> None:
    # a fresh interpreter where `import torch` fails, as on an installation without the extra
    code = (
        "import sys; sys.modules['torch'] = None; from agentbolt.cli import app; "
        f"app(['server', '--store', 'memory://', '--port', '{free_port()}', '--engine', 'transformers', "
        "'--model-path', 'smollm2'])"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTBOLT_")}
    out = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 1, out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: the transformers engine needs torch") and "pip install" in last, out.stderr
    assert "Traceback" not in out.stderr
