"""What the Job executor creates for one attempt: a Secret (the scoped token), a
NetworkPolicy (egress to the gateway only) and a Job rendered from a template.

The template is YAML with Jinja2 placeholders (``{{ image | tojson }}``); it sees
``name``, ``namespace``, ``labels``, ``image``, ``argv``, ``env`` (a list of
``{name, value}``), ``secret_name``, ``resources``, ``deadline``, ``ttl`` and ``task``
(the rollout's input). Whatever it says, the executor then sets what the attempt's
safety rests on: ``backoffLimit: 0``, ``restartPolicy: Never``, the labels,
``activeDeadlineSeconds``, ``ttlSecondsAfterFinished``, the token from the Secret, no
service-account token. Every manifest is validated (:mod:`.schema`) before it is sent.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import yaml

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.kubernetes.schema import validate

__all__ = ["DEFAULT_TEMPLATE", "AttemptObjects", "dns_name", "render_attempt"]

DEFAULT_TEMPLATE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ name | tojson }}
  namespace: {{ namespace | tojson }}
spec:
  template:
    spec:
      containers:
        - name: program
          image: {{ image | tojson }}
          command: {{ argv | tojson }}
          workingDir: /workspace
          env: {{ env | tojson }}
          resources: {{ resources | tojson }}
          securityContext:
            allowPrivilegeEscalation: false
            capabilities: {drop: [ALL]}
          volumeMounts: [{name: workspace, mountPath: /workspace}, {name: tmp, mountPath: /tmp}]
      volumes: [{name: workspace, emptyDir: {}}, {name: tmp, emptyDir: {medium: Memory}}]
"""

TOKEN_KEY = "OPENAI_API_KEY"
_DNS = re.compile(r"[^a-z0-9-]")


def dns_name(*parts: str) -> str:
    """A DNS-1123 name (lower case, ``-``, at most 63 characters) from ``parts``."""
    name = "-".join(_DNS.sub("-", p.lower()) for p in parts if p).strip("-")
    return name[:63].rstrip("-")


@dataclass(frozen=True)
class AttemptObjects:
    job: dict[str, Any]
    secret: dict[str, Any]
    network_policy: dict[str, Any]


def render_attempt(
    template: str,
    *,
    name: str,
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    image: str,
    argv: list[str],
    env: Mapping[str, str],
    token: str,
    gateway_url: str,
    gateway_peers: list[dict[str, Any]] | None,
    resources: Mapping[str, Any],
    deadline: int | None,
    ttl: int,
    task: Any,
) -> AttemptObjects:
    """The attempt's three objects, validated."""
    import jinja2

    plain = [{"name": k, "value": v} for k, v in env.items() if k != TOKEN_KEY]
    secret_name = f"{name}-token"
    values = {"name": name, "namespace": namespace, "labels": dict(labels), "image": image, "argv": argv,
              "env": plain, "secret_name": secret_name, "resources": dict(resources), "deadline": deadline,
              "ttl": ttl, "task": task}
    try:
        text = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False).from_string(template).render(
            **values)
        job = yaml.safe_load(text)
    except (jinja2.TemplateError, yaml.YAMLError) as exc:
        raise HarnessConfigError(f"the Job template does not render: {exc}") from None
    if not isinstance(job, dict) or job.get("kind") != "Job":
        raise HarnessConfigError("the Job template must render one batch/v1 Job")
    _enforce(job, name, namespace, labels, annotations, secret_name, deadline, ttl)
    secret = {
        "apiVersion": "v1", "kind": "Secret", "type": "Opaque",
        "metadata": {"name": secret_name, "namespace": namespace, "labels": dict(labels),
                     "annotations": dict(annotations)},
        "stringData": {TOKEN_KEY: token},
    }
    policy = network_policy(name, namespace, labels, annotations, gateway_url, gateway_peers)
    for manifest in (job, secret, policy):
        validate(manifest)
    return AttemptObjects(job, secret, policy)


def _enforce(job: dict[str, Any], name: str, namespace: str, labels: Mapping[str, str],
             annotations: Mapping[str, str], secret_name: str, deadline: int | None, ttl: int) -> None:
    meta = job.setdefault("metadata", {})
    meta.update(name=name, namespace=namespace)
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    meta["annotations"] = {**(meta.get("annotations") or {}), **annotations}
    spec = job.setdefault("spec", {})
    spec["backoffLimit"] = 0  # a failed program is the attempt's outcome; retries are the store's decision
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    spec["ttlSecondsAfterFinished"] = ttl
    pod = spec.setdefault("template", {})
    pod_meta = pod.setdefault("metadata", {})
    pod_meta["labels"] = {**(pod_meta.get("labels") or {}), **labels}
    pod_spec = pod.setdefault("spec", {})
    pod_spec["restartPolicy"] = "Never"
    pod_spec["automountServiceAccountToken"] = False  # the program gets its scoped token and nothing else
    pod_spec["enableServiceLinks"] = False
    containers = pod_spec.get("containers") or []
    if not containers:
        raise HarnessConfigError("the Job template has no container")
    for container in containers[:1]:  # the program's
        env = [e for e in container.get("env") or [] if e.get("name") != TOKEN_KEY]
        env.append({"name": TOKEN_KEY, "valueFrom": {"secretKeyRef": {"name": secret_name, "key": TOKEN_KEY}}})
        container["env"] = env


def network_policy(name: str, namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str],
                   gateway_url: str, peers: list[dict[str, Any]] | None) -> dict[str, Any]:
    """Egress from the attempt's pod to the gateway's port only (and DNS where the gateway
    is named, not an address); no ingress."""
    parts = urlsplit(gateway_url)
    port = parts.port or (443 if parts.scheme == "https" else 80)
    host = parts.hostname or ""
    egress: list[dict[str, Any]] = []
    if peers is None:
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise HarnessConfigError(
                f"the gateway {gateway_url} is named, not an address: give KubernetesJobExecutor(gateway_peers=[...]) "
                "the NetworkPolicy peers it runs on (e.g. [{'podSelector': {'matchLabels': {'app': 'agentbolt'}}, "
                "'namespaceSelector': {}}]) so the pods may reach it and nothing else"
            ) from None
        peers = [{"ipBlock": {"cidr": f"{address}/{address.max_prefixlen}"}}]
    else:
        egress.append({"to": [{"namespaceSelector": {}, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}}],
                       "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]})
    egress.insert(0, {"to": peers, "ports": [{"protocol": "TCP", "port": port}]})
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": {"name": f"{name}-egress", "namespace": namespace, "labels": dict(labels),
                     "annotations": dict(annotations)},
        "spec": {"podSelector": {"matchLabels": {"agentbolt.attempt-id": labels["agentbolt.attempt-id"]}},
                 "policyTypes": ["Ingress", "Egress"], "ingress": [], "egress": egress},
    }
