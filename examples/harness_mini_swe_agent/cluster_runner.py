"""The harness an ``agentbolt runner`` runs for the ladder on a cluster (``cluster.yaml``).

    MINI_SWE_AGENT_CONFIG=examples/harness_mini_swe_agent/cluster.yaml \\
    agentbolt runner --server http://train-1:4747 --token "$AGENTBOLT_ADMIN_TOKEN" \\
        --agent examples/harness_mini_swe_agent/cluster_runner.py:harness --concurrency 32

``harness`` is mini-SWE-agent through its profile in the bubblewrap sandbox, built from
the config ``$MINI_SWE_AGENT_CONFIG`` names (default: ``cluster.yaml`` next to this file)
exactly as ``train.py`` builds it; the task repos it copies into each sandbox are under the
config's ``run_dir``, which this host must mount.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE), str(HERE.parent)]  # train.py and its modules; examples/_common

from train import make_harness, parse_args  # noqa: E402

CONFIG = os.environ.get("MINI_SWE_AGENT_CONFIG", str(HERE / "cluster.yaml"))

harness = make_harness(parse_args(["--config", CONFIG, "--quiet"]))
