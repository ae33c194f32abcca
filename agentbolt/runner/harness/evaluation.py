"""From how a harness's program ended to its reward: the evaluator's process (here on the
workspace the program left, or inside the program's environment after it), the reward
it printed, and for a program without an evaluator the reward it reported itself.

The evaluator never gets the agent's gateway URL or token (the grader is not the agent);
it gets the whole task, the program's exit code and output, the workspace and the tests
the program never saw.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from agentbolt.runner.harness.errors import EvaluatorError, ProgramFailedError
from agentbolt.runner.harness.isolated import IsolatedExecutor
from agentbolt.runner.harness.local import ProcessResult, ProcessSpec
from agentbolt.runner.harness.outcome import emit_reward_of, has_reward, stderr_hint
from agentbolt.runner.harness.reward import Reward, RewardFormatError, last_line, parse_reward
from agentbolt.runner.harness.sandbox import SandboxSession
from agentbolt.runner.harness.untrusted import write_new
from agentbolt.tracing.context import AttemptContext

__all__ = ["host_evaluator", "inside_evaluator", "program_reward", "verdict"]


def host_evaluator(
    argv: list[str], *, ctx: AttemptContext, fields: Mapping[str, str], program: ProcessResult, tmp: Path,
    box: SandboxSession | None, env: dict[str, str], tests: Path | None, cwd: str | None, timeout: float | None,
    stderr_tail_bytes: int,
) -> ProcessSpec:
    """The evaluator run on this machine after ``program``: its output on stdin and in
    ``$AGENTBOLT_OUTPUT_FILE``, the workspace it left in ``$AGENTBOLT_WORKSPACE``.
    ``env`` is the evaluator's environment so far (changed in place)."""
    # a directory the program never knew: nothing can be planted at the file's name
    output = Path(tempfile.mkdtemp(prefix="eval-", dir=tmp)) / "output"
    write_new(output, program.stdout)
    env.update(
        AGENTBOLT_ROLLOUT_ID=ctx.rollout_id,
        AGENTBOLT_ATTEMPT_ID=ctx.attempt_id,
        AGENTBOLT_TASK=fields["task"],
        AGENTBOLT_EXIT_CODE=str(program.exit_code),
        AGENTBOLT_OUTPUT_FILE=str(output),
    )
    if box is not None:  # the workspace the program left, read outside the sandbox
        env["AGENTBOLT_WORKSPACE"] = str(box.workspace)
    elif program.workspace is not None:  # copied back by an isolated executor
        env["AGENTBOLT_WORKSPACE"] = str(program.workspace)
    if tests is not None:
        env["AGENTBOLT_TESTS"] = str(tests)
    return ProcessSpec(argv=argv, env=env, cwd=cwd, timeout=timeout, stdin=program.stdout,
                       stderr_tail_bytes=stderr_tail_bytes)


def inside_evaluator(
    argv: list[str], *, ctx: AttemptContext, fields: Mapping[str, str], executor: IsolatedExecutor,
    env: Mapping[str, str], tests: Path | None, timeout: float | None, stderr_tail_bytes: int,
) -> ProcessSpec:
    """The evaluator run by ``executor`` inside the program's environment, after it
    (Harbor's order), with the tests copied in only then."""
    return ProcessSpec(
        argv=argv,
        env={**env, "AGENTBOLT_ROLLOUT_ID": ctx.rollout_id, "AGENTBOLT_ATTEMPT_ID": ctx.attempt_id,
             "AGENTBOLT_TASK": fields["task"], "AGENTBOLT_WORKSPACE": executor.program_workspace,
             **({"AGENTBOLT_TESTS": executor.program_tests} if tests else {})},
        timeout=timeout,
        stderr_tail_bytes=stderr_tail_bytes,
    )


def verdict(spec: ProcessSpec, result: ProcessResult, timeout: float | None) -> Reward:
    """The reward the evaluator printed (its last line), or :class:`EvaluatorError`."""
    if result.timed_out:
        raise EvaluatorError(f"the evaluator {spec.argv[0]} ran longer than {timeout} s" + stderr_hint(result))
    if result.exit_code != 0:
        raise EvaluatorError(f"the evaluator {spec.argv[0]} exited with code {result.exit_code}" + stderr_hint(result))
    text = last_line(result.stdout.decode("utf-8", "replace"))
    try:
        return parse_reward(text, source=f"the last line the evaluator {spec.argv[0]} printed")
    except RewardFormatError as exc:
        raise EvaluatorError(str(exc)) from None


async def program_reward(ctx: AttemptContext, argv: Sequence[str], result: ProcessResult,
                         written: Callable[[], Reward | None], require_reward: bool) -> None:
    """A program without an evaluator: the reward it wrote to its file (emitted here) or
    posted itself; :class:`ProgramFailedError` when it left none (``require_reward``),
    left a bad one, or failed without one."""
    try:
        reward = written()
    except RewardFormatError as exc:
        raise ProgramFailedError(str(exc)) from None
    if reward is not None:
        emit_reward_of(reward)
        return
    posted = await has_reward(ctx)
    if result.exit_code != 0 and not posted:
        raise ProgramFailedError(f"{argv[0]} exited with code {result.exit_code} without a reward"
                                 + stderr_hint(result))
    if not posted and require_reward:
        raise ProgramFailedError(
            f"{argv[0]} exited without reporting a reward: give the harness an evaluator, or have the "
            "program write $AGENTBOLT_REWARD_FILE or POST {\"value\": x} to $AGENTBOLT_REWARD_URL "
            "(or pass require_reward=False)"
        )
