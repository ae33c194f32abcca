"""Everything in this process: SmolLM2 served by the transformers engine behind the gateway."""

from __future__ import annotations

import argparse
from pathlib import Path

import agentbolt
from agentbolt.algorithms import GRPO


def in_process_trainer(algorithm: GRPO, args: argparse.Namespace, run_dir: Path) -> agentbolt.Trainer:
    """A trainer for ``algorithm`` with all its parts in this process: SmolLM2-135M-Instruct
    served by agentbolt's transformers engine (``--threads``, ``--batch``, ``--max-tokens``)
    behind the gateway, so updates are hot-swapped into the engine; an embedded SQLite
    store (``run_dir/store.db``); one runner running a whole step's rollouts at once, each
    attempt given its own gateway URL as the ``llm`` resource."""
    import torch

    from agentbolt.engines.transformers_engine import TransformersEngine
    from agentbolt.gateway import Gateway
    from agentbolt.models import smollm2

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    engine = TransformersEngine.from_pretrained(smollm2(), num_threads=args.threads, max_batch_size=args.batch,
                                                default_max_tokens=args.max_tokens)
    llm = agentbolt.gateway_llm(max_tokens=args.max_tokens)  # each attempt gets its own gateway URL
    return agentbolt.Trainer(
        algorithm=algorithm, n_runners=1,
        runner=agentbolt.Runner(concurrency=args.tasks_per_step * args.group_size),
        store=f"sqlite:///{run_dir / 'store.db'}", gateway=Gateway(engine), resources={"llm": llm},
    )
