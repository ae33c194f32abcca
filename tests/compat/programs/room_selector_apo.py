"""Port of v0.3's ``examples/apo/room_selector_apo.py``: tune the room selector's prompt
with APO (v0.3's arguments) through ``Trainer``; ``agentlightning`` -> ``agentbolt.compat``."""

from __future__ import annotations

from typing import Any, cast

from openai import AsyncOpenAI

from agentbolt.compat import Trainer, setup_logging
from agentbolt.compat.adapter import TraceToMessages
from agentbolt.compat.algorithm.apo import APO
from agentbolt.compat.types import Dataset
from tests.compat.programs.room_selector import (
    RoomSelectionTask,
    load_room_tasks,
    prompt_template_baseline,
    room_selector,
)


def load_train_val_dataset() -> tuple[Dataset[RoomSelectionTask], Dataset[RoomSelectionTask]]:
    tasks = list(load_room_tasks())
    half = len(tasks) // 2
    return cast(Dataset[RoomSelectionTask], tasks[:half]), cast(Dataset[RoomSelectionTask], tasks[half:])


def main(*, resources_on_the_algorithm: bool = False) -> Any:
    """The example; ``resources_on_the_algorithm``: the guide's second way, the prompt given
    to ``algo.set_initial_resources(...)`` instead of the Trainer."""
    setup_logging()
    algo = APO[RoomSelectionTask](
        AsyncOpenAI(),
        val_batch_size=4,
        gradient_batch_size=2,
        beam_width=1,
        branch_factor=1,
        beam_rounds=1,
    )
    resources = {"prompt_template": prompt_template_baseline()}
    if resources_on_the_algorithm:
        algo.set_initial_resources(resources)
        trainer = Trainer(algorithm=algo, n_runners=2, adapter=TraceToMessages())
    else:
        trainer = Trainer(algorithm=algo, n_runners=2, initial_resources=resources, adapter=TraceToMessages())
    train, val = load_train_val_dataset()
    return trainer.fit(agent=room_selector, train_dataset=train, val_dataset=val)
