"""``@algo``: the function gets the arguments it names; a dataset it has no parameter for
is refused rather than dropped."""

from __future__ import annotations

from typing import Any

import pytest

from agentbolt.compat import algo


def test_the_function_gets_the_datasets_it_names() -> None:
    seen: dict[str, Any] = {}

    @algo
    def both(*, train_dataset: Any, val_dataset: Any) -> None:
        seen.update(train=train_dataset, val=val_dataset)

    both.run(train_dataset=[1], val_dataset=[2])
    assert seen == {"train": [1], "val": [2]}


@pytest.mark.parametrize(("given", "missing"), [({"train_dataset": ["x"]}, "train_dataset"),
                                                ({"val_dataset": ["y"]}, "val_dataset")])
def test_a_dataset_without_a_parameter_is_refused(given: dict[str, Any], missing: str) -> None:
    @algo
    def store_only(*, store: Any) -> None:
        pass

    with pytest.raises(TypeError, match=f"{missing} is provided but not supported"):
        store_only.run(**given)
    store_only.run()  # nothing given: nothing to refuse


def test_keyword_catch_alls_take_everything() -> None:
    @algo
    def anything(**kwargs: Any) -> Any:
        return sorted(kwargs)

    assert "train_dataset" in anything.run(train_dataset=[1])
