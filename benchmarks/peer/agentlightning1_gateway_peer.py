#!/usr/bin/env python3
"""Peer gateway for benchmarks/gateway_overhead.py: Agent Lightning 1.0's server (``agl-server``).

Run with the *peer1* virtualenv (``benchmarks/peer/setup.sh``: Python >= 3.12,
``agentlightning==1.0.2``), never the project's::

    .bench-venv-peer1/bin/python benchmarks/peer/agentlightning1_gateway_peer.py PORT ENGINE_URL MODEL

It serves Agent Lightning 1.0's own FastAPI app (``agentlightning.server.app.create_app``
with its packaged ``config/server.yaml``, as ``agl-server`` does: uvicorn, one worker,
``timeout_keep_alive=120``) on ``127.0.0.1:PORT`` with an API key, and changes only what a
benchmark must: the model name, the address, uvicorn's access log off and structlog at
WARNING (its proxy logs a debug line per call to the console otherwise; ours logs nothing
per call either). Its install brings neither uvloop nor httptools, so uvicorn runs on
asyncio with h11, as ``agl-server`` does after ``pip install agentlightning``.

Once it answers, it registers the engine at ``ENGINE_URL`` as the model server of
``MODEL`` (``POST /api/models``, what a trainer does for its vLLM servers) and creates one
rollout (``POST /api/rollouts``), then prints one JSON line ``{"url", "token"}``: the
proxied chat-completions route an agent is given (``/proxy/rollout/<id>/attempt/0/mode/
train/openai/v1/chat/completions``: train mode, so it adds ``return_token_ids`` and
``logprobs`` to each body, as in training) and the key to send as ``Authorization: Bearer``.
Every proxied call is recorded as one ``model_request`` event (request, response with its
token ids, latency) in its in-memory store. It serves until SIGTERM, then prints
``{"recorded": n, "what": "model_request events"}`` from its own events query.
"""

from __future__ import annotations

import asyncio
import json
import logging
import signal
import sys
from pathlib import Path

KEY = "sk-agentbolt-bench-peer1"
ATTEMPT = "0"  # the attempt id its controllers give an agent (DEFAULT_ATTEMPT_ID)


async def main(port: int, engine_url: str, model: str) -> None:
    import agentlightning
    import httpx
    import structlog
    import uvicorn
    from agentlightning.server.app import create_app
    from agentlightning.server.routes.events import query_events
    from omegaconf import OmegaConf

    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))
    config = OmegaConf.load(Path(agentlightning.__file__).parent / "config" / "server.yaml")
    config.host, config.port, config.key = "127.0.0.1", port, KEY
    config.default_proxy.model_name = model
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(config),
            host=str(config.host),
            port=int(config.port),
            workers=1,
            timeout_keep_alive=120,
            log_level="warning",
            access_log=False,
        )
    )
    # uvicorn takes SIGTERM for a graceful shutdown and raises it again once done: this
    # handler (restored by uvicorn) lets the process print its count afterwards
    signal.signal(signal.SIGTERM, lambda *_: None)
    serving = asyncio.create_task(server.serve())
    while not server.started:
        if serving.done():
            serving.result()
            raise RuntimeError("Agent Lightning's server stopped while starting")
        await asyncio.sleep(0.05)

    base = f"http://127.0.0.1:{port}"
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {KEY}"}) as api:
        (await api.post("/api/models", json=[{"model": model, "endpoint": engine_url}])).raise_for_status()
        created = await api.post("/api/rollouts", json=[{"input": {"task": "bench"}, "is_train": True}])
        created.raise_for_status()
        rollout_id = created.json()[0]["rollout_id"]
    url = f"{base}/proxy/rollout/{rollout_id}/attempt/{ATTEMPT}/mode/train/openai/v1/chat/completions"
    print(json.dumps({"url": url, "token": KEY}), flush=True)

    await serving
    recorded = await query_events(rollout_id, event_type="model_request", format=None, include_routed_experts=True)
    print(json.dumps({"recorded": len(recorded), "what": "model_request events"}), flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
