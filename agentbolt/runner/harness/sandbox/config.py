"""What a harness sandbox allows: :class:`Sandbox` and its :class:`Limits`."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["HIDDEN_MARKER", "SYSTEM_PATHS", "Limits", "Sandbox"]

SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc")
"""Host directories every sandbox sees, read-only (those that exist)."""

HIDDEN_MARKER = ".agentbolt-hidden"
"""A file at the top of a task workspace listing paths to hide, one pattern a line."""


class Limits(BaseModel):
    """Resource limits of one program run. ``None`` leaves one unlimited.

    ``memory_mb`` bounds each process's data (its private writable memory: the heap);
    ``processes`` the processes alive
    at once (the program's whole tree); ``cpu_seconds`` each process's CPU time;
    ``file_mb`` the size of any file it writes; ``output_mb`` the stdout kept for the
    evaluator; ``tmp_mb`` the size of ``/tmp`` and of ``/dev/shm`` (each in memory);
    ``connections``, ``request_head_s`` and ``upload_idle_s`` what it may hold of the
    controller (the gateway relay). The wall time is the harness's ``timeout``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    memory_mb: int | None = Field(2048, ge=16)
    processes: int | None = Field(64, ge=4)
    cpu_seconds: int | None = Field(600, ge=1)
    file_mb: int | None = Field(256, ge=1)
    output_mb: float = Field(1.0, gt=0)
    tmp_mb: int | None = Field(512, ge=1)
    open_files: int | None = Field(1024, ge=16)
    threads: int | None = Field(2048, ge=16)
    """Threads of all its processes at once, counted with the processes (every 50 ms):
    the kernel's own bound on them (RLIMIT_NPROC) does not hold for a root controller."""
    connections: int = Field(16, ge=1, le=1024)
    """Gateway requests in flight at once (each holds a connection and two descriptors
    of the controller, two threads of the sandbox's relay); more are answered 503."""
    request_head_s: float = Field(30.0, gt=0)
    """Seconds a request may take to send its head (method, path, headers); then 408."""
    upload_idle_s: float = Field(60.0, gt=0)
    """Seconds a request's body may pause; then the request is dropped."""


class Sandbox(BaseModel):
    """One fresh, network-less, read-only world per rollout (see ``docs/harness.md``).

    * ``workspace`` — a directory copied fresh for each rollout and mounted writable at
      ``/workspace`` (the program's working directory). A task that is a JSON object may
      name its own with the field ``task_workspace_field``. Without one the program gets
      an empty workspace.
    * ``hidden`` — patterns of workspace paths left out of the copy (``.git`` always;
      ``answers/*``, ``tests/hidden_*.py``); a pattern without ``/`` matches a name at any
      depth. The workspace's own ``.agentbolt-hidden`` file and the task's field
      ``task_hidden_field`` (a list) add more.
    * ``read_only`` — host paths the program may read besides the system directories
      (where the program and its dependencies live). The program's own files named in its
      command, and this Python (``sys.prefix``: the sandbox's init runs on it) are added.
    * ``mask`` — host paths to blank out even inside a visible directory (an evaluator's
      data next to the program); the evaluator's files named in its command are masked too.
    * ``limits`` — see :class:`Limits`.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    workspace: Path | None = None
    hidden: tuple[str, ...] = ()
    read_only: tuple[Path, ...] = ()
    mask: tuple[Path, ...] = ()
    limits: Limits = Limits()
    task_workspace_field: str = "workspace"
    task_hidden_field: str = "hidden"
    bwrap: str = "bwrap"

    @field_validator("read_only", "mask")
    @classmethod
    def _absolute(cls, paths: tuple[Path, ...]) -> tuple[Path, ...]:
        return tuple(Path(p).expanduser().absolute() for p in paths)
