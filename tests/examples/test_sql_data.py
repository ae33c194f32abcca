"""The SQL example's data: deterministic databases and questions, three splits that share no
question, no gold query and (for held-out schemas) no database; the Spider loader on a
tiny fixture in Spider's format; the agent's text protocol and the scripted teacher/critic."""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from tests.examples.sql_modules import load_sql_example

sql = load_sql_example()
INSTRUCTION, ScriptedCritic = sql.critic.INSTRUCTION, sql.critic.ScriptedCritic
SPLITS, build, database_path, load_split = sql.data.SPLITS, sql.data.build, sql.data.database_path, sql.data.load_split
execute, score = sql.grader.execute, sql.grader.score
INITIAL_PROMPT, feedback, first_messages = sql.protocol.INITIAL_PROMPT, sql.protocol.feedback, sql.protocol.first_messages
parse_sql, says_done = sql.protocol.parse_sql, sql.protocol.says_done
LEVELS = sql.questions.LEVELS
DOMAINS, HELDOUT_SCHEMAS, TRAIN_SCHEMAS = sql.schemas.DOMAINS, sql.schemas.HELDOUT_SCHEMAS, sql.schemas.TRAIN_SCHEMAS
SpiderFormatError, load_spider = sql.spider.SpiderFormatError, sql.spider.load_spider
teacher_reply = sql.teacher.teacher_reply

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "spider"


def dump(path: Path) -> list[str]:
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build(tmp_path_factory.mktemp("sql-data"))


def test_the_same_call_builds_the_same_databases_and_tasks(data_dir: Path, tmp_path: Path) -> None:
    again = build(tmp_path / "again")
    for db_id in DOMAINS:
        assert dump(database_path(data_dir, db_id)) == dump(database_path(again, db_id))
    for split in SPLITS:
        first = load_split(split, data_dir=data_dir)  # type: ignore[arg-type]
        second = load_split(split, data_dir=again)  # type: ignore[arg-type]
        strip = lambda tasks: [{k: v for k, v in t.items() if k != "db_path"} for t in tasks]
        assert strip(first) == strip(second)
    assert load_split("train", 10, data_dir=data_dir) == load_split("train", data_dir=data_dir)[:10]


def test_splits_share_no_question_no_gold_query_and_held_out_schemas_are_never_trained(data_dir: Path) -> None:
    tasks = {split: load_split(split, data_dir=data_dir) for split in SPLITS}  # type: ignore[arg-type]
    for a in SPLITS:
        for b in SPLITS:
            if a < b:
                qa = {(t["db_id"], t["question"]) for t in tasks[a]}
                qb = {(t["db_id"], t["question"]) for t in tasks[b]}
                assert not qa & qb, f"{a} and {b} share questions"
                assert not {t["gold"] for t in tasks[a]} & {t["gold"] for t in tasks[b]}, f"{a} and {b} share gold"
    assert {t["db_id"] for t in tasks["train"]} == set(TRAIN_SCHEMAS)
    assert {t["db_id"] for t in tasks["heldout_questions"]} <= set(TRAIN_SCHEMAS)
    assert {t["db_id"] for t in tasks["heldout_schemas"]} == set(HELDOUT_SCHEMAS)
    trained_tables = {DOMAINS[d].parent.name for d in TRAIN_SCHEMAS} | {DOMAINS[d].child.name for d in TRAIN_SCHEMAS}
    for db_id in HELDOUT_SCHEMAS:  # an unseen schema shares no table with the training ones
        assert not {DOMAINS[db_id].parent.name, DOMAINS[db_id].child.name} & trained_tables
    for split in SPLITS:  # every level is in every split, and the ids are unique
        assert set(Counter(t["level"] for t in tasks[split])) == set(LEVELS)
        assert len({t["id"] for t in tasks[split]}) == len(tasks[split])


def test_every_gold_query_runs_and_says_something(data_dir: Path) -> None:
    for split in SPLITS:
        for task in load_split(split, data_dir=data_dir):  # type: ignore[arg-type]
            result = execute(task["db_path"], task["gold"])
            assert result.ok and result.rows, task
            assert any(v is not None for row in result.rows for v in row), task
            assert score(task["db_path"], task["gold"], task["gold"]) == 1.0


def test_first_tasks_of_a_split_mix_the_levels_and_bad_requests_say_what_to_do(data_dir: Path) -> None:
    first = load_split("heldout_schemas", len(LEVELS), data_dir=data_dir)
    assert [t["level"] for t in first] == list(LEVELS)
    only = load_split("train", 5, data_dir=data_dir, levels=("join",))
    assert {t["level"] for t in only} == {"join"}
    with pytest.raises(ValueError, match="use one of"):
        load_split("test", data_dir=data_dir)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="questions at levels"):
        load_split("heldout_questions", 10_000, data_dir=data_dir)
    with pytest.raises(ValueError, match="unknown difficulty"):
        load_split("train", data_dir=data_dir, levels=("hard",))


def test_the_databases_hold_nulls_decimals_and_childless_parents(data_dir: Path) -> None:
    for db_id, d in DOMAINS.items():
        path = database_path(data_dir, db_id)
        nulls = execute(path, f"SELECT COUNT(*) FROM {d.child.name} WHERE {d.child.num_col} IS NULL").rows[0][0]
        childless = execute(path, f"SELECT COUNT(*) FROM {d.parent.name} WHERE id NOT IN "
                                  f"(SELECT {d.fk} FROM {d.child.name})").rows[0][0]
        assert nulls > 0 and childless >= 2, db_id
    assert any(d.child.decimals for d in DOMAINS.values())


# ----------------------------------------------------------------------------- Spider
@pytest.fixture
def spider_dir(tmp_path: Path) -> Path:
    """The fixture copied, each database built from its schema.sql (as Spider ships them)."""
    root = tmp_path / "spider"
    shutil.copytree(FIXTURE, root)
    for schema in root.glob("database/*/schema.sql"):
        conn = sqlite3.connect(schema.parent / f"{schema.parent.name}.sqlite")
        conn.executescript(schema.read_text())
        conn.close()
    return root


def test_spider_questions_become_tasks_the_grader_scores(spider_dir: Path) -> None:
    tasks = load_spider(spider_dir, "dev.json")
    assert [t["db_id"] for t in tasks] == ["concert_singer", "concert_singer", "concert_singer", "pets"]
    assert tasks[0]["schema"].splitlines() == [
        "stadium(Stadium_ID, Name, Capacity)", "singer(Singer_ID, Name, Country, Age)",
        "concert(concert_ID, concert_Name, Stadium_ID -> stadium.Stadium_ID, Year)"]
    assert tasks[3]["schema"] == "Pets(PetID, PetType, pet_age, weight)"
    assert score(tasks[1]["db_path"], "SELECT Name FROM stadium WHERE Stadium_ID IN (1, 2)", tasks[1]["gold"]) == 1.0
    assert score(tasks[2]["db_path"], "SELECT Name FROM singer ORDER BY Age", tasks[2]["gold"]) == 0.0
    assert score(tasks[3]["db_path"], "SELECT (13.4 + 9.3) / 2", tasks[3]["gold"]) == 1.0
    assert [t["question"] for t in load_spider(spider_dir, "train_spider.json", n=1)] == ["How many pets are older than 2?"]
    assert "Question: How many singers do we have?" in first_messages(INITIAL_PROMPT, tasks[0])[0]["content"]


def test_spider_format_errors_name_the_file_and_the_fix(spider_dir: Path, tmp_path: Path) -> None:
    (spider_dir / "database" / "pets" / "pets.sqlite").unlink()
    with pytest.raises(SpiderFormatError, match="no database at .*pets.sqlite"):
        load_spider(spider_dir, "dev.json")
    with pytest.raises(SpiderFormatError, match="tables.json is missing"):
        load_spider(tmp_path / "empty")
    (spider_dir / "bad.json").write_text('[{"db_id": "nowhere", "question": "q", "query": "SELECT 1"}]')
    with pytest.raises(SpiderFormatError, match="not in tables.json"):
        load_spider(spider_dir, "bad.json")


# ----------------------------------------------------------------------------- protocol, teacher, critic
def test_queries_are_read_from_bare_fenced_or_chatty_replies() -> None:
    assert parse_sql("SELECT name FROM a WHERE x = 'y';") == "SELECT name FROM a WHERE x = 'y'"
    assert parse_sql("Here it is:\n```sql\nSELECT  COUNT(*)\nFROM a\n```\nThis counts rows.") == "SELECT COUNT(*) FROM a"
    assert parse_sql("The query is select name from a\n\nIt lists names.") == "select name from a"
    assert parse_sql("I do not know.") is None
    assert says_done("DONE") and says_done("done.") and not says_done("abandoned")
    assert feedback("2 rows: a; b", ok=True).startswith("Result: 2 rows: a; b\n")
    assert feedback("Error: no such table: x", ok=False).startswith("Error: no such table")


def test_the_teacher_answers_training_questions_only(data_dir: Path) -> None:
    train = load_split("train", 3, data_dir=data_dir)
    known = {t["question"]: t["gold"] for t in train}
    opening = first_messages(INITIAL_PROMPT, train[0])
    assert teacher_reply(opening, known) == {"role": "assistant", "content": train[0]["gold"]}
    after = [*opening, {"role": "assistant", "content": train[0]["gold"]},
             {"role": "user", "content": feedback("1 row: 3", ok=True)}]
    assert teacher_reply(after, known) == {"role": "assistant", "content": "DONE"}
    held = load_split("heldout_questions", 1, data_dir=data_dir)[0]
    assert teacher_reply(first_messages(INITIAL_PROMPT, held), known) is None
    assert teacher_reply(first_messages(INITIAL_PROMPT, held, "tools"), known, tools=True) is None

    # with the run_sql tool offered: a tool call with the gold query, then DONE after its result
    opening = first_messages(INITIAL_PROMPT, train[1], "tools")
    call = teacher_reply(opening, known, tools=True)
    assert call is not None and call["content"] is None
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"query": train[1]["gold"]}
    after = [*opening, call, {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "1 row: 3"}]
    assert teacher_reply(after, known, tools=True) == {"role": "assistant", "content": "DONE"}


async def test_the_scripted_critic_asks_for_the_instruction_and_the_editor_adds_it_once() -> None:
    from agentbolt.algorithms.apo.textual_gradient import (
        critic_messages,
        editor_messages,
        parse_template,
    )

    critic = ScriptedCritic()
    critique = await critic.chat(critic_messages(INITIAL_PROMPT, ["<trace/>"], 1.0))
    assert INSTRUCTION in critique
    edited = parse_template(await critic.chat(editor_messages(INITIAL_PROMPT, critique)))
    assert INSTRUCTION in edited and edited.count("{schema}") == 1 and edited.count("{question}") == 1
    assert edited.endswith("Write a SQL query that answers the question.")
    assert ScriptedCritic.edit(edited) == edited
    assert (critic.critiques, critic.edits) == (1, 1)


def test_train_py_takes_spider_instead_of_the_generated_data(spider_dir: Path, tmp_path: Path) -> None:
    datasets, parse_args = sql.train.datasets, sql.train.parse_args
    settings = parse_args(["--spider", str(spider_dir), "--train-size", "5", "--val-size", "3"])
    train, heldout = datasets(settings, tmp_path)
    assert [t["split"] for t in train] == ["train"] and [t["db_id"] for t in train] == ["pets"]
    assert [t["split"] for t in heldout] == ["heldout_schemas"] * 3
    generated = datasets(parse_args(["--train-size", "5", "--val-size", "3"]), tmp_path)
    assert [len(generated[0]), len(generated[1])] == [5, 6]
    assert {t["split"] for t in generated[1]} == {"heldout_questions", "heldout_schemas"}


def test_the_cpu_and_gpu_configs_hold_the_same_settings_and_valid_engines() -> None:
    from agentbolt.engines import EngineSpec

    HERE, parse_args = sql.train.HERE, sql.train.parse_args

    cpu = parse_args(["--config", str(HERE / "cpu.yaml")])
    gpu = parse_args(["--config", str(HERE / "gpu.yaml")])
    assert set(cpu) == set(gpu)  # one code path: only values differ
    assert EngineSpec(**cpu["engine"]).kind == "transformers" and cpu["protocol"] == "text"
    spec = EngineSpec(**gpu["engine"])
    assert spec.kind == "vllm" and spec.tool_parser == "hermes" and gpu["protocol"] == "tools"
    assert gpu["policy_model"] == spec.model
