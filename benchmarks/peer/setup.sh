#!/usr/bin/env bash
# Creates the separate venvs of the reference peers (no torch; neither touches the project's venv):
#   .bench-venv-peer   Agent Lightning 0.3.0 (its LightningStore; LLMProxy with LiteLLM's proxy),
#                      for benchmarks/store_throughput.py --peer and gateway_overhead.py --peer;
#   .bench-venv-peer1  Agent Lightning 1.0.2 (its agl-server gateway), for gateway_overhead.py --peer1.
#                      1.0 requires Python >= 3.12: the first that runs of python3.12 / python3.13 on
#                      PATH, else pyenv's 3.12+ versions, oldest first (e.g. ~/.pyenv/versions/3.12.1).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
python3 -m venv .bench-venv-peer
.bench-venv-peer/bin/pip install -q agentlightning==0.3.0
echo "peer venv ready: .bench-venv-peer (agentlightning 0.3.0)"

# the first that runs and is >= 3.12 (a pyenv shim on PATH may exist and refuse to run)
is_312() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; }
py312=""
pyenv_root=${PYENV_ROOT:-$HOME/.pyenv}
for cand in $(command -v python3.12 python3.13 || true) \
            $(ls -d "$pyenv_root"/versions/3.1[2-9]*/bin/python 2>/dev/null | sort -V); do
  if is_312 "$cand"; then py312=$cand; break; fi
done
if [ -z "$py312" ]; then
  echo "no Python >= 3.12 found (python3.13/python3.12 on PATH, or \$PYENV_ROOT/versions/3.12+):" >&2
  echo "install one (e.g. pyenv install 3.12) and rerun this script for .bench-venv-peer1 (--peer1)" >&2
  exit 1
fi
"$py312" -m venv .bench-venv-peer1
.bench-venv-peer1/bin/pip install -q agentlightning==1.0.2
echo "peer1 venv ready: .bench-venv-peer1 (agentlightning 1.0.2, $("$py312" --version))"
