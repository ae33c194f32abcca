"""The Job executor's tests need the Kubernetes client (``pip install 'agentbolt[k8s]'``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fakes.kubernetes_api import FakeCluster, serve_fake_kubernetes

IMAGE = "registry.example/agent:1"


@pytest.fixture
def cluster() -> Iterator[FakeCluster]:
    with serve_fake_kubernetes({IMAGE}) as fake:
        yield fake


@pytest.fixture
def api_client(cluster: FakeCluster) -> Any:
    from kubernetes import client

    config = client.Configuration()
    config.host = cluster.url
    return client.ApiClient(config)
