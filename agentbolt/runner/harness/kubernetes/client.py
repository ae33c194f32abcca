"""The few Kubernetes API calls the Job executor makes, on the official client."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.kubernetes.manifests import AttemptObjects

__all__ = ["KubeApi", "KubernetesUnavailableError", "kubernetes_api"]


class KubernetesUnavailableError(HarnessConfigError):
    """No Kubernetes client or configuration to reach a cluster with."""


def kubernetes_api(api_client: Any, kubeconfig: str | None, context: str | None) -> KubeApi:
    """A :class:`KubeApi` on ``api_client``, else on the kubeconfig or the in-cluster account."""
    try:
        from kubernetes import client, config
    except ImportError:
        raise KubernetesUnavailableError(
            "KubernetesJobExecutor needs the Kubernetes client: pip install 'agentbolt[k8s]' (or pip install "
            "kubernetes jinja2)"
        ) from None
    if api_client is None:
        try:
            if kubeconfig is None and context is None:
                try:
                    config.load_incluster_config()
                except config.ConfigException:
                    config.load_kube_config()
            else:
                config.load_kube_config(config_file=kubeconfig, context=context)
        except Exception as exc:  # noqa: BLE001 - the client raises several kinds for a missing config
            raise KubernetesUnavailableError(
                f"no Kubernetes configuration found ({exc}): run inside a cluster, set $KUBECONFIG, or give "
                "KubernetesJobExecutor(kubeconfig=..., context=...) or api_client=..."
            ) from None
        api_client = client.ApiClient()
    return KubeApi(api_client)


class KubeApi:
    def __init__(self, api_client: Any) -> None:
        from kubernetes import client

        self.client = api_client
        self.batch = client.BatchV1Api(api_client)
        self.core = client.CoreV1Api(api_client)
        self.net = client.NetworkingV1Api(api_client)

    def create_attempt(self, objects: AttemptObjects) -> None:
        """The Secret and the NetworkPolicy first: the pod never runs without either."""
        from kubernetes.client import V1Job, V1NetworkPolicy, V1Secret

        namespace = objects.job["metadata"]["namespace"]
        self.core.create_namespaced_secret(namespace, V1Secret.model_validate(objects.secret))
        self.net.create_namespaced_network_policy(namespace, V1NetworkPolicy.model_validate(objects.network_policy))
        self.batch.create_namespaced_job(namespace, V1Job.model_validate(objects.job))

    def delete_attempt(self, name: str, namespace: str) -> None:
        """The Job (and its pods), its Secret and NetworkPolicy; those already gone are fine."""
        from kubernetes.client import V1DeleteOptions
        from kubernetes.client.exceptions import ApiException

        calls = (
            lambda: self.batch.delete_namespaced_job(
                name, namespace, body=V1DeleteOptions(propagation_policy="Background")),
            lambda: self.core.delete_namespaced_secret(f"{name}-token", namespace),
            lambda: self.net.delete_namespaced_network_policy(f"{name}-egress", namespace),
        )
        for call in calls:
            try:
                call()
            except ApiException as exc:
                if exc.status != 404:
                    raise

    def list_jobs(self, namespace: str, selector: str) -> tuple[list[Any], str]:
        listed = self.batch.list_namespaced_job(namespace, label_selector=selector)
        return list(listed.items), str((listed.metadata.resource_version if listed.metadata else None) or "")

    def watch_jobs(self, namespace: str, selector: str, resource_version: str, timeout: int) -> Iterator[Any]:
        from kubernetes import watch

        stream = watch.Watch()
        try:
            yield from stream.stream(self.batch.list_namespaced_job, namespace, label_selector=selector,
                                     resource_version=resource_version or None, timeout_seconds=timeout)
        finally:
            stream.stop()

    def pods_of(self, job: str, namespace: str) -> list[Any]:
        return list(self.core.list_namespaced_pod(namespace, label_selector=f"job-name={job}").items)

    def pod_log(self, pod: str, namespace: str) -> str:
        from kubernetes.client.exceptions import ApiException

        with contextlib.suppress(ApiException):
            return str(self.core.read_namespaced_pod_log(pod, namespace, container="program"))
        return ""
