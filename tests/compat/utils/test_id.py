"""``generate_id``: random hexadecimal ids of the length asked."""

from __future__ import annotations

import pytest

from agentbolt.compat.utils.id import generate_id


@pytest.mark.parametrize("length", [1, 7, 12, 32])
def test_ids_have_the_length_asked_and_differ(length: int) -> None:
    ids = {generate_id(length) for _ in range(20)}
    assert all(len(i) == length and int(i, 16) >= 0 for i in ids)
    assert len(ids) > 1 or length == 1


def test_a_length_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="positive"):
        generate_id(0)
