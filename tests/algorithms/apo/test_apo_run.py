"""APO end to end: a real Trainer (in-process runners), a real store and a scripted
critic/editor over HTTP. The agent's reward says whether the prompt has the word the
task needs, so what APO should find is known."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentbolt
from agentbolt import JsonResource, PromptTemplate
from agentbolt.algorithms import APO
from agentbolt.algorithms.apo import ChatCallError, load_history
from agentbolt.store.memory import MemoryStore
from algorithms.apo.scripted_llm import serve_scripted_llm
from algorithms.apo.world import (
    CALLS,
    INITIAL,
    config,
    critic,
    resources,
    run_apo,
    task,
    tasks,
)


def test_beam_search_climbs_keeps_the_beam_and_records_every_candidate(tmp_path: Path) -> None:
    store = MemoryStore()
    with serve_scripted_llm() as llm:
        apo = APO(config(tmp_path, rounds=3), initial_prompt=INITIAL, critic=critic(llm.base_url))
        result = run_apo(apo, tasks(), tasks(), store=store, resources={"judge": JsonResource(value="strict")})

    # the search climbs: each round adds a needed word; 3 of the 4 words after 3 rounds
    assert result.before is not None and result.before.mean_reward == 0.0
    assert result.best.mean_val == 0.75 == max(c.mean_val or 0 for c in result.candidates)
    assert result.after is not None and result.after.mean_reward == 0.75
    assert apo.best_prompt == PromptTemplate(template=result.best.template)
    assert result.rounds == 3 and [r.round for r in result.history] == [1, 2, 3]

    # the beam: at most beam_width, and the best so far always survives
    by_id = {c.candidate_id: c for c in result.candidates}
    for record in result.history:
        assert 1 <= len(record.beam) <= 2
        so_far = [c for c in result.candidates if c.round <= record.round]
        assert by_id[record.beam[0]].mean_val == max(c.mean_val or 0 for c in so_far)
        assert all(by_id[cid].parent_id in [*result.history[record.round - 2].beam] if record.round > 1 else
                   by_id[cid].parent_id == "c0" for cid in record.new)

    # lineage: every child names its parent and the critique that produced it
    for c in result.candidates[1:]:
        parent = by_id[c.parent_id]  # type: ignore[index]
        assert c.round == parent.round + 1 and c.critique and "Add the word" in c.critique
        assert c.template.startswith(parent.template)

    # stored: apo_history.jsonl, best_prompt.txt/json, metrics per round
    history = load_history(result.run_dir)
    assert [(c.candidate_id, c.val_scores) for c in history] == [(c.candidate_id, c.val_scores)
                                                                 for c in result.candidates]
    assert result.prompt_file == result.run_dir / "best_prompt.txt"
    assert result.prompt_file.read_text() == result.best.template
    saved = json.loads((result.run_dir / "best_prompt.json").read_text())
    assert saved["candidate_id"] == result.best.candidate_id and saved["mean_val"] == 0.75
    rounds = [json.loads(line) for line in (result.run_dir / "metrics.jsonl").read_text().splitlines()]
    logged = {r["step"]: r for r in rounds if "best_mean_val" in r}
    assert sorted(logged) == [0, 1, 2, 3] and logged[3]["best_mean_val"] == 0.75

    # and in the store: one resources version per candidate, with its lineage; the best last
    versions = resources(store)
    for c in result.candidates:
        published = [v for v in versions if v.metadata.get("apo", {}).get("candidate_id") == c.candidate_id]
        assert published and published[0].resources["prompt_template"].template == c.template
        assert published[0].metadata["apo"]["parent_id"] == c.parent_id
        assert published[0].metadata["apo"]["critique"] == c.critique
    assert versions[-1].metadata["apo"]["best"] is True
    assert versions[-1].resources["prompt_template"].template == result.best.template
    assert all(v.resources["judge"] == JsonResource(value="strict") for v in versions)  # other resources kept

    # rollouts were pinned: each candidate's template ran exactly its 8 validation items
    val_runs = CALLS.of("val")
    assert sorted(set(val_runs)) == sorted(c.template for c in result.candidates)
    assert all(val_runs.count(c.template) == 8 for c in result.candidates)


def test_an_edit_that_breaks_a_placeholder_is_retried_and_never_published(tmp_path: Path) -> None:
    store = MemoryStore()
    with serve_scripted_llm() as llm:
        llm.drop_placeholder = 1
        apo = APO(config(tmp_path, rounds=1, branch_factor=1), initial_prompt=INITIAL, critic=critic(llm.base_url))
        result = run_apo(apo, tasks(), tasks(), store=store)
        editor_bodies = llm.editor_requests
    assert len(editor_bodies) == 2  # the bad reply, then the retry
    retry = editor_bodies[1]["messages"][-1]["content"]
    assert "rejected" in retry and "missing {rooms}" in retry
    assert result.history[0].metrics["n_rejected_edits"] == 1
    assert result.history[0].metrics["n_dropped_edits"] == 0
    assert len(result.candidates) == 2 and "{rooms}" in result.candidates[1].template
    assert all("{rooms}" in v.resources["prompt_template"].template for v in resources(store))
    assert all("{rooms}" in t for _, t in CALLS.items)


def test_an_editor_that_never_keeps_the_placeholders_produces_nothing(tmp_path: Path) -> None:
    with serve_scripted_llm() as llm:
        llm.drop_placeholder = 100
        apo = APO(config(tmp_path, rounds=1, max_edit_retries=1), initial_prompt=INITIAL,
                  critic=critic(llm.base_url))
        result = run_apo(apo, tasks(), tasks())
        assert len(llm.editor_requests) == 4  # 2 branches x (1 try + 1 retry)
    metrics = result.history[0].metrics
    assert (metrics["n_rejected_edits"], metrics["n_dropped_edits"], metrics["n_new"]) == (4, 2, 0)
    assert [c.candidate_id for c in result.candidates] == ["c0"] and result.best.candidate_id == "c0"


def test_the_best_prompt_is_chosen_by_validation_reward_not_training_reward(tmp_path: Path) -> None:
    train = [task("alpha", i) for i in range(4)]
    val = [task("beta", i, forbids="alpha") for i in range(4)]  # what helps training hurts validation
    with serve_scripted_llm() as llm:
        apo = APO(config(tmp_path, rounds=2), initial_prompt=INITIAL + " Think about beta.",
                  critic=critic(llm.base_url))
        result = run_apo(apo, train, val)
    root, child = result.candidates[0], result.candidates[1]
    assert "alpha" in child.template
    assert child.mean_train == 1.0 and root.mean_train == 0.0  # the child wins on training rollouts...
    assert child.mean_val == 0.0 and root.mean_val == 1.0  # ...and loses on validation
    assert result.best.candidate_id == root.candidate_id and apo.best_prompt.template == root.template  # type: ignore[union-attr]
    assert result.history[1].metrics["n_parents_without_failures"] == 1  # the child had nothing left to fix


def test_failed_rollouts_are_counted_and_left_out_not_scored_zero(tmp_path: Path) -> None:
    val = [task("quiet", 0), task("quiet", 1, crash=True), task("desk", 2)]
    with serve_scripted_llm() as llm:
        apo = APO(config(tmp_path, rounds=1), initial_prompt=INITIAL + " Keep it quiet.",
                  critic=critic(llm.base_url))
        result = run_apo(apo, tasks(), val)
    for c in result.candidates:
        assert 1 not in c.val_scores and c.n_failed == 1
    root = result.candidates[0]
    assert root.val_scores == {0: 1.0, 2: 0.0} and root.mean_val == 0.5  # not 1/3
    assert result.before is not None and result.before.n_failed == 1 and result.before.mean_reward == 0.5


def test_pareto_selection_runs_and_keeps_only_candidates_best_somewhere(tmp_path: Path) -> None:
    with serve_scripted_llm() as llm:
        apo = APO(config(tmp_path, rounds=2, selection="pareto", beam_width=3), initial_prompt=INITIAL,
                  critic=critic(llm.base_url))
        result = run_apo(apo, tasks(), tasks())
    by_id = {c.candidate_id: c for c in result.candidates}
    for record in result.history:
        beam = [by_id[c] for c in record.beam]
        assert 1 <= len(beam) <= 3
        for c in beam:  # each survivor tops some validation item among what it competed with
            assert any(score == 1.0 for score in c.val_scores.values())


def test_a_rerun_resumes_after_the_last_completed_round(tmp_path: Path) -> None:
    cfg = config(tmp_path, rounds=1, eval_before=False, eval_after=False)
    with serve_scripted_llm() as llm:
        first = run_apo(APO(cfg, initial_prompt=INITIAL, critic=critic(llm.base_url)), tasks(), tasks())
        critic_calls_first = len(llm.critic_requests)
        assert first.rounds == 1 and critic_calls_first == 2
        second = run_apo(APO(cfg.model_copy(update={"rounds": 2}), initial_prompt=INITIAL,
                             critic=critic(llm.base_url)), tasks(), tasks())
        critic_calls_second = len(llm.critic_requests) - critic_calls_first
    beam_after_1 = first.history[-1].beam
    assert critic_calls_second == 2 * len(beam_after_1)  # only round 2 was computed
    assert second.rounds == 2 and [r.round for r in second.history] == [2]
    assert [(c.candidate_id, c.val_scores) for c in second.candidates[: len(first.candidates)]] == [
        (c.candidate_id, c.val_scores) for c in first.candidates]
    new_templates = {c.template for c in second.candidates if c.round == 2}
    assert new_templates and set(CALLS.of("val")) == new_templates  # scored candidates were not run again
    assert {t for t in CALLS.of("train")} <= {c.template for c in first.candidates}  # round 2's parents


def test_a_critic_that_is_briefly_unavailable_is_retried_and_a_refusal_stops_the_run(tmp_path: Path) -> None:
    with serve_scripted_llm() as llm:
        llm.fail_next = [503, 429]
        result = run_apo(APO(config(tmp_path, rounds=1, branch_factor=1), initial_prompt=INITIAL,
                             critic=critic(llm.base_url)), tasks(), tasks())
        assert len(result.candidates) == 2
        llm.fail_next = [401]
        with pytest.raises(ChatCallError, match="HTTP 401.*api_key"):
            run_apo(APO(config(tmp_path / "b", rounds=1), initial_prompt=INITIAL, critic=critic(llm.base_url)),
                    tasks(), tasks())


def test_the_prompt_to_start_from_defaults_to_the_published_resource(tmp_path: Path) -> None:
    with serve_scripted_llm() as llm:
        apo = APO(config(tmp_path, rounds=1, prompt_name="booking_prompt", eval_after=False),
                  critic=critic(llm.base_url))
        trainer = agentbolt.Trainer(algorithm=apo, resources={"booking_prompt": PromptTemplate(template=INITIAL)})
        result = trainer.fit(lambda task, booking_prompt: float(task["needs"] in booking_prompt.template),
                             tasks(), tasks())
    assert result.candidates[0].template == INITIAL and result.best.mean_val == 0.25


def test_a_broken_agent_stops_apo_with_its_error(tmp_path: Path) -> None:
    """Every rollout crashes: the first validation stops the run, naming the error."""
    from agentbolt.algorithms.failures import NoSuccessfulRolloutsError

    crashing = [task(w, i, crash=True) for i, w in enumerate(("quiet", "desk", "quiet"))]
    with serve_scripted_llm() as llm:
        apo = APO(config(tmp_path, rounds=2), initial_prompt=INITIAL, critic=critic(llm.base_url))
        with pytest.raises(NoSuccessfulRolloutsError, match=r"APO validation .*: none of 3 rollouts succeeded"):
            run_apo(apo, crashing, crashing)
