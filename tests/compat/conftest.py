"""Fixtures of the Agent Lightning v0.3 ports: a scripted OpenAI endpoint the examples'
argument-less ``OpenAI()`` clients reach through ``OPENAI_BASE_URL``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack

import pytest

from tests.compat.scripted_openai import Script, ScriptedOpenAI, serve_script


@pytest.fixture
def openai_script(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Script], ScriptedOpenAI]]:
    """``openai_script(fn)`` serves ``fn`` and points the OpenAI client at it."""
    with ExitStack() as stack:

        def start(script: Script) -> ScriptedOpenAI:
            server = stack.enter_context(serve_script(script))
            monkeypatch.setenv("OPENAI_BASE_URL", server.url)
            monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
            return server

        yield start
