"""A fake Kubernetes API server: the REST paths the official client uses for Jobs, pods,
pod logs, Secrets and NetworkPolicies (create, get, list with label selectors, watch,
delete), and a fake kubelet that runs each Job's pod as a local process.

The kubelet resolves the pod's environment (``value``, ``secretKeyRef`` into stored
Secrets), runs the first container's ``command`` with it, keeps its output as the pod's
log, and moves the pod and the Job through their states as a cluster does: ``Running``;
``Succeeded`` / ``Failed`` with the container's exit code and a ``Complete`` / ``Failed``
condition; ``Failed`` with reason ``DeadlineExceeded`` when ``activeDeadlineSeconds``
runs out (the process is killed). An image not in ``images`` leaves the pod waiting with
``ErrImagePull``. Deleting a Job kills its process and deletes its pods. Every change is
a watch event. Nothing here is a cluster: no scheduling, no network policy enforcement.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

ROUTES = {
    ("batch", "v1", "jobs"): "Job",
    ("", "v1", "pods"): "Pod",
    ("", "v1", "secrets"): "Secret",
    ("networking.k8s.io", "v1", "networkpolicies"): "NetworkPolicy",
}


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


@dataclass
class FakeCluster:
    images: set[str]
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    events: list[tuple[int, str, str, dict[str, Any]]] = field(default_factory=list)
    logs: dict[tuple[str, str], str] = field(default_factory=dict)
    processes: dict[tuple[str, str], subprocess.Popen[bytes]] = field(default_factory=dict)
    created: list[dict[str, Any]] = field(default_factory=list)
    version: int = 0
    cond: threading.Condition = field(default_factory=threading.Condition)
    url: str = ""

    # ------------------------------------------------------------------ storage
    def put(self, plural: str, obj: dict[str, Any], kind: str = "MODIFIED") -> dict[str, Any]:
        with self.cond:
            self.version += 1
            meta = obj["metadata"]
            meta["resourceVersion"] = str(self.version)
            self.objects[(plural, meta["namespace"], meta["name"])] = obj
            self.events.append((self.version, plural, kind, json.loads(json.dumps(obj))))
            self.cond.notify_all()
        return obj

    def remove(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        with self.cond:
            obj = self.objects.pop((plural, namespace, name), None)
            if obj is not None:
                self.version += 1
                obj["metadata"]["resourceVersion"] = str(self.version)
                self.events.append((self.version, plural, "DELETED", obj))
                self.cond.notify_all()
        return obj

    def listed(self, plural: str, namespace: str, selector: str) -> list[dict[str, Any]]:
        wanted = dict(p.split("=", 1) for p in selector.split(",") if p) if selector else {}
        with self.cond:
            return [o for (p, ns, _), o in self.objects.items() if p == plural and ns == namespace
                    and all((o["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())]

    def of(self, plural: str) -> list[dict[str, Any]]:
        with self.cond:
            return [o for (p, _, _), o in self.objects.items() if p == plural]

    # ------------------------------------------------------------------ the kubelet
    def start_job(self, job: dict[str, Any]) -> None:
        threading.Thread(target=self._run_job, args=(job,), daemon=True).start()

    def _run_job(self, job: dict[str, Any]) -> None:
        meta, spec = job["metadata"], job["spec"]
        namespace, name = meta["namespace"], meta["name"]
        template = spec["template"]
        container = template["spec"]["containers"][0]
        pod_name = f"{name}-{secrets.token_hex(3)}"
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": pod_name, "namespace": namespace,
                            "labels": {**(template.get("metadata", {}).get("labels") or {}), "job-name": name}},
               "spec": template["spec"], "status": {"phase": "Pending"}}
        self.put("pods", pod, "ADDED")
        if container["image"] not in self.images:
            pod["status"]["containerStatuses"] = [{"name": container["name"], "image": container["image"],
                                                   "imageID": "", "ready": False, "restartCount": 0,
                                                   "state": {"waiting": {"reason": "ErrImagePull",
                                                                         "message": "pull access denied"}}}]
            self.put("pods", pod)
            return
        env = dict(os.environ)
        env.update(self._env(namespace, container))
        proc = subprocess.Popen(container["command"] + container.get("args", []), env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
        self.processes[(namespace, name)] = proc
        pod["status"] = {"phase": "Running", "startTime": _now()}
        self.put("pods", pod)
        job["status"] = {"active": 1, "startTime": _now()}
        self.put("jobs", job)
        deadline = spec.get("activeDeadlineSeconds")
        timed_out = False
        try:
            out, _ = proc.communicate(timeout=deadline)
        except subprocess.TimeoutExpired:
            timed_out = True
            os.killpg(proc.pid, 9)
            out, _ = proc.communicate()
        self.processes.pop((namespace, name), None)
        self.logs[(namespace, pod_name)] = out.decode("utf-8", "replace")
        if (("jobs", namespace, name)) not in self.objects:  # deleted meanwhile
            return
        code = proc.returncode
        terminated = {"exitCode": 137 if timed_out else code, "reason": "Error" if code else "Completed"}
        pod["status"] = {"phase": "Succeeded" if code == 0 and not timed_out else "Failed",
                         "containerStatuses": [{"name": container["name"], "image": container["image"],
                                                "imageID": "", "ready": False, "restartCount": 0,
                                                "state": {"terminated": terminated}}]}
        self.put("pods", pod)
        if timed_out:
            condition = {"type": "Failed", "status": "True", "reason": "DeadlineExceeded"}
        elif code == 0:
            condition = {"type": "Complete", "status": "True", "reason": "Completed"}
        else:
            condition = {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
        job["status"] = {"conditions": [condition], "succeeded" if code == 0 and not timed_out else "failed": 1}
        self.put("jobs", job)

    def _env(self, namespace: str, container: dict[str, Any]) -> dict[str, str]:
        env: dict[str, str] = {}
        for entry in container.get("env") or []:
            if "value" in entry:
                env[entry["name"]] = entry["value"]
            elif "valueFrom" in entry:
                ref = entry["valueFrom"]["secretKeyRef"]
                secret = self.objects[("secrets", namespace, ref["name"])]
                env[entry["name"]] = (secret.get("stringData") or {})[ref["key"]]
        return env

    def delete_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        proc = self.processes.pop((namespace, name), None)
        job = self.remove("jobs", namespace, name)
        if proc is not None and proc.poll() is None:
            os.killpg(proc.pid, 9)
        for pod in self.listed("pods", namespace, f"job-name={name}"):
            self.remove("pods", namespace, pod["metadata"]["name"])
        return job


def _handler(cluster: FakeCluster) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            return

        def _send(self, code: int, body: Any, content_type: str = "application/json") -> None:
            data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _status(self, code: int, reason: str, message: str) -> None:
            self._send(code, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                              "message": message, "reason": reason, "code": code})

        def _route(self) -> tuple[str, str, str | None, str | None, dict[str, list[str]]]:
            parts = urlsplit(self.path)
            segs = [s for s in parts.path.split("/") if s]
            query = parse_qs(parts.query)
            if segs[:1] == ["api"]:
                group, version, rest = "", segs[1], segs[2:]
            elif segs[:1] == ["apis"]:
                group, version, rest = segs[1], segs[2], segs[3:]
            else:
                raise KeyError(self.path)
            if rest[:1] != ["namespaces"] or len(rest) < 3:
                raise KeyError(self.path)
            namespace, plural = rest[1], rest[2]
            if (group, version, plural) not in ROUTES:
                raise KeyError(self.path)
            name = rest[3] if len(rest) > 3 else None
            sub = rest[4] if len(rest) > 4 else None
            return plural, namespace, name, sub, query

        def do_POST(self) -> None:  # noqa: N802
            try:
                plural, namespace, _, _, _ = self._route()
            except KeyError:
                return self._status(404, "NotFound", f"no route {self.path}")
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            body.setdefault("metadata", {})["namespace"] = namespace
            key = (plural, namespace, body["metadata"]["name"])
            if key in cluster.objects:
                return self._status(409, "AlreadyExists", f"{plural} {key[2]} already exists")
            body["metadata"]["uid"] = secrets.token_hex(8)
            body["metadata"]["creationTimestamp"] = _now()
            cluster.created.append(json.loads(json.dumps(body)))
            cluster.put(plural, body, "ADDED")
            if plural == "jobs":
                cluster.start_job(body)
            self._send(201, body)

        def do_GET(self) -> None:  # noqa: N802
            try:
                plural, namespace, name, sub, query = self._route()
            except KeyError:
                return self._status(404, "NotFound", f"no route {self.path}")
            if name is not None:
                if sub == "log":
                    log = cluster.logs.get((namespace, name))
                    if log is None:
                        return self._status(400, "BadRequest", "container is not terminated")
                    return self._send(200, log, "text/plain")
                obj = cluster.objects.get((plural, namespace, name))
                return self._send(200, obj) if obj else self._status(404, "NotFound", f"{plural} {name} not found")
            selector = query.get("labelSelector", [""])[0]
            if query.get("watch", ["false"])[0] in ("true", "1"):
                return self._watch(plural, namespace, selector, query)
            items = cluster.listed(plural, namespace, selector)
            self._send(200, {"kind": ROUTES_KIND[plural] + "List", "apiVersion": "v1",
                             "metadata": {"resourceVersion": str(cluster.version)}, "items": items})

        def _watch(self, plural: str, namespace: str, selector: str, query: dict[str, list[str]]) -> None:
            since = int(query.get("resourceVersion", ["0"])[0] or 0)
            timeout = float(query.get("timeoutSeconds", ["30"])[0])
            wanted = dict(p.split("=", 1) for p in selector.split(",") if p) if selector else {}
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            deadline = time.monotonic() + timeout
            sent = since
            try:
                while time.monotonic() < deadline:
                    with cluster.cond:
                        fresh = [e for e in cluster.events if e[0] > sent and e[1] == plural]
                        if not fresh:
                            cluster.cond.wait(timeout=max(0.0, min(0.2, deadline - time.monotonic())))
                            continue
                    for version, _, kind, obj in fresh:
                        sent = version
                        meta = obj["metadata"]
                        if meta["namespace"] != namespace or any(
                                (meta.get("labels") or {}).get(k) != v for k, v in wanted.items()):
                            continue
                        line = json.dumps({"type": kind, "object": obj}).encode() + b"\n"
                        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
                        self.wfile.flush()
                self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):
                return

        def do_DELETE(self) -> None:  # noqa: N802
            try:
                plural, namespace, name, _, _ = self._route()
            except KeyError:
                return self._status(404, "NotFound", f"no route {self.path}")
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            assert name is not None
            obj = cluster.delete_job(namespace, name) if plural == "jobs" else cluster.remove(plural, namespace, name)
            if obj is None:
                return self._status(404, "NotFound", f"{plural} {name} not found")
            self._send(200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"})

    return Handler


ROUTES_KIND = {"jobs": "Job", "pods": "Pod", "secrets": "Secret", "networkpolicies": "NetworkPolicy"}


@contextmanager
def serve_fake_kubernetes(images: set[str]) -> Iterator[FakeCluster]:
    """A fake API server on a free port of 127.0.0.1; yields the cluster (``.url``)."""
    cluster = FakeCluster(images=set(images))
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(cluster))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    cluster.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield cluster
    finally:
        for proc in list(cluster.processes.values()):
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
        server.shutdown()
        server.server_close()
