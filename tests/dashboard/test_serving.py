"""The server serves the dashboard at ``/``: its pages and assets need no token (they
hold no data), its API calls do; the built files ship inside the package; a server
started with ``cors_origins`` lets a dashboard on another origin call it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from agentbolt.server.app import create_app
from agentbolt.server.dashboard.static import DASHBOARD_DIST, DashboardMiddleware
from agentbolt.server.testing import serve_app_in_thread, serve_in_thread
from agentbolt.store.memory import MemoryStore

TOKEN = "dash-serving-token"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with serve_in_thread(MemoryStore(), admin_token=TOKEN, cors_origins=["http://dash.example:8080"]) as url:
        yield url


def test_the_built_dashboard_ships_inside_the_package() -> None:
    index = DASHBOARD_DIST / "index.html"
    assert index.is_file(), "run: cd dashboard && npm ci && npm run build"
    for asset in re.findall(r'(?:src|href)="/assets/([^"]+)"', index.read_text()):
        assert (DASHBOARD_DIST / "assets" / asset).is_file(), asset


def test_root_and_client_routes_answer_with_the_app_without_a_token(server: str) -> None:
    for path in ("/", "/rollouts", "/rollouts/ro-1/with/slash", "/training", "/resources?version=2", "/workers"):
        r = httpx.get(server + path)
        assert r.status_code == 200, path
        assert r.headers["content-type"].startswith("text/html")
        assert '<div id="root">' in r.text
        assert r.headers["cache-control"] == "no-cache"


def test_assets_are_served_with_a_long_cache_and_unknown_ones_are_404(server: str) -> None:
    index = httpx.get(server + "/").text
    script = re.search(r'src="(/assets/[^"]+\.js)"', index).group(1)  # type: ignore[union-attr]
    r = httpx.get(server + script)
    assert r.status_code == 200
    assert "javascript" in r.headers["content-type"]
    assert "immutable" in r.headers["cache-control"]
    assert httpx.get(server + "/assets/nope.js").status_code == 404
    assert httpx.get(server + "/assets/%2e%2e/index.html").status_code == 404  # no escape from assets/


def test_the_api_still_needs_the_token(server: str) -> None:
    assert httpx.get(server + "/v1/dashboard/summary").status_code == 401
    assert httpx.get(server + "/rolloutsx").status_code == 401  # not a dashboard page: the API answers
    ok = httpx.get(server + "/v1/dashboard/summary", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert httpx.post(server + "/", json={}).status_code in (401, 404, 405)  # only GET/HEAD serve the page


def test_a_missing_build_says_how_to_build_it(tmp_path: Path) -> None:
    app = DashboardMiddleware(create_app(MemoryStore()), dist=tmp_path / "dashboard_dist")
    with serve_app_in_thread(app) as url:
        r = httpx.get(url + "/")
        assert r.status_code == 404
        assert "npm ci &amp;&amp; npm run build" in r.text
        assert httpx.get(url + "/healthz").status_code == 200


def test_cors_allows_the_configured_origin_only(server: str) -> None:
    preflight = {
        "Origin": "http://dash.example:8080",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "authorization",
    }
    r = httpx.options(server + "/v1/dashboard/rollouts", headers=preflight)
    assert r.status_code == 200  # answered before authentication: a preflight carries no token
    assert r.headers["access-control-allow-origin"] == "http://dash.example:8080"
    assert "authorization" in r.headers["access-control-allow-headers"].lower()
    denied = httpx.get(server + "/v1/dashboard/summary", headers={"Origin": "http://evil.example"})
    assert "access-control-allow-origin" not in denied.headers
    allowed = httpx.get(
        server + "/v1/dashboard/summary",
        headers={"Origin": "http://dash.example:8080", "Authorization": f"Bearer {TOKEN}"},
    )
    assert allowed.headers["access-control-allow-origin"] == "http://dash.example:8080"


def test_without_cors_origins_no_cross_origin_header() -> None:
    with serve_in_thread(MemoryStore()) as url:
        r = httpx.get(url + "/healthz", headers={"Origin": "http://dash.example:8080"})
        assert "access-control-allow-origin" not in r.headers
