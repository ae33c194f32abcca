"""What the two SQL backends (:mod:`agentbolt.store.sqlite`, :mod:`agentbolt.store.postgres`)
share: the store class that maps the :class:`~agentbolt.store.base.Store` interface onto
read and write operations (``store``), the read queries as I/O-free plans (``reads``),
rows ↔ models (``rows``), the model changes of a write (``changes``), the span plan of
``add_spans`` (``span_plan``), keyset pagination (``pagination``), ``LIKE`` patterns
(``like``) and the settling of group-committed ops (``op_results``). Each backend adds
its SQL dialect, its writes and its connection machinery.
"""
