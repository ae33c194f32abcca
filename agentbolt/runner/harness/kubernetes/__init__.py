"""Harnessed programs as Kubernetes Jobs: :class:`KubernetesJobExecutor` (``pip install 'agentbolt[k8s]'``).

Untested on a cluster: its tests run against a fake API server speaking the real REST
paths, and every manifest it renders is validated against the client's schema.
"""

from agentbolt.runner.harness.kubernetes.client import KubernetesUnavailableError
from agentbolt.runner.harness.kubernetes.executor import ImageNotReadyError, KubernetesJobExecutor
from agentbolt.runner.harness.kubernetes.manifests import DEFAULT_TEMPLATE, render_attempt
from agentbolt.runner.harness.kubernetes.schema import ManifestError, api_version_of_client, validate

__all__ = [
    "DEFAULT_TEMPLATE",
    "ImageNotReadyError",
    "KubernetesJobExecutor",
    "KubernetesUnavailableError",
    "ManifestError",
    "api_version_of_client",
    "render_attempt",
    "validate",
]
