"""The evaluator: the task repo's own tests, run on the workspace the agent left.

Prints 1.0 when they pass, else 0.0. Runs outside the sandbox, after the agent exited.
"""

import os
import subprocess
import sys

workspace = os.environ["AGENTBOLT_WORKSPACE"]
done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", workspace], cwd=workspace,
                      capture_output=True, text=True, timeout=60, check=False)
print(1.0 if done.returncode == 0 else 0.0)
