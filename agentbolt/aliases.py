"""Every other spelling agentbolt accepts, and what it stands for — in one place.

Guides and older programs use other names for a few of agentbolt's arguments and values;
each keeps working and means exactly one agentbolt name. The code that accepts them reads
these tables, so a spelling is added (or retired) here, and a reader finds them all here:

* ``strategy="in-process"`` / ``"in_process"`` → ``"inprocess"``, and ``"multi-process"`` /
  ``"multi_process"`` → ``"multiprocess"`` (``Trainer``, :func:`agentbolt.execution.strategy_from`);
* ``Runner(run_fn=...)`` → ``Runner(agent=...)``;
* ``RolloutConfig(retry_condition=...)`` → ``RolloutConfig(retry_on=...)``;
* ``emit_reward(..., primary_key=...)`` → ``emit_reward(..., primary=...)``.

Agent Lightning v0.3's spellings of the same things (``strategy="shm"``,
``Trainer(n_workers=...)``, a ``LitAgent`` defining ``rollout_async``...) are the ``V03_``
tables. The rest of v0.3's public API — its 116 names, classes and module layout — is a
layer of its own, :mod:`agentbolt.compat`, whose table of names is
:data:`agentbolt.compat.names.PROVIDED`.

Span attribute names v0.3 wrote and agentbolt still reads (its reward attribute) are
with every other attribute name in :mod:`agentbolt.semconv`.

A bottom floor next to :mod:`agentbolt.types`: it imports nothing of agentbolt, so every
floor may read it.
"""

from __future__ import annotations

__all__ = [
    "KEYWORDS",
    "LITAGENT_TRAINING_METHODS",
    "LITAGENT_VALIDATION_METHODS",
    "STRATEGIES",
    "V03_STRATEGIES",
    "V03_STRATEGY_CLASSES",
    "V03_TRAINER_ARGUMENTS",
    "other_keywords",
]

STRATEGIES: dict[str, str] = {
    "in-process": "inprocess",
    "in_process": "inprocess",
    "multi-process": "multiprocess",
    "multi_process": "multiprocess",
}
"""Spellings of an execution strategy's name (case does not matter) → agentbolt's name."""

KEYWORDS: dict[str, dict[str, str]] = {
    "Runner": {"run_fn": "agent"},  # the name some guides use
    "RolloutConfig": {"retry_condition": "retry_on"},  # Agent Lightning's name
    "emit_reward": {"primary_key": "primary"},  # Agent Lightning's name
}
"""A class → its other keyword arguments → the keyword each stands for (give one of the two)."""

# ---------------------------------------------------------------- Agent Lightning v0.3's spellings
V03_STRATEGIES: dict[str, str] = {"shm": "inprocess", "cs": "multiprocess"}
"""v0.3's ``Trainer(strategy=...)`` names → agentbolt's (they make a ``Trainer`` call a v0.3
one: :mod:`agentbolt.compat.trainer_args`)."""

V03_STRATEGY_CLASSES: dict[str, str] = {
    "SharedMemoryExecutionStrategy": "inprocess",
    "ClientServerExecutionStrategy": "multiprocess",
}
"""v0.3's strategy classes, as named by ``strategy={"type": ...}`` → agentbolt's strategy name."""

V03_TRAINER_ARGUMENTS: dict[str, str] = {
    "initial_resources": "resources",
    "n_workers": "n_runners",
    "triplet_exporter": "adapter",  # v0.3 had already deprecated it for `adapter`
}
"""v0.3's ``Trainer`` arguments that are agentbolt's under another name (the others v0.3
takes are in :data:`agentbolt.compat.trainer_args.V03_ARGUMENTS`)."""

LITAGENT_TRAINING_METHODS: tuple[str, ...] = ("training_rollout_async", "training_rollout", "rollout_async", "rollout")
"""What a ``LitAgent`` subclass may define to run training rollouts, the first defined wins:
agentbolt's ``training_rollout`` and v0.3's spellings (``rollout``, ``rollout_async``: one
entry point for every mode)."""

LITAGENT_VALIDATION_METHODS: tuple[str, ...] = ("validation_rollout_async", "validation_rollout")
"""The same for validation and test rollouts (tried before the training ones)."""


def other_keywords(owner: str, keyword: str) -> tuple[str, ...]:
    """The other spellings of ``owner``'s ``keyword``: ``other_keywords("RolloutConfig",
    "retry_on") == ("retry_condition",)``."""
    return tuple(old for old, new in KEYWORDS.get(owner, {}).items() if new == keyword)
