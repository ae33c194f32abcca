"""GRPO's progress line: what moves from step to step, not the loss."""

from __future__ import annotations

from agentbolt.algorithms.grpo.step_progress import describe_step


def test_the_progress_line_shows_what_moves_not_the_near_zero_loss() -> None:
    line = describe_step({"reward/mean": 0.5, "train/loss": -1e-9, "train/kl": 0.0012, "train/clip_fraction": 0.031,
                          "train/grad_norm": 0.4123, "train/entropy": 1.234})
    assert line == "reward 0.500 · kl 1.20e-03 · clip 3.1% · |g| 0.412 · entropy 1.234"
    assert "loss" not in describe_step({"train/loss": -0.0, "train/kl": None})


def test_the_progress_line_shows_the_training_time_so_far_beside_the_steps_own() -> None:
    assert describe_step({"time/step_s": 31.2, "time/train_s": 312.4}) == "step 31s · training 312s"
