"""What a :class:`~agentbolt.runner.harness.docker.DockerExecutor` allows a container."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["ContainerLimits"]


class ContainerLimits(BaseModel):
    """Limits of one program's container. ``None`` leaves one unlimited.

    The whole container (its cgroup) is bounded: ``memory_mb`` (RAM, no swap), ``cpus``
    (CPU share, fractional), ``processes`` (pids alive at once). Reaching the memory or
    the process limit kills the whole container, not one process. ``tmp_mb`` is the
    size of the ``/tmp`` tmpfs; ``output_mb`` the stdout kept for the evaluator.
    ``cpu_seconds``, ``file_mb`` and ``open_files`` bound each process (rlimits set by
    agentbolt's init in the container). The wall time is the harness's ``timeout``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int | None = Field(2048, ge=16)
    cpus: float | None = Field(2.0, gt=0)
    processes: int | None = Field(256, ge=8)
    tmp_mb: int | None = Field(512, ge=1)
    output_mb: float = Field(1.0, gt=0)
    cpu_seconds: int | None = Field(None, ge=1)
    file_mb: int | None = Field(None, ge=1)
    open_files: int | None = Field(1024, ge=16)
