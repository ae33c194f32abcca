"""``batch_iter_over_dataset``: endless batches of distinct items, every item once per pass."""

from __future__ import annotations

import itertools

import pytest
from agentbolt.compat.algorithm.utils import batch_iter_over_dataset


def test_batches_are_full_and_distinct_and_every_item_comes_each_pass() -> None:
    data = list(range(10))
    batches = list(itertools.islice(batch_iter_over_dataset(data, 3), 10))  # 30 items: three passes
    assert all(len(b) == 3 and len(set(b)) == 3 for b in batches)
    seen = [x for b in batches for x in b]
    assert sorted(seen[:9]) == sorted(set(seen[:9]))  # the first pass repeats nothing
    assert set(seen) == set(data)


def test_a_batch_as_large_as_the_dataset_is_the_whole_dataset_shuffled() -> None:
    batch = next(batch_iter_over_dataset(["a", "b", "c"], 5))
    assert sorted(batch) == ["a", "b", "c"]


@pytest.mark.parametrize(("data", "size", "reason"), [([], 2, "empty"), ([1], 0, "positive")])
def test_nonsense_is_refused(data: list[int], size: int, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        next(batch_iter_over_dataset(data, size))
