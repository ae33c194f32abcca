"""The API's routes, one module per resource. :data:`ROUTERS` lists them in mount order."""

from agentbolt.server.routes import (
    attempts,
    batch,
    dashboard,
    health,
    metrics,
    observability,
    resources,
    retention,
    rollouts,
    spans,
    stats,
    workers,
)

ROUTERS = (
    health.router,
    # attempts and spans before rollouts: ``GET /v1/rollouts/{rollout_id:path}`` takes
    # ids with slashes, so it must come after the longer rollout paths.
    attempts.router,
    spans.router,
    rollouts.router,
    resources.router,
    workers.router,
    stats.router,
    metrics.router,
    retention.router,
    batch.router,
    observability.router,
    dashboard.router,
)

__all__ = ["ROUTERS"]
