"""``SuccessStreak``: GRPO's early stop on the training success rate.

With ``stop_success_rate`` set, a run stops once the share of each step's sampled
rollouts that succeeded has been at least that rate for ``stop_success_steps`` steps in
a row. It looks at the rollouts the run trains on — sampled at the training temperature —
and never at the validation set, so a held-out evaluation stays held out. Once nearly
every group's rollouts all succeed, their rewards tie and those groups train nothing:
the steps left would cost time and teach little.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SuccessStreak"]


@dataclass
class SuccessStreak:
    """Counts the steps in a row whose training success rate reached ``rate``
    (``None``: never stops)."""

    rate: float | None
    steps: int
    streak: int = 0

    def observe(self, success_rate: float | None) -> bool:
        """Count one step's training success rate (None: no rollout scored, which breaks
        the streak); True once the streak is ``steps`` long."""
        if self.rate is None:
            return False
        self.streak = self.streak + 1 if success_rate is not None and success_rate >= self.rate else 0
        return self.streak >= self.steps

    def reason(self) -> str:
        """What the console and the log say when it fires."""
        return (f"training success rate at or above {self.rate:.0%} for {self.steps} steps in a row "
                "(stop_success_rate)")
