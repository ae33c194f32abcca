"""v0.3's ``agentlightning.utils``: :mod:`.otel` (attribute helpers: tags, links,
flattening), :mod:`.metrics` (counters and histograms), :mod:`.id`. v0.3's internals
(``otlp``, ``server_launcher``, ``system_snapshot``) are listed in
:data:`agentbolt.compat.surface.MODULES` with what replaces them."""
