#!/usr/bin/env bash
# Creates the separate venv for the reference peer (Agent Lightning 0.3.0, with LiteLLM's
# proxy; no torch). benchmarks/store_throughput.py --peer and gateway_overhead.py --peer use
# it. Agent Lightning 1.0 needs Python >= 3.12 (the machines here have 3.11), so the peer is 0.3.0.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python3 -m venv .bench-venv-peer
.bench-venv-peer/bin/pip install -q agentlightning==0.3.0
echo "peer venv ready: .bench-venv-peer"
