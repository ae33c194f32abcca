"""Acceptance (issue 28): every manifest the Job executor renders validates against the
Kubernetes schema of the installed client (its generated models); what the attempt's
safety rests on is set whatever the template says."""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("kubernetes", reason="the Kubernetes client is not installed (pip install 'agentbolt[k8s]')")
pytest.importorskip("jinja2", reason="jinja2 is not installed (pip install 'agentbolt[k8s]')")

from agentbolt.runner.harness.errors import HarnessConfigError
from agentbolt.runner.harness.kubernetes import (
    DEFAULT_TEMPLATE,
    ManifestError,
    api_version_of_client,
    render_attempt,
    validate,
)

LABELS = {"app.kubernetes.io/managed-by": "agentbolt", "agentbolt.owner": "t", "agentbolt.rollout-id": "ro-1",
          "agentbolt.attempt-id": "at-1"}


def _render(template: str = DEFAULT_TEMPLATE, **over: Any) -> Any:
    args: dict[str, Any] = dict(
        name="agentbolt-at-1", namespace="rollouts", labels=LABELS, annotations={"agentbolt.controller": "h:1:2"},
        image="registry.example/agent:1", argv=["python", "/app/solve.py", "--q", "two words"],
        env={"OPENAI_BASE_URL": "http://10.0.0.5:8000/rollout/ro-1/attempt/at-1/v1", "OPENAI_API_KEY": "secret-token",
             "AGENTBOLT_TASK": '{"q": 1}'},
        token="secret-token", gateway_url="http://10.0.0.5:8000", gateway_peers=None,
        resources={"limits": {"memory": "1Gi", "cpu": "1"}}, deadline=120, ttl=600, task={"q": 1, "repo": "x/y"},
    )
    args.update(over)
    return render_attempt(template, **args)


def test_the_client_schema_is_that_of_a_kubernetes_release() -> None:
    assert api_version_of_client().startswith("release-1.")


def test_the_three_objects_validate_and_carry_the_attempts_rules() -> None:
    objects = _render()
    for manifest in (objects.job, objects.secret, objects.network_policy):
        validate(manifest)  # raises on any mismatch with the schema
    spec = objects.job["spec"]
    assert spec["backoffLimit"] == 0 and spec["activeDeadlineSeconds"] == 120 and spec["ttlSecondsAfterFinished"] == 600
    pod = spec["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["automountServiceAccountToken"] is False
    assert spec["template"]["metadata"]["labels"] == LABELS == objects.job["metadata"]["labels"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["OPENAI_API_KEY"] == {"name": "OPENAI_API_KEY",
                                     "valueFrom": {"secretKeyRef": {"name": "agentbolt-at-1-token",
                                                                    "key": "OPENAI_API_KEY"}}}
    assert "secret-token" not in str(objects.job)  # the token is only in the Secret
    assert objects.secret["stringData"] == {"OPENAI_API_KEY": "secret-token"}
    policy = objects.network_policy["spec"]
    assert policy["podSelector"] == {"matchLabels": {"agentbolt.attempt-id": "at-1"}}
    assert policy["egress"] == [{"to": [{"ipBlock": {"cidr": "10.0.0.5/32"}}], "ports": [{"protocol": "TCP",
                                                                                         "port": 8000}]}]
    assert policy["ingress"] == [] and policy["policyTypes"] == ["Ingress", "Egress"]


def test_a_named_gateway_needs_its_peers_and_gets_dns() -> None:
    with pytest.raises(HarnessConfigError, match="gateway_peers"):
        _render(gateway_url="http://agentbolt.rollouts.svc:8000")
    peers = [{"podSelector": {"matchLabels": {"app": "agentbolt"}}, "namespaceSelector": {}}]
    policy = _render(gateway_url="http://agentbolt.rollouts.svc:8000", gateway_peers=peers).network_policy
    assert policy["spec"]["egress"][0] == {"to": peers, "ports": [{"protocol": "TCP", "port": 8000}]}
    assert policy["spec"]["egress"][1]["ports"][0] == {"protocol": "UDP", "port": 53}


TEMPLATE = """
apiVersion: batch/v1
kind: Job
metadata: {name: {{ name | tojson }}, labels: {team: rl}}
spec:
  backoffLimit: 6
  template:
    spec:
      restartPolicy: OnFailure
      nodeSelector: {pool: {{ task.pool | tojson }}}
      containers:
        - name: program
          image: {{ image | tojson }}
          command: {{ argv | tojson }}
          env: [{name: OPENAI_API_KEY, value: leaked}]
"""


def test_a_template_sees_the_task_and_cannot_loosen_the_rules() -> None:
    objects = _render(TEMPLATE, task={"pool": "gpu"})
    spec = objects.job["spec"]
    assert spec["template"]["spec"]["nodeSelector"] == {"pool": "gpu"}
    assert objects.job["metadata"]["labels"]["team"] == "rl"
    assert spec["backoffLimit"] == 0 and spec["template"]["spec"]["restartPolicy"] == "Never"
    assert "leaked" not in str(objects.job)


@pytest.mark.parametrize(("break_it", "message"), [
    (lambda j: j["spec"]["template"]["spec"]["containers"][0].pop("name"), "containers.0.name: Field required"),
    (lambda j: j["spec"].__setitem__("backoffLimit", "0"), "backoffLimit: Input should be a valid integer"),
    (lambda j: j["spec"]["template"]["spec"]["containers"][0].__setitem__("imagePullPolicyy", "x"),
     "imagePullPolicyy: Extra inputs are not permitted"),
])
def test_the_validator_rejects_what_the_api_would(break_it: Any, message: str) -> None:
    job = copy.deepcopy(_render().job)
    break_it(job)
    with pytest.raises(ManifestError, match=message.replace(".", r"\.")):
        validate(job)


def test_a_template_that_does_not_render_says_so() -> None:
    with pytest.raises(HarnessConfigError, match="does not render"):
        _render("kind: Job\nmetadata: {name: {{ nothing_here }}}\n")
    with pytest.raises(ManifestError, match="schema"):
        _render(TEMPLATE.replace("command:", "commandd:"), task={"pool": "a"})
