"""agent_match: a regular expression searched in the agent name."""

from __future__ import annotations

import re

import pytest

from agentbolt.adapters import agent_matcher


def test_none_matches_every_call_named_or_not() -> None:
    m = agent_matcher(None)
    assert m("solver") and m(None) and m.matches_everything


def test_a_pattern_is_searched_not_anchored() -> None:
    m = agent_matcher("solver")
    assert m("solver") and m("math-solver")
    assert not m("planner")


def test_anchors_and_alternation_work_as_in_re() -> None:
    assert not agent_matcher("^solver$")("math-solver")
    m = agent_matcher("planner|solver")
    assert m("planner") and m("solver") and not m("critic")
    assert agent_matcher(re.compile("SOLVER", re.IGNORECASE))("solver")


def test_a_call_without_agent_name_never_matches_a_pattern() -> None:
    assert not agent_matcher(".*")(None)


def test_bad_patterns_say_what_to_do() -> None:
    with pytest.raises(ValueError, match=r"not a valid regular expression .*re\.escape"):
        agent_matcher("solver(")
    with pytest.raises(ValueError, match="pass None"):
        agent_matcher("")
    with pytest.raises(TypeError, match="regular expression string"):
        agent_matcher(3)  # type: ignore[arg-type]
