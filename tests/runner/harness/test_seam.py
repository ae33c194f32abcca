"""The executor seam: a ProcessSpec says what goes in (workspace, files) and what comes
out (outputs, the workspace), so an executor needs no filesystem shared with the harness;
LocalExecutor honours it in place."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentbolt.runner.harness import GatewayRoutes, LocalExecutor, ProcessSpec, ProgramStartError


async def test_the_local_executor_runs_in_the_workspace_and_reads_back_the_outputs(tmp_path: Path) -> None:
    spec = ProcessSpec(
        argv=["sh", "-c", "cat given/input.txt > out.txt; echo 0.5 > reward; pwd"], env={"PATH": "/usr/bin:/bin"},
        workspace=tmp_path, files={"given/input.txt": b"hello"}, outputs=("out.txt", "reward", "missing"),
    )
    result = await LocalExecutor().run(spec)
    assert result.exit_code == 0 and result.stdout.decode().strip() == str(tmp_path)
    assert result.outputs == {"out.txt": b"hello", "reward": b"0.5\n"}  # what was not written is left out
    assert result.workspace == tmp_path


async def test_files_must_stay_inside_the_workspace(tmp_path: Path) -> None:
    spec = ProcessSpec(argv=["true"], env={}, workspace=tmp_path, files={"../escape": b"x"})
    with pytest.raises(ProgramStartError, match="relative to the workspace"):
        await LocalExecutor().run(spec)


def test_the_gateway_routes_are_the_attempts_own() -> None:
    routes = GatewayRoutes("http://10.0.0.5:8000/base", "ro 1", "at/1")
    assert routes.prefixes == ["/base/rollout/ro%201/attempt/at%2F1/"]
    assert routes.exact == ["/base/v1/rollouts/ro%201/attempts/at%2F1/reward"]
