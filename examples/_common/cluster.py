"""A recipe's ``cluster`` section: where each part of the run goes at scale (docs/scale-out.md).

``examples/calc/cluster.yaml`` and ``examples/harness_mini_swe_agent/cluster.yaml`` hold
their recipe's settings at cluster scale plus a ``cluster`` mapping:

* ``policy_model`` — the model trained in this process (the engine servers serve it);
* ``store`` — the store URL (PostgreSQL), served by the server this process starts on
  ``host``:``port`` (with the gateway in it); runners started elsewhere join it
  (``runner_concurrency``: the ``--concurrency`` the printed runner command says);
* ``engine`` — an ``EngineSpec`` (vLLM or SGLang replicas: one URL each); ``gateway`` —
  ``GatewayConfig`` fields;
* per algorithm (``grpo``, ``sft``) — its config's fields that differ on GPUs (``dtype``,
  ``device``, ``sharding``, ``lora_dir``...).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel

import agentbolt

__all__ = ["cluster_gateway", "cluster_trainer", "overridden"]

M = TypeVar("M", bound=BaseModel)


def overridden(config: M, cluster: dict[str, Any], section: str) -> M:
    """``config`` with the fields of ``cluster[section]`` (none: as it is), validated again."""
    fields = cluster.get(section) or {}
    return type(config).model_validate({**config.model_dump(), **fields}) if fields else config


def cluster_gateway(cluster: dict[str, Any], **config: Any) -> Any:
    """The gateway the ``cluster`` section describes: its ``engine`` behind a gateway
    configured with ``config`` (the recipe's own, e.g. greedy sampling for evaluations)
    and the section's ``gateway`` fields, which win."""
    from agentbolt.engines import EngineSpec
    from agentbolt.gateway import GatewayConfig, GatewaySpec

    return GatewaySpec(engine=EngineSpec(**cluster["engine"]),
                       config=GatewayConfig(**{**config, **(cluster.get("gateway") or {})}))


def cluster_trainer(algorithm: Any, cluster: dict[str, Any], run_dir: Path, *, gateway: Any = None,
                    resources: dict[str, Any] | None = None) -> agentbolt.Trainer:
    """A trainer that runs ``algorithm`` as the ``cluster`` section says: the server on
    ``host``:``port`` over ``store`` with ``gateway`` (default: :func:`cluster_gateway`),
    runners started elsewhere (``agentbolt runner``, the command printed at the start).
    The server's admin token is ``$AGENTBOLT_ADMIN_TOKEN`` when set (one generated per run
    otherwise), so runners keep theirs over the several runs of a ladder."""
    from agentbolt.execution import ExternalStrategy

    extra = {"resources": resources} if resources else {}
    return agentbolt.Trainer(
        algorithm=algorithm, store=cluster.get("store"), gateway=gateway or cluster_gateway(cluster),
        strategy=ExternalStrategy(host=cluster.get("host", "0.0.0.0"), port=cluster.get("port", 4747),
                                  admin_token=os.environ.get("AGENTBOLT_ADMIN_TOKEN"), run_dir=str(run_dir)),
        runner=agentbolt.Runner(concurrency=cluster.get("runner_concurrency", 16)), **extra,
    )
