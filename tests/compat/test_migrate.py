"""``agentbolt.compat.migrate``: v0.3 imports become ``agentbolt.compat`` imports in every
form and place, the rest of the file is kept byte for byte, a second run changes
nothing, and what cannot be mapped is reported with the reason."""

from __future__ import annotations

import textwrap

import pytest

from agentbolt.compat.migrate import migrate_source


def _migrated(source: str) -> str:
    return migrate_source(textwrap.dedent(source)).migrated


def test_plain_import_and_its_references() -> None:
    assert _migrated("""\
        import agentlightning
        store = agentlightning.InMemoryLightningStore()  # the store
        agentlightning.emit_reward(1.0)
    """) == textwrap.dedent("""\
        import agentbolt.compat
        store = agentbolt.compat.InMemoryLightningStore()  # the store
        agentbolt.compat.emit_reward(1.0)
    """)


def test_plain_submodule_import_and_its_references() -> None:
    assert _migrated("""\
        import agentlightning.store.memory
        s = agentlightning.store.memory.InMemoryLightningStore()
    """) == textwrap.dedent("""\
        import agentbolt.compat.store.memory
        s = agentbolt.compat.store.memory.InMemoryLightningStore()
    """)


def test_aliased_imports_keep_their_alias_and_the_code_is_untouched() -> None:
    assert _migrated("""\
        import agentlightning as agl   # v0.3
        import agentlightning.tracer.otel as otel
        agl.Trainer(n_runners=2)
    """) == textwrap.dedent("""\
        import agentbolt.compat as agl   # v0.3
        import agentbolt.compat.tracer.otel as otel
        agl.Trainer(n_runners=2)
    """)


def test_from_imports_keep_their_layout_and_comments() -> None:
    assert _migrated("""\
        from agentlightning import (
            Trainer,   # trains
            LitAgent as Agent,
        )
        from agentlightning.store import InMemoryLightningStore
        from agentlightning import store
    """) == textwrap.dedent("""\
        from agentbolt.compat import (
            Trainer,   # trains
            LitAgent as Agent,
        )
        from agentbolt.compat.store import InMemoryLightningStore
        from agentbolt.compat import store
    """)


def test_star_imports() -> None:
    assert _migrated("from agentlightning.types import *\nfrom agentlightning import *\n") == (
        "from agentbolt.compat.types import *\nfrom agentbolt.compat import *\n")


def test_imports_inside_functions_classes_and_try_blocks() -> None:
    assert _migrated("""\
        def run():
            from agentlightning.utils.otel import make_tag_attributes
            import agentlightning as agl
            return agl, make_tag_attributes

        class A:
            try:
                from agentlightning.emitter import emit_object
            except ImportError:
                emit_object = None
    """) == textwrap.dedent("""\
        def run():
            from agentbolt.compat.utils.otel import make_tag_attributes
            import agentbolt.compat as agl
            return agl, make_tag_attributes

        class A:
            try:
                from agentbolt.compat.emitter import emit_object
            except ImportError:
                emit_object = None
    """)


def test_other_imports_strings_and_relative_imports_stay() -> None:
    source = textwrap.dedent("""\
        import agentlightning_extras
        from . import agentlightning
        from .agentlightning import x
        NAME = "agentlightning.store"
        import os, agentlightning.store
    """)
    assert migrate_source(source).migrated == source.replace("os, agentlightning.store", "os, agentbolt.compat.store")


def test_import_module_calls_with_a_literal_path() -> None:
    assert _migrated("""\
        import importlib
        reward = importlib.import_module("agentlightning.emitter.reward")
        other = importlib.import_module('agentlightning')
        mine = importlib.import_module(name)
    """) == textwrap.dedent("""\
        import importlib
        reward = importlib.import_module("agentbolt.compat.emitter.reward")
        other = importlib.import_module('agentbolt.compat')
        mine = importlib.import_module(name)
    """)


@pytest.mark.parametrize("source", [
    "import agentlightning\nx = agentlightning.store.LightningStore\n",
    "from agentlightning.store.mongo import MongoLightningStore\nimport agentlightning as agl\n",
    "def f():\n    from agentlightning.types import *\n",
    "import importlib\nm = importlib.import_module('agentlightning.store')\n",
])
def test_a_second_run_changes_nothing(source: str) -> None:
    once = migrate_source(source)
    assert once.changed
    twice = migrate_source(once.migrated)
    assert not twice.changed and twice.findings == []


def test_unmappable_imports_are_reported_with_the_reason_and_the_replacement() -> None:
    result = migrate_source(textwrap.dedent("""\
        from agentlightning import VERL, Trainer
        from agentlightning.store.mongo import MongoLightningStore
        import agentlightning.instrumentation.agentops
        from agentlightning.nowhere import thing
    """))
    found = {(f.line, f.statement): f.reason for f in result.findings}
    assert set(found) == {
        (1, "from agentlightning import VERL"),
        (2, "from agentlightning.store.mongo import MongoLightningStore"),
        (3, "import agentlightning.instrumentation.agentops"),
        (4, "from agentlightning.nowhere import ..."),
    }
    assert "agentbolt.algorithms.GRPO" in found[(1, "from agentlightning import VERL")]
    assert "agentbolt.SqliteStore" in found[(2, "from agentlightning.store.mongo import MongoLightningStore")]
    assert "not a module of Agent Lightning v0.3.0" in found[(4, "from agentlightning.nowhere import ...")]
    # the imports are rewritten all the same: the paths exist, the names say why on use
    assert "from agentbolt.compat.store.mongo import MongoLightningStore" in result.migrated


def test_a_migrated_program_runs() -> None:
    namespace: dict[str, object] = {}
    exec(migrate_source(textwrap.dedent("""\
        import agentlightning
        from agentlightning.store.memory import InMemoryLightningStore
        from agentlightning.types import TraceStatus, SpanCoreFields
        core = SpanCoreFields(name="x", status=TraceStatus(status_code="OK"), attributes={})
        store = InMemoryLightningStore()
        same = agentlightning.store.memory.InMemoryLightningStore is InMemoryLightningStore
    """)).migrated, namespace)  # noqa: S102
    assert namespace["same"] is True
