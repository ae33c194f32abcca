"""Every public name of Agent Lightning v0.3 is either provided — through ``import
agentbolt as agl`` and ``agentbolt.compat`` — or listed as not supported, with the reason,
in the migration guide."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import agentbolt
import agentbolt.compat
from agentbolt.compat.names import PROVIDED, SHADOWED, UNSUPPORTED, V03_NAMES

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "migrating-from-agent-lightning.md"
_ROW = re.compile(r"^\| `([A-Za-z_]+)` \| (.+)$")


def _guide_rows() -> dict[str, str]:
    rows: dict[str, str] = {}
    in_names = False
    for line in GUIDE.read_text().splitlines():
        if line.startswith("## Every v0.3 public name"):
            in_names = True
        elif line.startswith("## "):
            in_names = False
        match = _ROW.match(line) if in_names else None
        if match:
            assert match[1] not in rows, f"{match[1]} is listed twice"
            rows[match[1]] = match[2]
    return rows


def test_the_table_covers_v03s_116_public_names() -> None:
    assert len(V03_NAMES) == 116 and not set(PROVIDED) & set(UNSUPPORTED)


def test_the_guide_lists_every_name_as_the_table_does() -> None:
    rows = _guide_rows()
    assert set(rows) == set(V03_NAMES)
    for name, row in rows.items():
        if name in UNSUPPORTED:
            assert "**not supported**" in row, name
        else:
            assert row.startswith("provided"), name
    text = GUIDE.read_text()
    assert f"Provided: {len(PROVIDED)}. Not supported: {len(UNSUPPORTED)}" in text


@pytest.mark.parametrize("name", sorted(PROVIDED))
def test_every_provided_name_resolves_in_both_namespaces(name: str) -> None:
    # (``resolve``, not getattr: ``agentbolt.compat.reward`` is also a module, as in v0.3)
    if name in SHADOWED:  # agentbolt's own object under the same name; the guide says so
        assert getattr(agentbolt, name) is not agentbolt.compat.resolve(name)
        assert f"`agentbolt.{name}` is agentbolt's own" in GUIDE.read_text()
    else:
        assert getattr(agentbolt, name) is agentbolt.compat.resolve(name)


@pytest.mark.parametrize("name", sorted(UNSUPPORTED))
def test_an_unsupported_name_says_why(name: str) -> None:
    with pytest.raises(AttributeError, match="not provided by agentbolt"):
        getattr(agentbolt, name)


def test_the_main_namespace_stays_agentbolts() -> None:
    assert "LightningStore" not in agentbolt.__all__ and "LightningStore" in dir(agentbolt.compat)
    with pytest.raises(AttributeError):
        agentbolt.not_a_name  # noqa: B018
