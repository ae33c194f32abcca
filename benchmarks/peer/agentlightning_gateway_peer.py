#!/usr/bin/env python3
"""Peer gateway for benchmarks/gateway_overhead.py: Agent Lightning 0.3.0's ``LLMProxy``.

Run with the *peer* virtualenv (``benchmarks/peer/setup.sh``), never the project's::

    .bench-venv-peer/bin/python benchmarks/peer/agentlightning_gateway_peer.py PORT ENGINE_URL MODEL

It serves Agent Lightning's LLM proxy (LiteLLM's proxy server with Agent Lightning's
rollout/attempt middleware and its token-id and OpenTelemetry callbacks, which store a
span per call) on ``127.0.0.1:PORT`` in front of the engine at ``ENGINE_URL`` (a vLLM
model, ``hosted_vllm/MODEL``), with its in-memory store, in this process (launch mode
``asyncio``). Once it answers, it enqueues and claims one rollout and prints one JSON line
``{"url", "token"}``: calls go to ``/rollout/<rollout_id>/attempt/<attempt_id>/v1/chat/completions``
with ``Authorization: Bearer <token>`` (LiteLLM's proxy refuses to start without a master
key; this is it). It serves until SIGTERM, then prints ``{"recorded": n, "what": "spans"}``:
the spans its store holds for the rollout (Agent Lightning stores several per call:
LiteLLM's request span and its children).

Agent Lightning 1.0's gateway (a different server) is measured by
``agentlightning1_gateway_peer.py`` in its own venv (Python >= 3.12).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import sys

MASTER_KEY = "sk-agentbolt-bench-peer"


async def main(port: int, engine_url: str, model: str) -> None:
    os.environ["LITELLM_MASTER_KEY"] = MASTER_KEY
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"  # no download of LiteLLM's price list
    from agentlightning import LLMProxy
    from agentlightning.store.memory import InMemoryLightningStore
    from agentlightning.utils.server_launcher import PythonServerLauncherArgs

    store = InMemoryLightningStore()
    # loopback (by default it picks the machine's address); no health check: LiteLLM's /health
    # needs the master key, which the launcher does not send
    launcher = PythonServerLauncherArgs(
        port=port, host="127.0.0.1", launch_mode="asyncio", healthcheck_url=None, log_level=logging.WARNING
    )
    proxy = LLMProxy(
        model_list=[{"model_name": model, "litellm_params": {"model": f"hosted_vllm/{model}", "api_base": engine_url}}],
        store=store,
        launcher_args=launcher,
    )
    await proxy.start()
    await store.enqueue_rollout(input={"task": "bench"})
    claimed = await store.dequeue_rollout(worker_id="bench")
    assert claimed is not None
    url = (
        f"http://127.0.0.1:{port}/rollout/{claimed.rollout_id}/attempt/{claimed.attempt.attempt_id}/v1/chat/completions"
    )
    print(json.dumps({"url": url, "token": MASTER_KEY}), flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await asyncio.sleep(1.0)  # the OpenTelemetry exporter's last batch
    spans = await store.query_spans(claimed.rollout_id)
    print(json.dumps({"recorded": len(spans), "what": "spans"}), flush=True)


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(main(int(sys.argv[1]), sys.argv[2], sys.argv[3]))
