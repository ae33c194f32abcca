"""The code in the documentation runs, and prints what the documentation says.

A Python block in a page is an example when the line before its fence is an HTML
comment ``<!-- example: NAME -->`` (invisible on the rendered page). Each example is
written to a file in a fresh directory and run there as a script with this
interpreter — the way a reader would run it — and its output is checked against
:data:`EXPECTED`. Every Python block of the pages below must be an example, so a new
block cannot slip in untested.

One substitution is made: examples that call a model name the OpenAI-compatible server
``http://127.0.0.1:8000/v1``; the test points them at the fake server of
``tests/fakes/openai_server.py`` instead.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from fakes.openai_server import serve_fake_openai

ROOT = Path(__file__).resolve().parents[2]
PAGES = ["README.md", "docs/agents.md", "docs/runner.md", "docs/trainer.md"]
MODEL_URL = "http://127.0.0.1:8000/v1"

_BLOCK = re.compile(
    r"(?:<!-- example: (?P<name>[\w-]+) -->\n)?```(?P<lang>\w*)[^\n]*\n(?P<code>.*?)^```",
    re.DOTALL | re.MULTILINE,
)


@dataclass(frozen=True)
class Example:
    page: str
    name: str
    code: str


def blocks(page: str) -> Iterator[tuple[str | None, str, str]]:
    """(example name or None, language, code) of every fenced block of ``page``."""
    text = (ROOT / page).read_text()
    for m in _BLOCK.finditer(text):
        yield m.group("name"), m.group("lang"), m.group("code")


def examples() -> list[Example]:
    return [
        Example(page, name, code)
        for page in PAGES
        for name, _, code in blocks(page)
        if name
    ]


# What each example must print: every pattern is searched (re.search) in its stdout.
EXPECTED: dict[str, list[str]] = {
    "readme-quick-tour": [r"^ro-\S+ succeeded 1\.0$"],
    "readme-evaluate": [
        r"val: 3 rollouts, 3 scored — mean reward 0\.6667, success rate 66\.7%",
        r"^mean reward 0\.67, success rate 0\.67$",
    ],
    "agents-decorator": [
        r"val: 2 rollouts, 2 scored — mean reward 0\.5000, success rate 50\.0%"
    ],
    "agents-llm": [r"val: 2 rollouts, 2 scored — mean reward 1\.0000"],
    "agents-class": [r"^validation reward: 1\.0$"],
    "agents-run-fn": [r"^0\.5$"],
    "agents-emitters": [
        (
            r"^agentbolt\.message\nagentbolt\.object\nagentbolt\.reward\nagentbolt\.annotation\n"
            r"agentbolt\.operation\nagentbolt\.operation\nagentbolt\.reward\nagentbolt\.rollout\nreward: 1\.0$"
        )
    ],
    "agents-agent-name": [r"^\['planner', 'solver'\]$"],
    "runner-direct": [r"^3 3 0$", r"^\[0\.0, 1\.0, 1\.0\]$"],
    "runner-timeout": [
        r"^slow_async timeout failed 1 True$",
        r"^slow_sync timeout failed 1 True$",
    ],
    "runner-retry": [r"^1 1 succeeded 2 1\.0$"],
    "runner-hooks": [
        r"^\['on_rollout_start', 'on_trace_start', 'on_trace_end', 'on_rollout_end reward=0\.5 spans=3'\]$"
    ],
    "trainer-fit": [
        r"val: 4 rollouts, 4 scored — mean reward 0\.7500",
        r"^0\.75 0\.75$",
    ],
    "trainer-dev": [
        r"rollout 0\s+succeeded\s+reward 1",
        r"agentbolt\.message",
        r"^dev: 2 rollouts, rewards \[1\.0, 0\.0\]$",
    ],
    "trainer-multiprocess": [r"val: 40 rollouts, 40 scored — mean reward 0\.5000"],
    "trainer-algorithm": [r"^\{'before': 0\.5, 'after': 1\.0\}$"],
}


def test_every_python_block_is_a_checked_example() -> None:
    untested = [
        f"{page}: {code.splitlines()[0] if code else '(empty)'}"
        for page in PAGES
        for name, lang, code in blocks(page)
        if lang == "python" and name is None
    ]
    assert not untested, (
        f"Python blocks without an <!-- example: NAME --> marker: {untested}"
    )
    names = [e.name for e in examples()]
    assert len(names) == len(set(names)), f"example names must be unique: {names}"
    assert set(names) == set(EXPECTED), (
        f"examples without expectations: {set(names) - set(EXPECTED)}; "
        f"expectations without an example: {set(EXPECTED) - set(names)}"
    )


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    with serve_fake_openai() as base_url:
        yield str(base_url)


@pytest.mark.parametrize("example", examples(), ids=lambda e: e.name)
def test_example_runs_and_prints_what_the_docs_say(
    example: Example, tmp_path: Path, model_url: str
) -> None:
    code = example.code.replace(MODEL_URL, model_url)
    script = tmp_path / f"{example.name.replace('-', '_')}.py"
    script.write_text(code)
    env = {
        **os.environ,
        "COLUMNS": "200",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, script.name],
        check=False,
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, (
        f"{example.page} example {example.name} failed:\n{done.stdout}\n{done.stderr}"
    )
    for pattern in EXPECTED[example.name]:
        assert re.search(pattern, done.stdout, re.MULTILINE), (
            f"{example.page} example {example.name}: no match for {pattern!r} in its output:\n{done.stdout}"
        )


def test_documented_agentbolt_runner_options_exist() -> None:
    """Every ``--option`` the pages give ``agentbolt runner`` is one the command takes."""
    from typer.testing import CliRunner

    from agentbolt.cli import app

    help_text = (
        CliRunner().invoke(app, ["runner", "--help"], env={"COLUMNS": "200"}).output
    )
    text = (ROOT / "docs/trainer.md").read_text()
    commands = [
        line
        for _, lang, code in blocks("docs/trainer.md")
        for line in code.splitlines()
        if "agentbolt runner --" in line
    ]
    prose = text[text.index("`agentbolt runner` options:") :].split("\n\n")[0]
    documented = set(re.findall(r"(--[a-z][a-z-]+)", "\n".join(commands) + prose))
    assert (
        len(commands) >= 2
        and {"--server", "--token", "--agent", "--concurrency"} <= documented
    )
    missing = sorted(opt for opt in documented if opt not in help_text)
    assert not missing, (
        f"docs/trainer.md documents options agentbolt runner does not have: {missing}"
    )


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


@pytest.mark.parametrize("page", PAGES + ["docs/index.md"])
def test_links_between_pages_point_at_existing_pages_and_headings(page: str) -> None:
    source = ROOT / page
    broken = []
    for target, anchor in re.findall(
        r"\]\(([\w./-]+\.md)(?:#([\w-]+))?\)", source.read_text()
    ):
        path = (source.parent / target).resolve()
        if not path.exists():
            broken.append(f"{target} (no such page)")
        elif anchor:
            headings = re.findall(r"^#+ (.+)$", path.read_text(), re.MULTILINE)
            if anchor not in {_slug(h) for h in headings}:
                broken.append(f"{target}#{anchor} (no such heading)")
    assert not broken, f"{page} links to {broken}"
