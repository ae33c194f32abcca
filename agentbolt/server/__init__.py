"""The agentbolt server: the store API over HTTP (plus OTLP ingest and Prometheus telemetry).

``create_app(store)`` builds the FastAPI app; ``run_server(store_url)`` serves it with
uvicorn; ``agentbolt.server.testing.serve_in_thread`` runs one in a background thread.
"""

from agentbolt.server.app import create_app, run_server
from agentbolt.server.auth import mint_scoped_token, verify_token

__all__ = ["create_app", "run_server", "mint_scoped_token", "verify_token"]
