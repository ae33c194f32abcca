"""``tests/test.sh`` as the verifier, inside the task's environment after the program.

The Docker executor runs the harness's evaluator in a container made from the program's
(``docker commit``), with the task's ``tests/`` copied to ``/tests`` only then. There,
:data:`VERIFY` (run by the container's ``python3``, the settings as its one argument):

1. removes whatever the program left under ``/logs/verifier`` (a reward it wrote itself
   does not count), then makes the directory afresh;
2. runs ``/tests/test.sh`` from the task's working directory with ``[environment].env``
   and ``[verifier].env`` set, its output into ``/logs/verifier/test-stdout.txt``, killed
   after ``[verifier].timeout_sec``;
3. prints one JSON line: test.sh's exit code, the texts of ``reward.json`` and
   ``reward.txt`` (regular files only, no link followed, 64 KiB at most) and the tail of
   its output.

Here, :func:`reward_of` reads that line as Harbor reads the files
(:func:`~agentbolt.tasks.harbor.rewards.verifier_reward`): named rewards stay named.
"""

from __future__ import annotations

import orjson

from agentbolt.tasks.harbor.errors import HarborRewardError
from agentbolt.tasks.harbor.rewards import VerifierReward, verifier_reward

__all__ = ["VERIFY", "reward_of"]

VERIFY = r"""
import json, os, shutil, stat, subprocess, sys
cfg = json.loads(sys.argv[1])
logs = "/logs/verifier"
if os.path.islink(logs) or os.path.isfile(logs):
    os.unlink(logs)
shutil.rmtree(logs, ignore_errors=True)
os.makedirs(logs, exist_ok=True)
env = dict(os.environ)
env.update(cfg.get("env") or {})
workdir = cfg.get("workdir") or "/"
if not os.path.isdir(workdir):
    workdir = "/"
script = "/tests/test.sh"
os.chmod(script, 0o755)
code = None
timed_out = False
with open(logs + "/test-stdout.txt", "wb") as out:
    for argv in ([script], ["sh", script]):
        try:
            code = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
                                  cwd=workdir, timeout=cfg.get("timeout")).returncode
            break
        except subprocess.TimeoutExpired:
            timed_out = True
            break
        except OSError:  # no usable shebang: as a shell script
            continue
def read(name, limit=65536):
    try:
        fd = os.open(logs + "/" + name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        return f.read(limit).decode("utf-8", "replace")
log = read("test-stdout.txt", 1 << 20) or ""
print(json.dumps({"harbor_verifier": {"exit_code": code, "timed_out": timed_out, "reward.json": read("reward.json"),
                                      "reward.txt": read("reward.txt"), "log_tail": log[-1500:]}}))
"""


def reward_of(line: str, *, primary: str | None = None) -> VerifierReward:
    """The reward in :data:`VERIFY`'s last line; :class:`HarborRewardError` saying why there is none."""
    try:
        run = orjson.loads(line)["harbor_verifier"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        raise HarborRewardError(f"the verifier's wrapper printed {line[-300:]!r}, not its report") from None
    if run.get("timed_out"):
        raise HarborRewardError("tests/test.sh ran past [verifier].timeout_sec and was killed"
                                + _tail(run.get("log_tail")))
    try:
        return verifier_reward(run.get("reward.json"), run.get("reward.txt"), primary=primary)
    except HarborRewardError as exc:
        raise HarborRewardError(f"{exc} (test.sh exited with {run.get('exit_code')})"
                                + _tail(run.get("log_tail"))) from None


def _tail(text: object) -> str:
    return f"; its output ended: {str(text)[-600:]!r}" if text else ""
