"""``agentlightning.trainer.init_utils``'s helpers: load a class by path, build it with the
optional defaults its constructor takes, from a path or a ``{"type": ...}`` spec."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import pytest
from agentbolt.compat.trainer.init_utils import instantiate_component, instantiate_from_spec, load_class


class Widget:
    def __init__(self, size: int = 1, color: str = "red") -> None:
        self.size, self.color = size, color


def test_load_class_takes_dotted_and_colon_paths() -> None:
    assert load_class("collections.OrderedDict") is OrderedDict
    assert load_class("collections:OrderedDict") is OrderedDict


def test_optional_defaults_fill_only_what_the_constructor_takes() -> None:
    widget = instantiate_component(Widget, {"size": 3}, {"color": lambda: "blue", "weight": 9, "size": 5})
    assert (widget.size, widget.color) == (3, "blue")


def test_specs_as_paths_registry_keys_and_dicts() -> None:
    path = f"{__name__}.Widget"
    assert instantiate_from_spec(path, spec_name="widget").size == 1
    assert instantiate_from_spec("w", spec_name="widget", registry={"w": path}).color == "red"
    built: Any = instantiate_from_spec({"type": path, "size": 7}, spec_name="widget")
    assert built.size == 7
    assert instantiate_from_spec({"size": 2}, spec_name="widget", dict_requires_type=False,
                                 dict_default_cls=Widget).size == 2
    with pytest.raises(ValueError, match="needs a 'type' key"):
        instantiate_from_spec({"size": 2}, spec_name="widget")
