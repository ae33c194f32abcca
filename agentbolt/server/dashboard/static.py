"""Serves the web dashboard (its built files ship in ``agentbolt/server/dashboard/dist``).

``/`` and the dashboard's own pages (``/rollouts/<id>``, ``/training``...) answer with
``index.html`` — the browser app routes on its side — and ``/assets/...`` with the
bundled scripts and styles. These files hold no data: they are served without a token,
ahead of authentication, so a browser can open the page and then ask for the admin
token; every API call the page makes (``/v1/dashboard/...``) is authenticated as usual.
Anything else goes on to the API untouched.

The files are built from ``dashboard/`` with ``cd dashboard && npm ci && npm run build``.
When they are missing (a source checkout that never built them) ``/`` says so.
"""

from __future__ import annotations

import html
from pathlib import Path

from starlette.responses import FileResponse, HTMLResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

__all__ = ["CLIENT_ROUTES", "DASHBOARD_DIST", "DashboardMiddleware"]

DASHBOARD_DIST = Path(__file__).with_name("dist")
"""Where ``npm run build`` writes the dashboard."""

CLIENT_ROUTES = ("/rollouts", "/training", "/resources", "/workers")
"""Pages of the dashboard (and the paths below them): each answers with ``index.html``."""

_ASSETS = "/assets/"
_IMMUTABLE = "public, max-age=31536000, immutable"  # file names carry a content hash
_NO_CACHE = "no-cache"  # index.html names the current hashes: always revalidate

_MISSING = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>agentbolt dashboard not built</title></head>
<body style="font-family: sans-serif; max-width: 40rem; margin: 4rem auto; line-height: 1.5">
<h1>The agentbolt dashboard is not built</h1>
<p>This agentbolt install has no dashboard files (looked in <code>{dist}</code>).
The API works as usual under <code>/v1</code>; see <a href="/docs">/docs</a>.</p>
<p>To build the dashboard from a source checkout (needs Node.js 20.19+):</p>
<pre>cd dashboard &amp;&amp; npm ci &amp;&amp; npm run build</pre>
<p>or install a released agentbolt package, which ships it.</p>
</body></html>
"""


def is_dashboard_page(path: str) -> bool:
    """Whether ``path`` is one of the dashboard's pages (answered with ``index.html``)."""
    if path in ("/", "/index.html"):
        return True
    return any(path == route or path.startswith(route + "/") for route in CLIENT_ROUTES)


class DashboardMiddleware:
    """Answers GET/HEAD for the dashboard's pages and assets; passes everything else on.

    Sits outside :class:`~agentbolt.server.auth.AuthMiddleware` (see the module docstring).
    """

    def __init__(self, app: ASGIApp, dist: Path = DASHBOARD_DIST) -> None:
        self.app = app
        self.dist = dist
        self.assets = (dist / "assets").resolve()

    def _response(self, path: str) -> Response | None:
        if path.startswith(_ASSETS):
            target = (self.assets / path[len(_ASSETS) :]).resolve()
            if not target.is_relative_to(self.assets) or not target.is_file():
                return Response("no such dashboard asset (rebuilt since this page was loaded? reload it)", 404)
            return FileResponse(target, headers={"cache-control": _IMMUTABLE})
        if is_dashboard_page(path):
            index = self.dist / "index.html"
            if not index.is_file():
                return HTMLResponse(_MISSING.format(dist=html.escape(str(self.dist))), 404)
            return FileResponse(index, media_type="text/html", headers={"cache-control": _NO_CACHE})
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            response = self._response(scope["path"])
            if response is not None:
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
