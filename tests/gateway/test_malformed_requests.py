"""A malformed model call gets a 400 about its body — even when the engine behind the
gateway would drop the connection on it (the gateway could then only answer 502 about
the engine). The engine here drops every connection; a well-formed call shows it."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from agentbolt.engines import VLLMEngine
from agentbolt.gateway import Gateway
from agentbolt.scoped import rollout_base_url
from agentbolt.server.testing import serve_in_thread
from agentbolt.store.memory import MemoryStore

ADMIN = "admin"


@pytest.fixture
def dropping_engine() -> Iterator[str]:
    """An 'engine' that accepts each connection, reads a little and closes it."""
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}/v1"
    stop.set()
    thread.join(5)
    server.close()


@pytest.fixture
def api(dropping_engine: str) -> Iterator[httpx.Client]:
    """A client of a claimed attempt's gateway base URL."""
    gateway = Gateway(VLLMEngine(dropping_engine))
    with serve_in_thread(MemoryStore(), admin_token=ADMIN, gateway=gateway) as url:
        admin = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN}"}, timeout=30)
        admin.post("/v1/rollouts", json={"rollouts": [{"input": "q"}]}).raise_for_status()
        claim = admin.post("/v1/claims", json={"worker_id": "w", "limit": 1}).json()[0]
        rid, aid = claim["rollout"]["rollout_id"], claim["attempt"]["attempt_id"]
        with httpx.Client(base_url=rollout_base_url(url, rid, aid).removesuffix("/v1"),
                          headers={"Authorization": f"Bearer {claim['token']}"}, timeout=30) as client:
            yield client
        admin.close()


CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}

MALFORMED: list[tuple[str, dict[str, Any], str]] = [
    ("/v1/chat/completions", {"model": "m", "messages": "hi"}, "messages"),
    ("/v1/chat/completions", {"model": "m"}, "messages"),
    ("/v1/chat/completions", {"model": "m", "messages": []}, "messages"),
    ("/v1/chat/completions", {"model": "m", "messages": ["hi"]}, "messages[0]"),
    ("/v1/chat/completions", {"model": "m", "messages": [{"content": "hi"}]}, "messages[0].role"),
    ("/v1/chat/completions", {"model": "m", "messages": [{"role": "user", "content": 7}]}, "messages[0].content"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": "lots"}, "max_tokens"),
    ("/v1/chat/completions", {**CHAT, "temperature": "hot"}, "temperature"),
    ("/v1/chat/completions", {**CHAT, "n": 0}, "n"),
    ("/v1/chat/completions", {**CHAT, "stream": "yes"}, "stream"),
    ("/v1/chat/completions", {**CHAT, "stop": [1, 2]}, "stop"),
    ("/v1/chat/completions", {**CHAT, "tools": "all"}, "tools"),
    ("/v1/chat/completions", {**CHAT, "model": 5}, "model"),
    ("/v1/completions", {"model": "m"}, "prompt"),
    ("/v1/completions", {"model": "m", "prompt": {"text": "hi"}}, "prompt"),
    ("/v1/completions", {"model": "m", "prompt": "hi", "logprobs": "yes"}, "logprobs"),
]


@pytest.mark.parametrize(("path", "body", "param"), MALFORMED)
def test_a_malformed_call_is_a_400_about_the_body(api: httpx.Client, path: str, body: dict[str, Any],
                                                  param: str) -> None:
    response = api.post(path, json=body)
    assert response.status_code == 400, (response.status_code, response.text)
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error" and error["param"] == param, error
    assert param.split("[")[0].split(".")[0] in error["message"] and "engine" not in error["message"]


def test_a_well_formed_call_reaches_the_engine(api: httpx.Client) -> None:
    for path, body in (("/v1/chat/completions", CHAT), ("/v1/completions", {"model": "m", "prompt": [[1, 2], [3]]}),
                       ("/v1/completions", {"model": "m", "prompt": ["a", "b"], "logprobs": 1})):
        response = api.post(path, json=body)
        assert response.status_code == 502 and "engine" in response.json()["error"]["message"], response.text
