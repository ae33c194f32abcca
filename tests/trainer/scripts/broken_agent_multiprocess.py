"""A training script whose agent fails every rollout, run with runner processes.

    python broken_agent_multiprocess.py RUN_DIR

Prints ``STOPPED <message>`` when ``fit`` stops with NoSuccessfulRolloutsError.
"""

from __future__ import annotations

import sys

from agentbolt.algorithms import Evaluate
from agentbolt.algorithms.failures import NoSuccessfulRolloutsError
from agentbolt.runner import rollout
from agentbolt.trainer import Trainer


@rollout
def broken(task: dict) -> float:
    raise ImportError("No module named 'openai'")


if __name__ == "__main__":
    trainer = Trainer(algorithm=Evaluate(show=False, progress=False), strategy="multiprocess", n_runners=2,
                      run_dir=sys.argv[1])
    try:
        trainer.fit(broken, [{"i": i} for i in range(16)])
    except NoSuccessfulRolloutsError as exc:
        print("STOPPED " + str(exc).replace("\n", " | "), flush=True)
