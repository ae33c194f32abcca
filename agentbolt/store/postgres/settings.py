"""The URL of a :class:`~agentbolt.store.postgres.PostgresStore`: libpq's part, the
store's own options, and the messages that quote it (without its password)."""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Any

from agentbolt.store.errors import InvalidRequestError

__all__ = ["PostgresSettings", "int_option", "parse_postgres_url", "redact", "unreachable_message"]

_OWN_PARAMS = ("schema", "pool_min", "pool_max", "connect_timeout", "write_groups", "group_ops")


@dataclass(frozen=True)
class PostgresSettings:
    """What :func:`parse_postgres_url` found: the libpq URL, and the store's own options."""

    conninfo: str
    options: dict[str, str]


def parse_postgres_url(url: str) -> PostgresSettings:
    """Split ``postgresql://user:pw@host:port/db?schema=s&pool_max=20&sslmode=require``
    into the URL for libpq and the store's own options (``schema``, ``pool_min``,
    ``pool_max``, ``connect_timeout``, ``write_groups``, ``group_ops``); other query
    parameters go to libpq."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise InvalidRequestError(f"not a PostgreSQL URL: {url!r}; use postgresql://user@host:5432/database")
    try:
        query = urllib.parse.parse_qsl(parts.query, keep_blank_values=True, strict_parsing=bool(parts.query))
        parts.port  # noqa: B018 - validates the port
    except ValueError as exc:
        raise InvalidRequestError(f"invalid PostgreSQL URL {url!r}: {exc}") from None
    own = {k: v for k, v in query if k in _OWN_PARAMS}
    rest = [(k, v) for k, v in query if k not in _OWN_PARAMS]
    if "connect_timeout" in own:
        rest.append(("connect_timeout", own["connect_timeout"]))
    conninfo = urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(rest)))
    return PostgresSettings(conninfo, own)


def int_option(name: str, value: Any, minimum: int) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise InvalidRequestError(f"{name} must be an integer, got {value!r}") from None
    if n < minimum:
        raise InvalidRequestError(f"{name} must be at least {minimum}, got {n}")
    return n


def redact(conninfo: str) -> str:
    """The URL without its password, for messages."""
    parts = urllib.parse.urlsplit(conninfo)
    if parts.password is None:
        return conninfo
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


def unreachable_message(conninfo: str, exc: BaseException) -> str:
    parts = urllib.parse.urlsplit(conninfo)
    host = parts.hostname or "localhost (Unix socket)"
    port = parts.port or 5432
    database = parts.path.lstrip("/") or "(default)"
    reason = " ".join(str(exc).split())  # libpq's message spans lines
    return (
        f"cannot connect to PostgreSQL at {host}:{port} (database {database}): {reason} — "
        "start PostgreSQL (e.g. `pg_ctlcluster <version> main start`, `systemctl start postgresql`, or "
        "`docker run -p 5432:5432 -e POSTGRES_PASSWORD=... postgres`) or fix the URL's host, port, user, "
        "password and database"
    )
