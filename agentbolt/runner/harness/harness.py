"""``Harness``: an unmodified program as an agent, one run per rollout.

::

    harness = Harness(
        "python solve.py --question {question}",      # {placeholders} from the task
        evaluator="python grade.py --answer {answer}",  # prints the reward
        timeout=120, concurrency=4,
    )
    Trainer(algorithm=...).fit(harness, dataset)

The program knows nothing about agentbolt. Its environment says where its model is
(``OPENAI_BASE_URL``: the rollout's gateway URL, ``OPENAI_API_KEY``: a token scoped to
this attempt) and what to do (``AGENTBOLT_TASK``: the task as JSON,
``AGENTBOLT_ROLLOUT_ID``, ``AGENTBOLT_ATTEMPT_ID``). It may report its own reward to
``AGENTBOLT_REWARD_URL`` (``POST {"value": x}`` with the token as bearer) or into
``$AGENTBOLT_REWARD_FILE``, but an ``evaluator`` command is preferred: the agent under
training should not grade itself. The evaluator runs after the program exits, with the
program's stdout on its stdin and in ``$AGENTBOLT_OUTPUT_FILE``, the exit code in
``$AGENTBOLT_EXIT_CODE`` and the task in ``$AGENTBOLT_TASK`` (no model token); the last
line it prints is the reward.

Every run records an ``agentbolt.annotation`` span with the exit code, the duration and
the tail of stderr (and the same on the attempt's metadata). Failures are sorted into
"try again" and "the program's fault" (see :mod:`agentbolt.runner.harness.errors`).

Programs run in a sandbox by default (:mod:`agentbolt.runner.harness.sandbox`): a fresh
workspace, the gateway and nothing else; what it blocks is recorded as
``agentbolt.sandbox`` spans. Where it cannot be built the attempt fails with the reason,
unless ``sandbox=False`` says to run programs unsandboxed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import shlex
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson

from agentbolt import semconv
from agentbolt.runner.agent import LitAgent
from agentbolt.runner.harness.calls import refused_calls
from agentbolt.runner.harness.credentials import (
    Credentials,
    attempt_credentials,
    ensure_gateway,
    rollout_base_url,
)
from agentbolt.runner.harness.errors import (
    EvaluatorError,
    GatewayRefusedError,
    HarnessConfigError,
    HarnessKilledError,
    HarnessStartError,
    HarnessTimeoutError,
    ProgramFailedError,
)
from agentbolt.runner.harness.local import (
    Executor,
    LocalExecutor,
    ProcessResult,
    ProcessSpec,
    ProgramStartError,
)
from agentbolt.runner.harness.profiles import HarnessProfile, ProfileRun, RunContext, get_profile
from agentbolt.runner.harness.profiles.install import installed_executable
from agentbolt.runner.harness.reward import (
    Reward,
    RewardFormatError,
    last_line,
    parse_reward,
    read_reward_file,
)
from agentbolt.runner.harness.sandbox import Sandbox, SandboxSession
from agentbolt.runner.harness.sandbox.events import SandboxEvent, emit_events
from agentbolt.runner.harness.sandbox.workspace import write_files
from agentbolt.tracing.context import AttemptContext, require_context
from agentbolt.tracing.emitters import emit_annotation, emit_reward

__all__ = ["Harness", "render_command"]

log = logging.getLogger("agentbolt.runner.harness")

Command = str | Sequence[str]


class Harness(LitAgent):
    """Run ``command`` once per rollout as a subprocess (see the module docstring).

    * ``command`` — a shell-like string (split with :func:`shlex.split` *before* the
      placeholders are filled, so a value with spaces stays one argument; no shell is
      involved) or a list of arguments. ``{name}`` is the task's field ``name`` (tasks
      that are JSON objects), ``{task}`` the task as JSON, ``{rollout_id}``,
      ``{attempt_id}``; ``{{`` and ``}}`` are literal braces.
    * ``evaluator`` — a command in the same form, run after the program; prints the reward.
    * ``env`` — extra environment variables for the program and the evaluator; they
      override agentbolt's own (an ``OPENAI_BASE_URL`` here bypasses the gateway, so
      the calls go unrecorded). ``inherit_env`` — start from this process's
      environment (default) or from an empty one.
    * ``cwd`` — working directory; ``timeout`` — seconds before the program's whole
      process group is killed (the attempt then fails as retryable);
      ``evaluator_timeout`` likewise for the evaluator.
    * ``concurrency`` — most programs running at once in this runner process (the
      runner's own concurrency also applies).
    * ``server_url`` — the agentbolt server whose gateway the program calls; needed
      only when the runner's store is not an HttpStore (see
      :mod:`agentbolt.runner.harness.credentials`).
    * ``require_reward`` — a program that exits without any reward fails the attempt
      (default); set False for programs run only to collect traces.
    * ``executor`` — where programs run (default: :class:`LocalExecutor`).
    * ``sandbox`` — a :class:`~agentbolt.runner.harness.sandbox.Sandbox` (its workspace,
      hidden paths, read-only paths, limits); ``True`` (default) is ``Sandbox()``;
      ``False`` runs programs unsandboxed, with this process's rights.
    * ``profile`` — a real harness run through its profile (made by :meth:`for_`).
    """

    def __init__(
        self,
        command: Command,
        *,
        evaluator: Command | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool = True,
        cwd: str | os.PathLike[str] | None = None,
        timeout: float | None = 600.0,
        evaluator_timeout: float | None = 60.0,
        concurrency: int | None = None,
        server_url: str | None = None,
        require_reward: bool = True,
        stderr_tail_bytes: int = 4000,
        executor: Executor | None = None,
        name: str | None = None,
        sandbox: Sandbox | bool = True,
        profile: ProfileRun | None = None,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (or None for no limit), got {concurrency}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds (or None), got {timeout}")
        self.command = _split(command, "command")
        self.evaluator = _split(evaluator, "evaluator") if evaluator is not None else None
        self.env = dict(env or {})
        self.inherit_env = inherit_env
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.timeout = timeout
        self.evaluator_timeout = evaluator_timeout
        self.concurrency = concurrency
        self.server_url = server_url.rstrip("/") if server_url else None
        self.require_reward = require_reward
        self.stderr_tail_bytes = stderr_tail_bytes
        self.executor: Executor = executor if executor is not None else LocalExecutor()
        self.name = name or f"harness:{os.path.basename(self.command[0])}"
        if sandbox is True:
            sandbox = Sandbox()
        self.sandbox: Sandbox | None = sandbox or None
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self._gateways_seen: set[str] = set()
        self.profile = profile

    @classmethod
    def for_(
        cls,
        harness: str | HarnessProfile,
        *,
        task: str,
        model: str = "agentbolt",
        executable: str | os.PathLike[str] | None = None,
        cache: str | os.PathLike[str] | None = None,
        sandbox: Sandbox | bool = True,
        **options: Any,
    ) -> Harness:
        """A real coding agent, unmodified, as this harness: ``harness`` is a profile's
        name (``"codex"``, ``"claude-code"``, ``"mini-swe-agent"``, ``"opencode"``,
        ``"aider"``, ``"openhands"``; see :mod:`agentbolt.runner.harness.profiles`) or a
        profile with settings of its own. ``task`` is the task text, a template of the
        task's fields (``"{problem_statement}"``); ``model`` the name it asks the
        gateway for. The program is the one installed in ``cache`` (default
        ``$AGENTBOLT_HARNESS_CACHE``) unless ``executable`` names it; the sandbox is
        given what the profile needs mounted, and at least the memory it needs.
        ``options``: :class:`Harness`'s own (``evaluator``, ``timeout``, ``env``, ...)."""
        profile = get_profile(harness) if isinstance(harness, str) else harness
        program = Path(executable).absolute() if executable else installed_executable(
            profile, Path(cache) if cache else None)
        if sandbox is True:
            sandbox = Sandbox()
        if sandbox:
            limits = sandbox.limits
            if limits.memory_mb is not None and limits.memory_mb < profile.memory_mb:
                limits = limits.model_copy(update={"memory_mb": profile.memory_mb})
            sandbox = sandbox.model_copy(update={"read_only": (*sandbox.read_only, *profile.mounts(program)),
                                                 "limits": limits})
        options.setdefault("name", f"harness:{profile.name}")
        return cls([str(program)], sandbox=sandbox, profile=ProfileRun(profile, str(program), task, model), **options)

    def __repr__(self) -> str:
        return f"Harness({shlex.join(self.command)!r})"

    def __getstate__(self) -> dict[str, Any]:  # runner processes get a copy, without this process's locks
        state = dict(self.__dict__)
        state.pop("_slots", None)
        state["_gateways_seen"] = set()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._slots = weakref.WeakKeyDictionary()

    # ------------------------------------------------------------------ the agent
    # the runner fills the parameters a LitAgent method names; this one names only the task
    async def training_rollout(self, task: Any) -> float | None:  # type: ignore[override]
        """Run the program for this rollout; rewards are emitted here, so returns None."""
        ctx = require_context()
        creds = await attempt_credentials(ctx, self.server_url)
        async with self._slot():
            with tempfile.TemporaryDirectory(prefix="agentbolt-harness-") as tmp:
                if self.sandbox is None:
                    await self._run(ctx, task, creds, Path(tmp), None)
                    return None
                box = SandboxSession(self.sandbox, Path(tmp), task, creds.server_url, ctx.rollout_id, ctx.attempt_id)
                async with box:
                    await self._run(ctx, task, creds, Path(tmp), box)
                return None

    async def _run(
        self, ctx: AttemptContext, task: Any, creds: Credentials, tmp: Path, box: SandboxSession | None
    ) -> None:
        fields = _placeholders(task, ctx)
        reward_file = box.reward_file if box else tmp / "reward"
        await ensure_gateway(
            creds, rollout_base_url(creds.server_url, ctx.rollout_id, ctx.attempt_id), self._gateways_seen
        )
        server_url = box.program_server_url if box else creds.server_url  # as the program reaches it
        env = dict(os.environ) if self.inherit_env else {}
        env.update(
            OPENAI_BASE_URL=rollout_base_url(server_url, ctx.rollout_id, ctx.attempt_id),
            OPENAI_API_KEY=creds.token,
            AGENTBOLT_SERVER_URL=server_url,
            AGENTBOLT_ROLLOUT_ID=ctx.rollout_id,
            AGENTBOLT_ATTEMPT_ID=ctx.attempt_id,
            AGENTBOLT_TASK=fields["task"],
            AGENTBOLT_REWARD_URL=(
                f"{server_url}/v1/rollouts/{quote(ctx.rollout_id, safe='')}"
                f"/attempts/{quote(ctx.attempt_id, safe='')}/reward"
            ),
            AGENTBOLT_REWARD_FILE=box.program_reward_file if box else str(reward_file),
        )
        argv, stdin = render_command(self.command, fields), None
        if self.profile is not None:
            argv, stdin = self._launch_profile(self.profile, fields, env, creds, tmp, box)
        env.update(self.env)  # explicit settings win (e.g. another OPENAI_BASE_URL: then calls are not recorded)
        spec = ProcessSpec(
            argv=argv,
            env=env,
            cwd=self.cwd,
            timeout=self.timeout,
            stdin=stdin,
            stderr_tail_bytes=self.stderr_tail_bytes,
        )
        events: list[SandboxEvent] = []
        if box is None:
            result = await self._execute(spec, "program")
        else:
            evaluator = render_command(self.evaluator, fields) if self.evaluator is not None else None
            try:
                result, events = await box.run(self.executor, spec, evaluator, self.cwd)
            except ProgramStartError as exc:
                raise HarnessStartError(f"the program could not start: {exc}") from exc
        await _record(ctx, result, events, box)
        refused = await refused_calls(ctx)
        if refused is not None:  # the model never answered it: not the program's score (runner/harness/calls.py)
            raise GatewayRefusedError(refused.reason, retryable=refused.transient)
        if result.timed_out:
            raise HarnessTimeoutError(
                f"{spec.argv[0]} ran longer than {self.timeout} s; its process group was killed"
                + _stderr_hint(result)
            )
        if result.killed_by_signal:
            raise HarnessKilledError(
                f"{spec.argv[0]} was killed by signal {-(result.exit_code or 0)}" + _stderr_hint(result)
            )
        if self.evaluator is not None:
            _emit(await self._evaluate(ctx, fields, result, tmp, box))
            return
        try:
            written = read_reward_file(reward_file)
        except RewardFormatError as exc:
            raise ProgramFailedError(str(exc)) from None
        if written is not None:
            _emit(written)
            return
        posted = await _has_reward(ctx)
        if result.exit_code != 0 and not posted:
            raise ProgramFailedError(
                f"{spec.argv[0]} exited with code {result.exit_code} without a reward" + _stderr_hint(result)
            )
        if not posted and self.require_reward:
            raise ProgramFailedError(
                f"{spec.argv[0]} exited without reporting a reward: give the harness an evaluator, or have the "
                "program write $AGENTBOLT_REWARD_FILE or POST {\"value\": x} to $AGENTBOLT_REWARD_URL "
                "(or pass require_reward=False)"
            )
        return

    def _launch_profile(
        self, run: ProfileRun, fields: dict[str, str], env: dict[str, str], creds: Credentials, tmp: Path,
        box: SandboxSession | None,
    ) -> tuple[list[str], bytes | None]:
        """The profile's command line and stdin for this rollout; its environment goes
        into ``env`` and its config files into a fresh ``HOME``."""
        home = box.program_home if box else str(tmp / "home")
        context = RunContext(
            openai_base_url=env["OPENAI_BASE_URL"], api_key=creds.token, home=home,
            workdir=box.program_workspace if box else (self.cwd or os.getcwd()),
            task_text=render_text(run.task, fields), model=run.model, executable=run.executable,
        )
        launch = run.profile.launch(context)
        if box is not None:
            box.prepare_home(launch.files)
        else:
            write_files(tmp / "home", launch.files)
        env.update(launch.env)
        env["HOME"] = home
        return list(launch.argv), launch.stdin

    async def _evaluate(
        self, ctx: AttemptContext, fields: dict[str, str], program: ProcessResult, tmp: Path, box: SandboxSession | None
    ) -> Reward:
        assert self.evaluator is not None
        output = tmp / "output"
        output.write_bytes(program.stdout)
        env = dict(os.environ) if self.inherit_env else {}
        env.update(self.env)  # never the agent's gateway URL or token: the grader is not the agent
        env.update(
            AGENTBOLT_ROLLOUT_ID=ctx.rollout_id,
            AGENTBOLT_ATTEMPT_ID=ctx.attempt_id,
            AGENTBOLT_TASK=fields["task"],
            AGENTBOLT_EXIT_CODE=str(program.exit_code),
            AGENTBOLT_OUTPUT_FILE=str(output),
        )
        if box is not None:  # the workspace the program left, read outside the sandbox
            env["AGENTBOLT_WORKSPACE"] = str(box.workspace)
        spec = ProcessSpec(
            argv=render_command(self.evaluator, fields),
            env=env,
            cwd=self.cwd,
            timeout=self.evaluator_timeout,
            stdin=program.stdout,
            stderr_tail_bytes=self.stderr_tail_bytes,
        )
        result = await self._execute(spec, "evaluator")
        if result.timed_out:
            raise EvaluatorError(
                f"the evaluator {spec.argv[0]} ran longer than {self.evaluator_timeout} s" + _stderr_hint(result)
            )
        if result.exit_code != 0:
            raise EvaluatorError(
                f"the evaluator {spec.argv[0]} exited with code {result.exit_code}" + _stderr_hint(result)
            )
        text = last_line(result.stdout.decode("utf-8", "replace"))
        try:
            return parse_reward(text, source=f"the last line the evaluator {spec.argv[0]} printed")
        except RewardFormatError as exc:
            raise EvaluatorError(str(exc)) from None

    async def _execute(self, spec: ProcessSpec, what: str) -> ProcessResult:
        try:
            return await self.executor.run(spec)
        except ProgramStartError as exc:
            raise HarnessStartError(f"the {what} could not start: {exc}") from exc

    def _slot(self) -> asyncio.Semaphore | _NoLimit:
        if self.concurrency is None:
            return _NoLimit()
        loop = asyncio.get_running_loop()
        slot = self._slots.get(loop)
        if slot is None:
            slot = self._slots[loop] = asyncio.Semaphore(self.concurrency)
        return slot


class _NoLimit:
    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, *exc: object) -> None:
        return None


# ---------------------------------------------------------------------- templates
def _split(command: Command, what: str) -> list[str]:
    argv = shlex.split(command) if isinstance(command, str) else [str(a) for a in command]
    if not argv:
        raise ValueError(f"the harness {what} is empty: give a command line such as 'python agent.py {{question}}'")
    return argv


def _placeholders(task: Any, ctx: AttemptContext) -> dict[str, str]:
    fields: dict[str, str] = {}
    if isinstance(task, Mapping):
        for key, value in task.items():
            fields[str(key)] = value if isinstance(value, str) else orjson.dumps(value).decode()
    fields["task"] = orjson.dumps(task).decode()
    fields["rollout_id"] = ctx.rollout_id
    fields["attempt_id"] = ctx.attempt_id
    return fields


class _Fields(dict):
    def __missing__(self, key: str) -> str:
        have = ", ".join(sorted(self)) or "none"
        raise HarnessConfigError(
            f"the command template uses {{{key}}} but the task has no field {key!r} (available: {have}); "
            "write {{ and }} for literal braces"
        )


def render_text(template: str, fields: Mapping[str, str]) -> str:
    """Fill ``{placeholders}`` in ``template`` (a task text) from ``fields``."""
    return render_command([template], fields)[0]


def render_command(template: Sequence[str], fields: Mapping[str, str]) -> list[str]:
    """Fill ``{placeholders}`` in each argument of ``template`` from ``fields``."""
    lookup = _Fields(fields)
    try:
        return [arg.format_map(lookup) for arg in template]
    except (ValueError, IndexError) as exc:
        raise HarnessConfigError(f"bad command template {list(template)!r}: {exc}") from None


# ---------------------------------------------------------------------- outcome
async def _record(
    ctx: AttemptContext, result: ProcessResult, events: list[SandboxEvent], box: SandboxSession | None
) -> None:
    facts: dict[str, Any] = {
        "harness.exit_code": result.exit_code if result.exit_code is not None else -1,
        "harness.duration_s": round(result.duration, 3),
        "harness.timed_out": result.timed_out,
        "harness.stderr_tail": result.stderr_tail,
        "harness.sandboxed": box is not None,
    }
    metadata: dict[str, Any] = {"harness": facts}
    if box is not None:
        facts["harness.sandbox_startup_ms"] = round(box.startup_s * 1000, 1)
        metadata["sandbox"] = {"events": [e.as_dict() for e in events], "hidden": box.left_out}
        emit_events(events)
        for e in events:
            log.info("sandbox of attempt %s: %s (x%d): %s", ctx.attempt_id, e.kind, e.count, e.detail)
    emit_annotation(**facts)
    try:
        await ctx.store.update_attempt(ctx.rollout_id, ctx.attempt_id, metadata=metadata)
    except Exception as exc:  # noqa: BLE001 - the span above has it too; metadata is a convenience
        log.debug("could not record harness metadata on attempt %s: %s", ctx.attempt_id, exc)


async def _has_reward(ctx: AttemptContext) -> bool:
    await ctx.tracer.flush(ctx.attempt_id)
    spans = await ctx.store.get_spans(ctx.rollout_id, ctx.attempt_id)
    return any(s.name == semconv.REWARD_SPAN for s in spans)


def _emit(reward: Reward) -> None:
    if list(reward.rewards) == ["reward"]:
        emit_reward(reward.value)
    else:
        emit_reward(reward.rewards, primary=reward.primary)


def _stderr_hint(result: ProcessResult) -> str:
    tail = result.stderr_tail.strip()
    if not tail:
        return ""
    lines = tail.splitlines()[-10:]
    return "; stderr ends with:\n" + "\n".join(lines)
