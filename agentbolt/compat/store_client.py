"""``LightningStoreClient``: a v0.3 program's store on a store server, over HTTP.

The client side of v0.3's ``store.client_server`` (the server is
:mod:`agentbolt.compat.store_server`): a :class:`~agentbolt.compat.store.LightningStore`
over :class:`~agentbolt.store.http.HttpStore`, talking to ``agentbolt server`` or a
:class:`~agentbolt.compat.store_server.LightningStoreServer`.
"""

from __future__ import annotations

from typing import Any

from agentbolt.compat.store import LightningStore

__all__ = ["LightningStoreClient"]


class LightningStoreClient(LightningStore):
    """A :class:`LightningStore` talking to a store server (``agentbolt server`` or
    :class:`~agentbolt.compat.store_server.LightningStoreServer`) at ``server_address``.

    It pickles as its address and token, so it can be handed to a runner process started
    with any start method (``multiprocessing.get_context("spawn").Process(target=...,
    args=(store,))``): the process opens its own connections."""

    def __init__(self, server_address: str, *, token: str | None = None, **_options: Any) -> None:
        from agentbolt.store.http import HttpStore

        self.server_address = server_address.rstrip("/")
        self.token = token
        super().__init__(HttpStore(self.server_address, token=token))

    def __reduce__(self) -> tuple[Any, ...]:
        return (_client, (self.server_address, self.token))

    def otlp_traces_endpoint(self) -> str:
        return f"{self.server_address}/v1/traces"


def _client(server_address: str, token: str | None) -> LightningStoreClient:
    return LightningStoreClient(server_address, token=token)
