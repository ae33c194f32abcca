"""Every optional thing a test looks for has an install line, and skips carry it."""

from __future__ import annotations

import re
from pathlib import Path

from optional_requirements import REQUIREMENTS, for_module, for_program, requirement_for

TESTS = Path(__file__).parent
IMPORTORSKIP = re.compile(r"importorskip\(\s*[\"']([\w.]+)[\"']")
WHICH = re.compile(r"shutil\.which\(\s*[\"']([\w.-]+)[\"']")


def _sources() -> list[tuple[Path, str]]:
    return [(p, p.read_text()) for p in sorted(TESTS.rglob("*.py"))]


def test_every_module_a_test_may_skip_on_has_an_install_line() -> None:
    missing = {(m, str(p.relative_to(TESTS))) for p, text in _sources() for m in IMPORTORSKIP.findall(text)
               if not m.startswith("agentbolt") and for_module(m) is None}
    assert not missing, f"add these to tests/optional_requirements.py: {sorted(missing)}"


def test_every_program_a_test_looks_up_has_an_install_line() -> None:
    missing = {(m, str(p.relative_to(TESTS))) for p, text in _sources() for m in WHICH.findall(text)
               if for_program(m) is None and m not in {"python3", "bash", "sh", "git", "true"}}
    assert not missing, f"add these to tests/optional_requirements.py: {sorted(missing)}"


def test_pytest_s_own_import_failure_reason_maps_to_the_module_s_requirement() -> None:
    found = requirement_for("could not import 'peft': No module named 'peft'")
    assert found is not None and "torch" in found.install
    autogen = requirement_for("could not import 'openinference.instrumentation.autogen_agentchat': No module named")
    assert autogen is not None and "--no-deps autogen-agentchat" in autogen.install


def test_hand_written_reasons_map_by_their_words() -> None:
    assert requirement_for("bubblewrap is not installed") is not None
    assert requirement_for("dashboard browser tests need Playwright and Chromium: no chromium") is not None
    assert requirement_for("the transformers engine needs the [torch] extra") is not None
    assert requirement_for("the gateway's chat templating needs a tokenizer (transformers)") is not None
    assert requirement_for("a reason nobody wrote a line for") is None


def test_every_requirement_says_how_to_get_it() -> None:
    assert all(r.install.strip() and r.what.strip() for r in REQUIREMENTS)
