"""``examples/room_selector``: the problems have one right room, the grader is exact, and
``optimize.py`` runs APO end to end — against an OpenAI-compatible endpoint (a scripted
one on 127.0.0.1 that plays agent, critic and editor) and, slow, on the local SmolLM2."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "room_selector"


def _load(name: str) -> ModuleType:
    """``examples/room_selector/<name>.py`` under a name of its own: other examples also
    have a ``task.py``, so the sibling ``task`` it imports is put back out of the way."""
    saved = sys.modules.pop("task", None)
    sys.path.insert(0, str(EXAMPLE))
    try:
        spec = importlib.util.spec_from_file_location(f"room_selector_{name}", EXAMPLE / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(EXAMPLE))
        sys.modules.pop("task", None)
        if saved is not None:
            sys.modules["task"] = saved


task = _load("task")
scripted = _load("scripted_endpoint")
agent = _load("agent")


# ----------------------------------------------------------------------------- problems
def test_every_problem_has_exactly_one_room_that_fits() -> None:
    kinds = {"equipment": 0, "accessible": 0, "same_floor": 0}
    for seed in range(3000):
        p = task.make_problem(seed)
        assert 4 <= len(p.rooms) <= 6
        assert len({r.name for r in p.rooms}) == len(p.rooms)
        assert task.matching_rooms(p.rooms, p.request) == [p.answer]
        # the right room breaks nothing, every other room at least one constraint
        for room in p.rooms:
            broken = task.violations(room, p.request, p.rooms)
            assert bool(broken) == (room.name != p.answer)
        kinds["equipment"] += bool(p.request.equipment)
        kinds["accessible"] += p.request.accessible
        kinds["same_floor"] += p.request.same_floor_as is not None
    assert all(300 < n < 2700 for n in kinds.values()), kinds  # every kind of constraint is common


def test_problems_are_deterministic_and_splits_disjoint() -> None:
    assert task.make_problem(7) == task.make_problem(7)
    train, val, test = (task.make_dataset(s, 200) for s in ("train", "val", "test"))
    assert train == task.make_dataset("train", 200)
    texts = [{t["rooms"] + t["request"] for t in d} for d in (train, val, test)]
    assert all(len(t) == 200 for t in texts)
    assert not (texts[0] & texts[1]) and not (texts[0] & texts[2]) and not (texts[1] & texts[2])
    # where the right room is listed varies: answering "the first room" scores about 1 in 5
    first = sum(t["answer"] == t["room_names"][0] for t in val) / len(val)
    assert 0.1 < first < 0.35
    with pytest.raises(ValueError, match="unknown split"):
        task.make_dataset("dev", 1)


def test_rendering_fills_the_prompt_fields() -> None:
    p = task.Problem(0, (
        task.Room("Cedar", 3, 8, ("projector", "whiteboard"), True, ((540, 600), (810, 870))),
        task.Room("Onyx", 3, 4, (), False, ()),
    ), task.Request(6, 600, 90, ("projector", "whiteboard"), True, "Onyx"), "Cedar")
    t = task.to_task(p, "x-0")
    assert t["rooms"] == (
        "- Cedar: floor 3, 8 seats, equipment: projector, whiteboard; wheelchair accessible: yes; "
        "booked: 09:00-10:00, 13:30-14:30\n"
        "- Onyx: floor 3, 4 seats, equipment: none; wheelchair accessible: no; booked: free all day")
    assert t["request"] == (
        "A meeting for 6 people from 10:00 to 11:30 (90 minutes). The room needs a projector and a whiteboard. "
        "One attendee uses a wheelchair, so the room must be wheelchair accessible. The room must be on the same "
        "floor as Onyx (Onyx itself is booked then).")
    assert t["answer"] == "Cedar" and t["room_names"] == ["Cedar", "Onyx"]
    prompt = agent.INITIAL_PROMPT.format(rooms=t["rooms"], request=t["request"])
    assert t["rooms"] in prompt and t["request"] in prompt
    assert "ROOM:" not in agent.INITIAL_PROMPT and "constraint" not in agent.INITIAL_PROMPT  # weak on purpose


def test_a_booking_that_only_touches_the_slot_does_not_clash() -> None:
    request = task.Request(4, 600, 60)
    assert task.violations(task.Room("A", 1, 4, (), False, ((540, 600), (660, 720))), request, []) == []
    assert task.violations(task.Room("A", 1, 4, (), False, ((630, 690),)), request, []) == ["booked at that time"]


# ----------------------------------------------------------------------------- grading
NAMES = ["Cedar", "Onyx", "Maple"]
TASK = {"id": "t", "rooms": "", "request": "", "answer": "Onyx", "room_names": NAMES}


@pytest.mark.parametrize(("reply", "room"), [
    ("Onyx fits best.\nROOM: Onyx", "Onyx"),
    ("Cedar is too small, Maple is booked.\nROOM: Onyx", "Onyx"),
    ("room: **onyx**", "Onyx"),
    ("ROOM: Cedar\nWait, Cedar is booked.\nROOM: Onyx", "Onyx"),       # the last answer line counts
    ("ROOM: Atlantis\nROOM: Maple", "Maple"),                           # lines naming no room are skipped
    ("They should book Onyx.", "Onyx"),                                 # no ROOM line: the only name mentioned
    ("Onyx, not Cedar.", None),                                         # several names and no ROOM line: none
    ("I would book the large room on floor 2.", None),
    ("The Onyxian room", None),                                         # whole words only
])
def test_parse_room(reply: str, room: str | None) -> None:
    assert task.parse_room(reply, NAMES) == room


def test_grade_is_exact() -> None:
    assert task.grade("ROOM: Onyx", TASK) == 1.0
    assert task.grade("ROOM: Cedar", TASK) == 0.0
    assert task.grade("Onyx or Cedar", TASK) == 0.0
    assert task.grade("", TASK) == 0.0


# ----------------------------------------------------------------------------- the scripted endpoint
def test_scripted_agent_solves_only_when_told_to_check_every_constraint() -> None:
    val = task.make_dataset("val", 60)
    weak, strong = agent.INITIAL_PROMPT, agent.INITIAL_PROMPT + "\n\n" + scripted.INSTRUCTION
    for t in val:
        assert scripted.solve_prompt(weak.format(rooms=t["rooms"], request=t["request"])) == t["answer"]
        role, reply = scripted.answer([{"role": "user", "content": weak.format(**t)}])
        assert role == "agent" and task.parse_room(reply, t["room_names"]) == t["room_names"][0]
        role, reply = scripted.answer([{"role": "user", "content": strong.format(**t)}])
        assert role == "agent" and task.grade(reply, t) == 1.0


def test_scripted_critic_and_editor_answer_apos_prompts() -> None:
    tg = pytest.importorskip("agentbolt.algorithms.apo.textual_gradient")
    role, critique = scripted.answer(tg.critic_messages(agent.INITIAL_PROMPT, ["<trace>...</trace>"], 1.0))
    assert (role, critique) == ("critic", scripted.CRITIQUE)
    role, reply = scripted.answer(tg.editor_messages(agent.INITIAL_PROMPT, critique))
    assert role == "editor"
    assert tg.parse_template(reply) == agent.INITIAL_PROMPT + "\n\n" + scripted.INSTRUCTION


# ----------------------------------------------------------------------------- optimize.py, end to end
def _optimize(*args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    out = subprocess.run([sys.executable, str(EXAMPLE / "optimize.py"), "--quiet", *args],
                         check=False, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out


def test_optimize_against_an_openai_compatible_endpoint(tmp_path: Path) -> None:
    """The endpoint path: agent, critic and editor all behind one URL (the scripted
    server, real HTTP). APO must find the instruction the agent needs, raise validation
    and held-out accuracy, write the best prompt and the history, and resume."""
    pytest.importorskip("openai")
    run = tmp_path / "run"
    with scripted.serve_scripted_endpoint() as url:
        out = _optimize("--endpoint", url, "--model", "scripted", "--api-key", "k", "--run-dir", str(run),
                        "--rounds", "2", "--train-size", "8", "--train-batch", "4", "--val-size", "12", "--test-size", "6",
                        timeout=120)
        first = url.calls
        assert first["critic"] >= 1 and first["editor"] >= 1

        summary = json.loads((run / "summary.json").read_text())
        assert summary["val_before"] < 0.5 and summary["val_after"] == 1.0
        assert summary["test_before"] < 0.5 and summary["test_after"] == 1.0
        best = (run / "best_prompt.txt").read_text()
        assert best == summary["best_prompt"] == agent.INITIAL_PROMPT + "\n\n" + scripted.INSTRUCTION
        assert "validation accuracy (12 problems, greedy)" in out.stdout and best.splitlines()[-1] in out.stdout

        history = [json.loads(line) for line in (run / "apo_history.jsonl").read_text().splitlines()]
        by_id = {c["candidate_id"]: c for c in history}
        root, winner = by_id["c0"], by_id[summary["best_id"]]
        assert root["template"] == agent.INITIAL_PROMPT and root["parent_id"] is None
        assert winner["parent_id"] == "c0" and winner["critique"] == scripted.CRITIQUE
        assert sorted(winner["val_scores"].values()) == [1.0] * 12

        # the critic read real traces: the agent's prompt and its answer, recorded by the openai client
        critic_text = next(m[-1]["content"] for part, m in url.requests if part == "critic")
        assert "Model call 1" in critic_text and "They should book" in critic_text
        assert "wheelchair accessible:" in critic_text

        # a rerun with more rounds resumes after round 2: only round 3 asks the critic
        _optimize("--endpoint", url, "--model", "scripted", "--run-dir", str(run), "--rounds", "3",
                  "--train-size", "8", "--train-batch", "4", "--val-size", "12", timeout=120)
        assert 0 < url.calls["critic"] - first["critic"] < first["critic"]
    assert json.loads((run / "apo_state.json").read_text())["completed_round"] == 3


@pytest.mark.slow
def test_optimize_smoke_on_the_local_smollm2(tmp_path: Path) -> None:
    """The no-endpoint path: SmolLM2-135M behind the in-process gateway is agent, critic
    and editor. Whatever the 135M critic writes, the run completes and reports."""
    pytest.importorskip("torch")
    pytest.importorskip("openai")
    run = tmp_path / "run"
    out = _optimize("--smoke", "--run-dir", str(run), timeout=600)
    assert "validation accuracy (4 problems, greedy)" in out.stdout
    summary = json.loads((run / "summary.json").read_text())
    assert summary["val_before"] is not None and summary["val_after"] is not None
    assert summary["val_after"] >= summary["val_before"]  # the best is chosen on this validation set
    assert (run / "best_prompt.txt").read_text() == summary["best_prompt"]
    assert (run / "apo_history.jsonl").is_file() and (run / "store.db").is_file()
