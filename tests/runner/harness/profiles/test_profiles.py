"""Harness profiles: each real harness is pointed at the rollout's gateway by its own
settings, takes a task text of any length, and ``Harness.for_`` runs it sandboxed with
its config in a fresh ``HOME``. (The real harnesses themselves: test_harness_matrix.py.)"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from agentbolt.runner.harness import Harness, HarnessConfigError, Limits, Sandbox
from agentbolt.runner.harness.profiles import (
    MAX_ARG_BYTES,
    PROFILES,
    Aider,
    ClaudeCode,
    Codex,
    HarnessNotInstalledError,
    Launch,
    MiniSweAgent,
    OpenCode,
    OpenHands,
    RunContext,
    TaskInput,
    get_profile,
    installed_executable,
)
from agentbolt.runner.harness.profiles.install import runtime_mounts
from agentbolt.types import RolloutStatus
from runner.harness.helpers import PY, Served, script

needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None,
                                 reason="bubblewrap is not installed (apt-get install bubblewrap)")

BASE = "http://127.0.0.1:8123/rollout/ro-1/attempt/at-1/v1"
TOKEN = "scoped-token-of-at-1"


def _run(task: str = "Fix add() in calc.py.") -> RunContext:
    return RunContext(openai_base_url=BASE, api_key=TOKEN, home="/run/agentbolt/home", workdir="/workspace",
                      task_text=task, model="policy", executable="/opt/h/bin/prog")


def _everything(launch: Launch) -> str:
    """All a launch hands the program, as one text."""
    return json.dumps([launch.argv, dict(launch.env), dict(launch.files), (launch.stdin or b"").decode()])


def test_the_registry_has_the_six_harnesses_each_pinned_to_the_version_it_was_tested_with() -> None:
    assert set(PROFILES) == {"claude-code", "codex", "mini-swe-agent", "opencode", "aider", "openhands"}
    for name, cls in PROFILES.items():
        profile = get_profile(name)
        assert isinstance(profile, cls) and profile.name == name
        assert profile.install.version == profile.tested_version
        assert all("==" in s or "@" in s[1:] for s in profile.install.specs)  # every package pinned
    with pytest.raises(HarnessConfigError, match="codex") as caught:
        get_profile("cursor")
    assert "no harness profile 'cursor'" in str(caught.value)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_points_its_harness_at_the_gateway_with_the_scoped_token(name: str) -> None:
    profile = get_profile(name)
    launch = profile.launch(_run())
    handed = _everything(launch)
    assert launch.argv[0] == "/opt/h/bin/prog"
    wanted = BASE.removesuffix("/v1") if profile.protocol == "anthropic-messages" else BASE
    assert wanted in handed, f"{name} is not told the gateway's URL"
    assert TOKEN in json.dumps(dict(launch.env)), f"{name} does not get the token (from its environment)"
    assert TOKEN not in json.dumps(dict(launch.files)), "the token stays out of config files"
    assert "Fix add() in calc.py." in handed
    assert all(not p.startswith("/") and ".." not in p for p in launch.files)  # relative to HOME


def test_each_harness_s_settings_are_the_ones_it_reads() -> None:
    codex = Codex().launch(_run())
    config = tomllib.loads(codex.files[".codex/config.toml"])
    assert config["model_provider"] == "agentbolt" and config["approval_policy"] == "never"
    assert config["model_providers"]["agentbolt"] == {
        "name": "agentbolt gateway", "base_url": BASE, "env_key": "OPENAI_API_KEY", "wire_api": "responses",
        "supports_websockets": False, "request_max_retries": 1, "stream_max_retries": 1}
    assert codex.env["CODEX_HOME"] == "/run/agentbolt/home/.codex" and codex.argv[-1] == "-"
    assert "--skip-git-repo-check" in codex.argv and "--dangerously-bypass-approvals-and-sandbox" in codex.argv

    claude = ClaudeCode().launch(_run())
    assert claude.env["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8123/rollout/ro-1/attempt/at-1"
    assert claude.env["ANTHROPIC_API_KEY"] == TOKEN and claude.argv[1] == "-p"

    opencode = OpenCode().launch(_run())
    config = json.loads(opencode.files[".config/opencode/opencode.json"])
    provider = config["provider"]["agentbolt"]
    assert provider["options"] == {"baseURL": BASE, "apiKey": "{env:OPENAI_API_KEY}"}
    assert config["model"] == config["small_model"] == "agentbolt/policy"
    assert "--title" in opencode.argv  # no title-generation call

    mini = MiniSweAgent(step_limit=7).launch(_run())
    config = json.loads(mini.files["agentbolt.yaml"])
    assert config["model"]["model_kwargs"]["api_base"] == BASE and config["agent"]["step_limit"] == 7
    assert mini.env["MSWEA_CONFIGURED"] == "true" and mini.argv[mini.argv.index("-t") + 1] == "Fix add() in calc.py."

    aider = Aider(files=("calc.py",)).launch(_run())
    assert "--no-git" in aider.argv and aider.argv[-1] == "calc.py"
    assert aider.argv[aider.argv.index("--openai-api-base") + 1] == BASE

    openhands = OpenHands().launch(_run())
    assert openhands.files["task.md"] == "Fix add() in calc.py."
    assert openhands.argv[1].endswith("openhands_main.py") and Path(openhands.argv[1]).is_file()


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_a_task_too_long_for_a_command_line_goes_by_file_or_stdin(name: str) -> None:
    profile = get_profile(name)
    long_task = "Fix it. " * (MAX_ARG_BYTES // 8 + 10)
    launch = profile.launch(_run(long_task))
    assert all(len(os.fsencode(a)) <= MAX_ARG_BYTES for a in launch.argv)
    assert long_task in launch.files.values() or launch.stdin == long_task.encode() or any(
        long_task in text for text in launch.files.values())
    short = profile.launch(_run("Fix it."))
    if profile.task_input == TaskInput.ARGV:
        assert "Fix it." in short.argv


def test_an_uninstalled_harness_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(HarnessNotInstalledError) as caught:
        installed_executable(get_profile("codex"), tmp_path)
    message = str(caught.value)
    assert "codex 0.171.0 is not installed" in message and "scripts/install_harnesses codex" in message
    with pytest.raises(HarnessNotInstalledError):
        Harness.for_("codex", task="x", cache=tmp_path)


def test_a_pypi_harness_s_mounts_are_its_venv_and_the_python_it_was_made_with(tmp_path: Path) -> None:
    venv = tmp_path / "h-1.0"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    mounts = runtime_mounts(MiniSweAgent.install, venv / "bin" / "mini")
    base = Path(os.path.realpath(sys.base_prefix))  # the venv's "home" interpreter lives here
    assert venv in mounts
    assert base in mounts or str(base).startswith("/usr/")  # a system Python is mounted anyway


# ---------------------------------------------------------------------- Harness.for_
STAND_IN = """#!{python}
# stands in for mini-swe-agent: reads its config from HOME, calls the model there, edits the workspace
import json, os, sys, urllib.request
home = os.environ["HOME"]
config = json.load(open(sys.argv[sys.argv.index("-c", sys.argv.index("-c") + 1) + 1]))
base = config["model"]["model_kwargs"]["api_base"]
body = json.dumps({{"model": "m", "messages": [{{"role": "user", "content": "hello"}}]}}).encode()
req = urllib.request.Request(base + "/chat/completions", data=body, method="POST",
    headers={{"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"}})
answer = json.load(urllib.request.urlopen(req, timeout=10))["choices"][0]["message"]["content"]
task = sys.argv[sys.argv.index("-t") + 1]
json.dump({{"home": home, "files": sorted(os.listdir(home)), "answer": answer, "task_len": len(task),
           "cwd": os.getcwd()}}, open("seen.json", "w"))
"""


@needs_bwrap
async def test_harness_for_runs_the_profile_sandboxed_with_its_config_in_a_fresh_home(
    served: Served, tmp_path: Path
) -> None:
    program = tmp_path / "h" / "bin" / "mini"
    program.parent.mkdir(parents=True)
    program.write_text(STAND_IN.format(python=os.path.realpath(PY)))
    program.chmod(0o755)
    seen = tmp_path / "seen.json"
    grader = script(tmp_path, "grade.py", f"""
        import os, pathlib, shutil
        shutil.copy(pathlib.Path(os.environ["AGENTBOLT_WORKSPACE"], "seen.json"), {str(seen)!r})
        print(1.0)
    """)
    task = "Fix add() in calc.py. " * 500  # 11,000 characters on the command line
    harness = Harness.for_(MiniSweAgent(), task="{issue}", executable=program, evaluator=[PY, grader],
                           server_url=served.url, sandbox=Sandbox())
    assert harness.name == "harness:mini-swe-agent" and program.parent.parent in harness.sandbox.read_only
    [rollout] = await served.run(harness, [{"issue": task}])
    assert rollout.status == RolloutStatus.SUCCEEDED and rollout.reward == 1.0
    view = json.loads(seen.read_text())
    assert view["home"] == "/run/agentbolt/home" and view["files"] == ["agentbolt.yaml"]
    assert view["answer"] == "echo: hello" and view["task_len"] == len(task) and view["cwd"] == "/workspace"


def test_harness_for_gives_the_sandbox_the_memory_the_harness_needs(tmp_path: Path) -> None:
    program = tmp_path / "opencode"
    program.write_text("")
    harness = Harness.for_("opencode", task="{t}", executable=program)  # bun reserves a large heap up front
    assert harness.sandbox is not None and harness.sandbox.limits.memory_mb == OpenCode.memory_mb == 6144
    roomy = Harness.for_("opencode", task="{t}", executable=program,
                         sandbox=Sandbox(limits=Limits(memory_mb=16384)))
    assert roomy.sandbox is not None and roomy.sandbox.limits.memory_mb == 16384  # never lowered
    assert Harness.for_("opencode", task="{t}", executable=program, sandbox=False).sandbox is None
