"""``task.toml`` as Harbor defines it (``harbor.models.task.config.TaskConfig``, schema 1.4).

Harbor's own package needs Python 3.12, agentbolt 3.11; so the part of its schema that
agentbolt applies is restated here with Harbor's field names, defaults and meanings, and
every other key is accepted and ignored as Harbor's models do (pydantic's default), so a
task written for a newer Harbor still loads. What agentbolt applies from it:

* ``[agent].timeout_sec`` — the program's time limit (Harbor: none by default);
* ``[verifier].timeout_sec`` (600) and ``[verifier].env`` — the verifier's limit and environment;
* ``[environment]`` — ``build_timeout_sec`` (600), ``docker_image`` (a prebuilt image
  instead of ``environment/Dockerfile``), ``cpus``, ``memory_mb``, ``storage_mb``,
  ``gpus``, ``env``, ``workdir`` and the network: ``network_mode`` ``public`` (default) /
  ``no-network`` / ``allowlist`` with ``allowed_hosts``, or the deprecated
  ``allow_internet = false`` (no network);
* ``[environment].mcp_servers`` — MCP servers the agent is given (``agentbolt.mcp``);
* ``[metadata]`` and ``[task]`` (name, version, description, authors, keywords).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["AgentConfig", "EnvironmentConfig", "HarborTaskConfig", "MCPServerConfig", "NetworkMode", "PackageInfo",
           "VerifierConfig"]


class _Harbor(BaseModel):
    model_config = ConfigDict(extra="ignore")


class NetworkMode(StrEnum):
    NO_NETWORK = "no-network"
    PUBLIC = "public"
    ALLOWLIST = "allowlist"


class Author(_Harbor):
    name: str
    email: str | None = None


class PackageInfo(_Harbor):
    """``[task]``: the task as a package (``org/name``)."""

    name: str
    version: str | None = None
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class AgentConfig(_Harbor):
    timeout_sec: float | None = None
    user: str | int | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class VerifierConfig(_Harbor):
    timeout_sec: float = 600.0
    env: dict[str, str] = Field(default_factory=dict)
    user: str | int | None = None
    environment_mode: Literal["shared", "separate"] | None = None
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] | None = None


class MCPServerConfig(_Harbor):
    name: str
    transport: Literal["sse", "streamable-http", "stdio"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)


class EnvironmentConfig(_Harbor):
    build_timeout_sec: float = 600.0
    docker_image: str | None = None
    os: str = "linux"
    cpus: int | float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int | None = None
    mcp_servers: list[MCPServerConfig] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = None
    network_mode: NetworkMode = NetworkMode.PUBLIC
    allowed_hosts: list[str] | None = None
    allow_internet: bool | None = None
    """Deprecated in Harbor for ``network_mode``; ``false`` still means no network."""

    @property
    def network(self) -> NetworkMode:
        """The network the environment gets (the deprecated field honoured)."""
        if self.allow_internet is False:
            return NetworkMode.NO_NETWORK
        return self.network_mode


class HarborTaskConfig(_Harbor):
    """A whole ``task.toml``."""

    schema_version: str = "1.4"
    task: PackageInfo | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    source: str | None = None
    steps: list[dict[str, Any]] | None = None
    """Multi-step tasks (Harbor's ``[[steps]]``): read, not run (agentbolt runs one instruction per rollout)."""
