"""Every manifest checked against the Kubernetes API schema of the installed client, offline.

The official client's models are generated from the Kubernetes OpenAPI document of its
release (``kubernetes`` 37.x: ``release-1.37``, see :func:`api_version_of_client`); in
that client (the ``[k8s]`` extra asks for 37 or later) they are pydantic models that
forbid unknown fields, require the required ones and type every field strictly.
:func:`validate` parses a manifest with the model of its kind (``V1Job.model_validate``):
an unknown field, a wrong type or a missing required field is a :class:`ManifestError`
naming where.
"""

from __future__ import annotations

from typing import Any

__all__ = ["KINDS", "ManifestError", "api_version_of_client", "validate"]

KINDS = {
    ("batch/v1", "Job"): "V1Job",
    ("v1", "Secret"): "V1Secret",
    ("v1", "Pod"): "V1Pod",
    ("networking.k8s.io/v1", "NetworkPolicy"): "V1NetworkPolicy",
}


class ManifestError(ValueError):
    """A manifest the Kubernetes API would reject; the message says where and why."""


def api_version_of_client() -> str:
    """The Kubernetes release the installed client's models were generated from."""
    from kubernetes import client

    for line in client.Configuration().to_debug_report().splitlines():
        if line.startswith("Version of the API:"):
            return line.split(":", 1)[1].strip()
    return "unknown"


def _models() -> dict[str, Any]:
    from kubernetes.client import V1Job, V1NetworkPolicy, V1Pod, V1Secret

    return {"V1Job": V1Job, "V1Secret": V1Secret, "V1Pod": V1Pod, "V1NetworkPolicy": V1NetworkPolicy}


def validate(manifest: dict[str, Any]) -> None:
    """Raise :class:`ManifestError` unless ``manifest`` is a valid object of its kind."""
    import pydantic

    api_version, kind = manifest.get("apiVersion"), manifest.get("kind")
    name = KINDS.get((str(api_version), str(kind)))
    if name is None:
        raise ManifestError(f"{kind} {api_version}: not a kind agentbolt renders ({sorted(KINDS)})")
    try:
        _models()[name].model_validate(manifest)
    except pydantic.ValidationError as exc:
        problems = "; ".join(
            f"{kind}.{'.'.join(str(p) for p in error['loc'])}: {error['msg']}" for error in exc.errors()[:10]
        )
        raise ManifestError(f"{kind} {manifest.get('metadata', {}).get('name', '?')} does not match the "
                            f"Kubernetes {api_version_of_client()} schema: {problems}") from None
