"""Meeting-room problems with exactly one right answer, and their exact grader.

A problem is 4–6 rooms (name, floor, seats, equipment, wheelchair access, bookings) and
a request (attendees, time slot, required equipment, maybe wheelchair access, maybe "on
the same floor as <room>"). Exactly one room satisfies every constraint: the generator
builds the right room first, then distractors that each break one constraint (near
misses), and asserts the uniqueness with :func:`matching_rooms`.

A task — what the agent gets, JSON-ready — is ``{"id", "rooms", "request", "answer",
"room_names"}``: ``rooms`` and ``request`` are text, the ``{rooms}`` and ``{request}``
fields of the prompt template; ``answer`` is the right room's name.

The answer format is a final line ``ROOM: <name>``; without one, a reply that mentions
exactly one room name answers with it, and a reply that mentions several answers nothing
(see :func:`parse_room`). The reward is 1.0 for the right room, else 0.0.

Splits are disjoint seed ranges (:data:`SPLIT_SEEDS`): ``train``, ``val`` (the one APO
selects on) and ``test`` (held out from the whole optimisation).

Pure logic: importing this module does no work and needs only the standard library.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "EQUIPMENT",
    "ROOM_NAMES",
    "SPLIT_SEEDS",
    "Problem",
    "Request",
    "Room",
    "Split",
    "grade",
    "make_dataset",
    "make_problem",
    "matching_rooms",
    "parse_room",
    "render_request",
    "render_rooms",
    "to_task",
    "violations",
]

ROOM_NAMES = (
    "Aurora", "Birch", "Cedar", "Dune", "Ember", "Fjord", "Granite", "Harbor", "Iris", "Juniper",
    "Kestrel", "Lagoon", "Maple", "Nimbus", "Onyx", "Quartz", "Reef", "Sierra", "Tundra", "Willow",
)
"""Room names: distinct, one word, not common English words (so a reply's mentions are unambiguous)."""

EQUIPMENT = ("projector", "video conferencing", "whiteboard", "speakerphone", "TV screen")
_WITH_ARTICLE = {"projector": "a projector", "video conferencing": "video conferencing", "whiteboard": "a whiteboard",
                 "speakerphone": "a speakerphone", "TV screen": "a TV screen"}
CAPACITIES = (2, 4, 6, 8, 10, 12, 16, 20)
DAY_START, DAY_END = 9 * 60, 18 * 60  # bookable hours, minutes since midnight

Split = Literal["train", "val", "test"]
SPLIT_SEEDS: dict[str, int] = {"train": 0, "val": 100_000, "test": 200_000}
"""First seed of each split; problem ``i`` of a split has seed ``SPLIT_SEEDS[split] + i``."""


# ----------------------------------------------------------------------------- data
@dataclass(frozen=True)
class Room:
    name: str
    floor: int
    capacity: int
    equipment: tuple[str, ...]
    accessible: bool
    bookings: tuple[tuple[int, int], ...]
    """Booked slots as ``(start, end)`` minutes since midnight, end excluded."""


@dataclass(frozen=True)
class Request:
    attendees: int
    start: int
    duration: int
    equipment: tuple[str, ...] = ()
    accessible: bool = False
    same_floor_as: str | None = None
    """Another room's name: the room must be on its floor (that room itself is booked then)."""

    @property
    def end(self) -> int:
        return self.start + self.duration


@dataclass(frozen=True)
class Problem:
    seed: int
    rooms: tuple[Room, ...]
    request: Request
    answer: str


# ----------------------------------------------------------------------------- constraints
def _overlaps(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]


def violations(room: Room, request: Request, rooms: tuple[Room, ...] | list[Room]) -> list[str]:
    """The constraints of ``request`` that ``room`` breaks (empty: it fits)."""
    out = []
    if room.capacity < request.attendees:
        out.append(f"seats {room.capacity} < {request.attendees} attendees")
    missing = [e for e in request.equipment if e not in room.equipment]
    if missing:
        out.append("no " + ", ".join(missing))
    if request.accessible and not room.accessible:
        out.append("not wheelchair accessible")
    if any(_overlaps(b, (request.start, request.end)) for b in room.bookings):
        out.append("booked at that time")
    if request.same_floor_as is not None:
        ref = next(r for r in rooms if r.name == request.same_floor_as)
        if room.name == ref.name:
            out.append("is the reference room")
        elif room.floor != ref.floor:
            out.append(f"floor {room.floor}, not {ref.floor}")
    return out


def matching_rooms(rooms: tuple[Room, ...] | list[Room], request: Request) -> list[str]:
    """Names of the rooms that satisfy every constraint of ``request``."""
    return [r.name for r in rooms if not violations(r, request, rooms)]


# ----------------------------------------------------------------------------- generator
def _free_slots(rng: random.Random, avoid: tuple[int, int], k: int) -> list[tuple[int, int]]:
    """Up to ``k`` disjoint bookings that leave ``avoid`` free."""
    slots: list[tuple[int, int]] = []
    for _ in range(20 * k):
        if len(slots) == k:
            break
        length = rng.choice((30, 60, 90, 120))
        start = rng.randrange(DAY_START, DAY_END - length + 1, 30)
        slot = (start, start + length)
        if not _overlaps(slot, avoid) and not any(_overlaps(slot, s) for s in slots):
            slots.append(slot)
    return sorted(slots)


def _clashing_slot(rng: random.Random, request: Request) -> tuple[int, int]:
    """A booking that overlaps the requested slot (by at least 30 minutes)."""
    length = rng.choice((30, 60, 90, 120))
    lo = max(DAY_START, request.start - length + 30)
    hi = min(DAY_END - length, request.end - 30)
    start = rng.randrange(lo, hi + 1, 30) if hi >= lo else request.start
    return (start, start + length)


def _room(rng: random.Random, name: str, request: Request, floor: int | None, breaks: str | None) -> Room:
    """A room that satisfies ``request`` except the constraint ``breaks`` (None: all of them).

    ``floor``: the floor the request's "same floor" constraint demands, if any.
    """
    if floor is None:
        floor_ = rng.randint(1, 5)
    elif breaks == "floor":
        floor_ = rng.choice([f for f in range(1, 6) if f != floor])
    else:
        floor_ = floor
    fits = [c for c in CAPACITIES if c >= request.attendees]
    capacity = rng.choice([c for c in CAPACITIES if c < request.attendees] if breaks == "capacity" else fits)
    required = list(request.equipment)
    dropped = rng.choice(required) if breaks == "equipment" else None
    extras = [e for e in EQUIPMENT if e not in required and e != dropped and rng.random() < 0.35]
    equipment = tuple(e for e in EQUIPMENT if (e in required and e != dropped) or e in extras)
    if breaks == "accessible":
        accessible = False
    else:
        accessible = True if request.accessible else rng.random() < 0.5
    bookings = _free_slots(rng, (request.start, request.end), rng.randint(0, 3))
    if breaks == "booking":
        clash = _clashing_slot(rng, request)
        bookings = sorted([b for b in bookings if not _overlaps(b, clash)] + [clash])
    return Room(name, floor_, capacity, equipment, accessible, tuple(bookings))


def make_problem(seed: int) -> Problem:
    """The problem of ``seed`` (deterministic); exactly one room fits its request."""
    rng = random.Random(f"room-selector-{seed}")
    n = rng.randint(4, 6)
    names = rng.sample(ROOM_NAMES, n)
    duration = rng.choice((30, 60, 60, 90, 120))
    request = Request(
        attendees=rng.randint(3, 14),
        start=rng.randrange(DAY_START, DAY_END - duration + 1, 30),
        duration=duration,
        equipment=tuple(sorted(rng.sample(EQUIPMENT, rng.choice((0, 1, 1, 2))), key=EQUIPMENT.index)),
        accessible=rng.random() < 0.4,
    )
    answer_at = rng.randrange(n)
    reference_at = None
    if rng.random() < 0.4:  # "same floor as <another room>", which is booked at that time
        reference_at = rng.choice([i for i in range(n) if i != answer_at])
        request = Request(**{**request.__dict__, "same_floor_as": names[reference_at]})
    floor = rng.randint(1, 5) if reference_at is not None else None  # the floor of the answer and the reference

    kinds = ["capacity", "booking"]
    kinds += ["equipment"] if request.equipment else []
    kinds += ["accessible"] if request.accessible else []
    kinds += ["floor"] if reference_at is not None else []
    rooms = []
    for i, name in enumerate(names):
        if i == answer_at:
            room = _room(rng, name, request, floor, None)
        elif i == reference_at:
            room = _room(rng, name, request, floor, "booking")
        else:
            room = _room(rng, name, request, floor, rng.choice(kinds))
        rooms.append(room)
    fitting = matching_rooms(rooms, request)
    assert fitting == [names[answer_at]], f"seed {seed}: rooms {fitting} fit, expected only {names[answer_at]}"
    return Problem(seed, tuple(rooms), request, names[answer_at])


# ----------------------------------------------------------------------------- rendering
def _clock(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _items(things: tuple[str, ...] | list[str]) -> str:
    things = list(things)
    return things[0] if len(things) == 1 else ", ".join(things[:-1]) + " and " + things[-1]


def render_rooms(rooms: tuple[Room, ...] | list[Room]) -> str:
    """One line per room, e.g. ``- Cedar: floor 3, 8 seats, equipment: projector, whiteboard;
    wheelchair accessible: yes; booked: 09:00-10:00, 13:30-14:30``."""
    lines = []
    for r in rooms:
        equipment = ", ".join(r.equipment) if r.equipment else "none"
        booked = ", ".join(f"{_clock(s)}-{_clock(e)}" for s, e in r.bookings) if r.bookings else "free all day"
        lines.append(f"- {r.name}: floor {r.floor}, {r.capacity} seats, equipment: {equipment}; "
                     f"wheelchair accessible: {'yes' if r.accessible else 'no'}; booked: {booked}")
    return "\n".join(lines)


def render_request(request: Request) -> str:
    """The request in plain sentences."""
    text = (f"A meeting for {request.attendees} people from {_clock(request.start)} to {_clock(request.end)} "
            f"({request.duration} minutes).")
    if request.equipment:
        text += f" The room needs {_items([_WITH_ARTICLE[e] for e in request.equipment])}."
    if request.accessible:
        text += " One attendee uses a wheelchair, so the room must be wheelchair accessible."
    if request.same_floor_as:
        text += (f" The room must be on the same floor as {request.same_floor_as} "
                 f"({request.same_floor_as} itself is booked then).")
    return text


def to_task(problem: Problem, task_id: str) -> dict[str, Any]:
    """The JSON-ready task the agent gets."""
    return {
        "id": task_id,
        "rooms": render_rooms(problem.rooms),
        "request": render_request(problem.request),
        "answer": problem.answer,
        "room_names": [r.name for r in problem.rooms],
    }


def make_dataset(split: Split, n: int) -> list[dict[str, Any]]:
    """The first ``n`` tasks of ``split`` (``"train"``, ``"val"`` or ``"test"``)."""
    if split not in SPLIT_SEEDS:
        raise ValueError(f"unknown split {split!r}; use one of {sorted(SPLIT_SEEDS)}")
    first = SPLIT_SEEDS[split]
    return [to_task(make_problem(first + i), f"{split}-{i}") for i in range(n)]


# ----------------------------------------------------------------------------- grading
_ROOM_LINE = re.compile(r"\broom\s*[:=]\s*[*_`\"'\s]*([A-Za-z]+)", re.IGNORECASE)


def parse_room(reply: str, room_names: list[str]) -> str | None:
    """The room a reply names: the last ``ROOM: <name>`` that names a room of the problem;
    without one, the only room name the reply mentions; else None."""
    by_lower = {n.lower(): n for n in room_names}
    for found in reversed(_ROOM_LINE.findall(reply)):
        if found.lower() in by_lower:
            return by_lower[found.lower()]
    mentioned = {n for n in room_names if re.search(rf"\b{re.escape(n)}\b", reply, re.IGNORECASE)}
    return mentioned.pop() if len(mentioned) == 1 else None


def grade(reply: str, task: dict[str, Any]) -> float:
    """1.0 if the reply names the right room (see :func:`parse_room`), else 0.0."""
    return 1.0 if parse_room(reply, task["room_names"]) == task["answer"] else 0.0
