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
this attempt) and what to do (``AGENTBOLT_TASK``: the task as JSON, without the fields
it may not see — those the evaluator grades with, see :meth:`Harness.task_view` —,
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

An :class:`~agentbolt.runner.harness.isolated.IsolatedExecutor` (``DockerExecutor``,
``KubernetesJobExecutor``) is its own sandbox: the program then runs in its container or
pod, nothing of it is read from this machine's filesystem but what the executor hands
back (stdout, the reward file, the workspace), and the evaluator runs either here on the
copied-back workspace or inside, after the program, with the tests copied in only then
(``evaluate_in``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shlex
import shutil
import tempfile
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from agentbolt.runner.agent import LitAgent
from agentbolt.runner.harness import evaluation
from agentbolt.runner.harness.calls import refused_calls
from agentbolt.runner.harness.credentials import (
    Credentials,
    attempt_credentials,
    ensure_gateway,
    program_env,
    rollout_base_url,
)
from agentbolt.runner.harness.errors import (
    GatewayRefusedError,
    HarnessConfigError,
    HarnessKilledError,
    HarnessStartError,
    HarnessTimeoutError,
)
from agentbolt.runner.harness.evaluation import host_evaluator, inside_evaluator, program_reward
from agentbolt.runner.harness.isolated import IsolatedExecutor
from agentbolt.runner.harness.launch import launch_profile
from agentbolt.runner.harness.local import (
    Executor,
    LocalExecutor,
    ProcessResult,
    ProcessSpec,
    ProgramStartError,
)
from agentbolt.runner.harness.outcome import emit_reward_of, record_run, stderr_hint, written_reward
from agentbolt.runner.harness.profiles import HarnessProfile, ProfileRun, get_profile
from agentbolt.runner.harness.profiles.install import installed_executable
from agentbolt.runner.harness.reward import Reward, read_reward_file
from agentbolt.runner.harness.routes import GatewayRoutes
from agentbolt.runner.harness.sandbox import Sandbox, SandboxSession
from agentbolt.runner.harness.sandbox.events import SandboxEvent
from agentbolt.runner.harness.sandbox.workspace import copy_workspace, task_workspace
from agentbolt.runner.harness.templates import (
    Command,
    placeholders,
    render_command,
    split_command,
    template_fields,
)
from agentbolt.tracing.context import AttemptContext, require_context

__all__ = ["Harness", "render_command", "template_fields"]

log = logging.getLogger("agentbolt.runner.harness")



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
      environment (``True``) or from an empty one (``False``); by default (``None``) a
      sandboxed program starts empty (a ``PATH``, ``LANG`` and agentbolt's variables
      besides ``env``: nothing of the controller's, no admin token), an unsandboxed
      program and the evaluator from this process's environment.
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
    * ``task_visible`` / ``task_hidden`` — which fields of the task the program sees
      (in ``$AGENTBOLT_TASK``, ``{task}`` and ``{field}`` placeholders): see
      :meth:`task_view`; by default every field but those the evaluator's command names.
    * ``sandbox`` — a :class:`~agentbolt.runner.harness.sandbox.Sandbox` (its workspace,
      hidden paths, read-only paths, limits); ``True`` (default) is ``Sandbox()``;
      ``False`` runs programs unsandboxed, with this process's rights. With an
      :class:`~agentbolt.runner.harness.isolated.IsolatedExecutor` only its workspace and
      hidden paths count (the executor has its own limits).
    * ``evaluate_in`` — with an isolated executor that ``evaluates_inside``: ``"program"``
      runs the evaluator in the program's environment after it (Harbor's order),
      ``"host"`` (default) runs it here on the copied-back workspace; a task's field
      ``evaluate_in`` chooses per task. ``tests`` — a directory the evaluator needs and the
      program must never see: at ``/tests`` inside, ``$AGENTBOLT_TESTS`` here (a task's
      field ``tests`` names its own).
    * ``profile`` — a real harness run through its profile (made by :meth:`for_`).
    """

    def __init__(
        self,
        command: Command,
        *,
        evaluator: Command | None = None,
        env: Mapping[str, str] | None = None,
        inherit_env: bool | None = None,
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
        task_visible: Sequence[str] | None = None,
        task_hidden: Sequence[str] = (),
        evaluate_in: Literal["host", "program"] = "host",
        tests: str | os.PathLike[str] | None = None,
        profile: ProfileRun | None = None,
    ) -> None:
        if concurrency is not None and concurrency < 1:
            raise ValueError(f"concurrency must be at least 1 (or None for no limit), got {concurrency}")
        if timeout is not None and timeout <= 0:
            raise ValueError(f"timeout must be positive seconds (or None), got {timeout}")
        self.command = split_command(command, "command")
        self.evaluator = split_command(evaluator, "evaluator") if evaluator is not None else None
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
        if evaluate_in not in ("host", "program"):
            raise ValueError(f"evaluate_in must be 'host' or 'program', got {evaluate_in!r}")
        self.evaluate_in = evaluate_in
        self.tests = Path(tests).absolute() if tests is not None else None
        self._slots: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore] = (
            weakref.WeakKeyDictionary()
        )
        self.task_visible = tuple(task_visible) if task_visible is not None else None
        self.task_hidden = tuple(task_hidden)
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

    def task_view(self, task: Any) -> tuple[Any, list[str]]:
        """What the program sees of ``task``, and the names of the fields left out.

        A task that is a JSON object is split: with ``task_visible`` the program sees
        exactly those fields; otherwise every field but those in ``task_hidden``, those
        the evaluator's command names (``{answer}``: what it grades against) and the
        sandbox's own (the workspace's host path, the hidden paths). The evaluator always
        gets the whole task. Other tasks (a string, a list) are shown whole."""
        if not isinstance(task, Mapping):
            return task, []
        if self.task_visible is not None:
            shown = set(self.task_visible)
        else:
            hidden = set(self.task_hidden)
            if self.evaluator is not None:
                hidden |= template_fields(self.evaluator)
            if self.sandbox is not None:
                hidden |= {self.sandbox.task_workspace_field, self.sandbox.task_hidden_field}
            shown = {str(k) for k in task} - hidden
        view = {k: v for k, v in task.items() if str(k) in shown}
        return view, sorted(str(k) for k in task if str(k) not in shown)

    # ------------------------------------------------------------------ the agent
    # the runner fills the parameters a LitAgent method names; this one names only the task
    async def training_rollout(self, task: Any) -> float | None:  # type: ignore[override]
        """Run the program for this rollout; rewards are emitted here, so returns None."""
        ctx = require_context()
        creds = await attempt_credentials(ctx, self.server_url)
        await ensure_gateway(creds, rollout_base_url(creds.server_url, ctx.rollout_id, ctx.attempt_id),
                             self._gateways_seen)
        async with self._slot():
            tmp = Path(tempfile.mkdtemp(prefix="agentbolt-harness-"))
            try:
                if isinstance(self.executor, IsolatedExecutor):
                    await self._run_isolated(ctx, task, creds, tmp, self.executor)
                    return None
                if self.sandbox is None:
                    await self._run(ctx, task, creds, tmp, None)
                    return None
                box = SandboxSession(self.sandbox, tmp, task, creds.server_url, ctx.rollout_id, ctx.attempt_id)
                async with box:
                    await self._run(ctx, task, creds, tmp, box)
                return None
            finally:
                # what the program left may be a million files: removed off the event loop
                await asyncio.shield(asyncio.to_thread(_remove, tmp))

    async def _run(
        self, ctx: AttemptContext, task: Any, creds: Credentials, tmp: Path, box: SandboxSession | None
    ) -> None:
        fields = placeholders(task, ctx)  # the evaluator's: the whole task
        shown, hidden = self.task_view(task)
        seen = placeholders(shown, ctx)  # the program's
        if box is None:
            (tmp / "out").mkdir()
        reward_file = box.reward_file if box else tmp / "out" / "reward"
        server_url = box.program_server_url if box else creds.server_url  # as the program reaches it
        # a sandboxed program starts from nothing of this process's: no admin token, no cloud keys
        inherit = self.inherit_env if self.inherit_env is not None else box is None
        env = program_env(ctx, seen["task"], creds.token, server_url,
                          box.program_reward_file if box else str(reward_file), dict(os.environ) if inherit else {},
                          self.env)
        argv, stdin = render_command(self.command, seen, hidden=hidden), None
        if self.profile is not None:  # the profile's config and flags; the program's view of the task
            argv, stdin = launch_profile(self.profile, seen, env, creds.token, tmp, box, self.cwd)
        env.update(self.env)  # explicit settings win (e.g. another OPENAI_BASE_URL: then calls are not recorded)
        spec = ProcessSpec(argv=argv, env=env, cwd=self.cwd, timeout=self.timeout, stdin=stdin,
                           stderr_tail_bytes=self.stderr_tail_bytes)
        events: list[SandboxEvent] = []
        if box is None:
            result = await self._execute(spec, "program")
        else:
            evaluator = render_command(self.evaluator, fields) if self.evaluator is not None else None
            try:
                result, events = await box.run(self.executor, spec, evaluator, self.cwd)
            except ProgramStartError as exc:
                raise HarnessStartError(f"the program could not start: {exc}") from exc
        await record_run(ctx, result, events, box, task_hidden=hidden)
        await self._conclude(ctx, fields, spec, result, tmp, box, lambda: read_reward_file(reward_file))

    def _tests(self, fields: Mapping[str, str]) -> Path | None:
        return Path(fields["tests"]).absolute() if fields.get("tests") else self.tests

    async def _run_isolated(
        self, ctx: AttemptContext, task: Any, creds: Credentials, tmp: Path, executor: IsolatedExecutor
    ) -> None:
        """The program in the executor's own world: nothing shared with this machine but
        what the spec hands in and the result hands back."""
        fields = placeholders(task, ctx)  # the evaluator's: the whole task
        shown, task_hidden = self.task_view(task)
        seen = placeholders(shown, ctx)  # the program's
        await executor.prepare(task)
        config = self.sandbox or Sandbox()
        source, hidden = task_workspace(config, task)
        workspace = tmp / "workspace"
        left_out = await asyncio.to_thread(copy_workspace, source, workspace, hidden)
        env = program_env(ctx, seen["task"], creds.token, executor.program_server_url(creds.server_url),
                          executor.program_reward_file, {}, self.env)
        env["AGENTBOLT_WORKSPACE"] = executor.program_workspace
        inside = str(task.get("evaluate_in", self.evaluate_in)) if isinstance(task, Mapping) else self.evaluate_in
        evaluator: ProcessSpec | None = None
        tests = self._tests(fields)
        if self.evaluator is not None and inside == "program":
            if not executor.evaluates_inside:
                raise HarnessConfigError(
                    f"{type(executor).__name__} cannot run the evaluator inside the program's environment: "
                    "use Harness(evaluate_in='host')"
                )
            evaluator = inside_evaluator(render_command(self.evaluator, fields), ctx=ctx, fields=fields,
                                         executor=executor, env=self.env, tests=tests, timeout=self.evaluator_timeout,
                                         stderr_tail_bytes=self.stderr_tail_bytes)
        spec = ProcessSpec(
            argv=render_command(self.command, seen, hidden=task_hidden),
            env=env,
            timeout=self.timeout,
            stderr_tail_bytes=self.stderr_tail_bytes,
            workspace=workspace,
            gateway=GatewayRoutes(creds.server_url, ctx.rollout_id, ctx.attempt_id),
            outputs=(executor.program_reward_file,),
            evaluator=evaluator,
            evaluator_files={executor.program_tests: tests} if evaluator is not None and tests else {},
            task=task,
        )
        try:
            result = await executor.run(spec)
        except ProgramStartError as exc:
            raise HarnessStartError(f"the program could not start: {exc}") from exc
        await record_run(ctx, result, result.events, None, isolated_run=True, startup_s=result.startup_s,
                         hidden=left_out, task_hidden=task_hidden)
        reward_file = executor.program_reward_file
        await self._conclude(ctx, fields, spec, result, tmp, None, lambda: written_reward(result, reward_file))

    async def _conclude(
        self,
        ctx: AttemptContext,
        fields: dict[str, str],
        spec: ProcessSpec,
        result: ProcessResult,
        tmp: Path,
        box: SandboxSession | None,
        written_reward: Callable[[], Reward | None],
    ) -> None:
        """Turn how the program ended into a reward or a typed failure."""
        refused = await refused_calls(ctx)
        if refused is not None:  # the model never answered it: not the program's score (runner/harness/calls.py)
            raise GatewayRefusedError(refused.reason, retryable=refused.transient)
        if result.timed_out:
            raise HarnessTimeoutError(
                f"{spec.argv[0]} ran longer than {self.timeout} s; its process group was killed"
                + stderr_hint(result)
            )
        if result.killed_by_signal:
            raise HarnessKilledError(
                f"{spec.argv[0]} was killed by signal {-(result.exit_code or 0)}" + stderr_hint(result)
            )
        if result.evaluator is not None:  # the executor ran it inside, after the program
            emit_reward_of(self.verdict(spec.evaluator or spec, result.evaluator))
        elif self.evaluator is not None:
            emit_reward_of(await self._evaluate(ctx, fields, result, tmp, box))
        else:
            await program_reward(ctx, spec.argv, result, written_reward, self.require_reward)

    async def _evaluate(
        self, ctx: AttemptContext, fields: dict[str, str], program: ProcessResult, tmp: Path, box: SandboxSession | None
    ) -> Reward:
        assert self.evaluator is not None
        env = dict(os.environ) if self.inherit_env is not False else {}
        env.update(self.env)  # never the agent's gateway URL or token: the grader is not the agent
        spec = host_evaluator(render_command(self.evaluator, fields), ctx=ctx, fields=fields, program=program,
                              tmp=tmp, box=box, env=env, tests=self._tests(fields), cwd=self.cwd,
                              timeout=self.evaluator_timeout, stderr_tail_bytes=self.stderr_tail_bytes)
        return self.verdict(spec, await self._execute(spec, "evaluator", here=True))

    def verdict(self, spec: ProcessSpec, result: ProcessResult) -> Reward:
        """The reward of the evaluator run ``spec`` that ended as ``result`` (the last line it
        printed, else ``EvaluatorError``); a harness whose evaluator reports otherwise overrides it."""
        return evaluation.verdict(spec, result, self.evaluator_timeout)

    async def _execute(self, spec: ProcessSpec, what: str, *, here: bool = False) -> ProcessResult:
        """Run ``spec`` on the harness's executor; ``here``: on this machine when that
        executor is an isolated one (the evaluator, run outside the program's world)."""
        executor = LocalExecutor() if here and isinstance(self.executor, IsolatedExecutor) else self.executor
        try:
            return await executor.run(spec)
        except ProgramStartError as exc:
            raise HarnessStartError(f"the {what} could not start: {exc}") from exc

    def _slot(self) -> asyncio.Semaphore | contextlib.nullcontext[None]:
        if self.concurrency is None:
            return contextlib.nullcontext()
        loop = asyncio.get_running_loop()  # one semaphore per event loop: they are bound to theirs
        return self._slots.setdefault(loop, asyncio.Semaphore(self.concurrency))


def _remove(tmp: Path) -> None:
    shutil.rmtree(tmp, ignore_errors=True)
    if tmp.exists():
        log.warning("could not remove the harness's temporary directory %s entirely", tmp)
