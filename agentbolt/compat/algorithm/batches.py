"""``batch_iter_over_dataset``: v0.3's endless batching of a dataset for algorithms."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import TypeVar

from agentbolt.compat.types import Dataset

__all__ = ["batch_iter_over_dataset"]

T = TypeVar("T")


def batch_iter_over_dataset(dataset: Dataset[T], batch_size: int) -> Iterator[Sequence[T]]:
    """Batches of ``batch_size`` distinct items, forever: each pass visits the dataset in a
    fresh random order, and a batch left unfinished at the end of a pass is completed from
    the next one (skipping items it already holds). With ``batch_size`` at least the
    dataset's size, each batch is the whole dataset, shuffled."""
    size = len(dataset)
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    if size == 0:
        raise ValueError("the dataset is empty: there is nothing to batch")
    if batch_size >= size:
        while True:
            whole = [dataset[i] for i in range(size)]
            random.shuffle(whole)
            yield whole
    batch: list[int] = []
    while True:
        order = list(range(size))
        random.shuffle(order)
        for index in order:
            if index in batch:
                continue
            batch.append(index)
            if len(batch) == batch_size:
                yield [dataset[i] for i in batch]
                batch = []
