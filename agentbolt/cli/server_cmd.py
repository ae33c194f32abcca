"""``agentbolt server``: serve a store over HTTP (store API, OTLP, metrics), and with
``--engine`` the model gateway in front of an inference engine.

``--workers N`` runs N server processes accepting connections on one socket, all on the
same PostgreSQL store (the database is what they share: claims, deadlines, waits). A
worker that dies is replaced; Ctrl-C or SIGTERM stops them all. SQLite and memory
stores cannot be shared by processes, so they refuse it.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated

import typer

from agentbolt.cli.connect import DEFAULT_STORE_URL
from agentbolt.cli.failures import RUNTIME_ERROR, USAGE_ERROR, fail

if TYPE_CHECKING:
    from agentbolt.gateway.spec import GatewaySpec

__all__ = ["server"]


class LogLevel(StrEnum):
    CRITICAL = "critical"
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"
    DEBUG = "debug"


class EngineKind(StrEnum):
    OPENAI = "openai"
    VLLM = "vllm"
    SGLANG = "sglang"
    TRANSFORMERS = "transformers"


_GATEWAY = "Model gateway"


def server(
    store: Annotated[
        str,
        typer.Option(
            "--store",
            help="Store to serve: sqlite:///path.db (durable), postgresql://user@host/db (durable, shared by "
            "several servers; pip install 'agentbolt[postgres]') or memory:// (lost on exit).",
        ),
    ] = DEFAULT_STORE_URL,
    host: Annotated[
        str, typer.Option("--host", help="Interface to bind. Anything but loopback needs --admin-token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="TCP port.")] = 4747,
    workers: Annotated[
        int,
        typer.Option(
            "--workers",
            min=1,
            help="Server processes sharing the port; more than 1 needs a PostgreSQL store (--store postgresql://...).",
        ),
    ] = 1,
    admin_token: Annotated[
        str | None,
        typer.Option(
            "--admin-token",
            envvar="AGENTBOLT_ADMIN_TOKEN",
            help="Token that grants full access to the store API.",
            show_default=False,
        ),
    ] = None,
    max_body_mb: Annotated[
        float, typer.Option("--max-body-mb", min=0.001, help="Largest request body accepted, in MiB.")
    ] = 16.0,
    log_level: Annotated[LogLevel, typer.Option("--log-level", help="Server log level.")] = LogLevel.INFO,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            metavar="ORIGIN",
            help="Browser origin allowed to call the API, e.g. https://dash.example:8080 for a dashboard "
            "served elsewhere (repeat for several). The dashboard at / needs none.",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        EngineKind | None,
        typer.Option(
            "--engine",
            help="Serve the model gateway in front of this engine: an OpenAI-compatible server (openai), "
            "vLLM (vllm: token ids for RL), SGLang (sglang: its native routes, needs --tokenizer) or a local "
            "Hugging Face model (transformers).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    engine_url: Annotated[
        list[str] | None,
        typer.Option(
            "--engine-url",
            help="Base URL of the openai/vllm server, e.g. http://127.0.0.1:8000/v1, or the sglang server's root, "
            "e.g. http://127.0.0.1:30000 (repeat for replicas).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    engine_model: Annotated[
        str | None,
        typer.Option(
            "--engine-model",
            help="Model name sent to the engine, whatever the program asks for.",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    engine_api_key: Annotated[
        str | None,
        typer.Option(
            "--engine-api-key",
            envvar="AGENTBOLT_ENGINE_API_KEY",
            help="API key of the openai/vllm/sglang server (prefer the environment variable).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    model_path: Annotated[
        str | None,
        typer.Option(
            "--model-path",
            help="transformers engine: a model directory saved with save_pretrained, or 'smollm2' "
            "(SmolLM2-135M-Instruct, offline).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    device: Annotated[
        str, typer.Option("--device", help="transformers engine: cpu or cuda.", rich_help_panel=_GATEWAY)
    ] = "cpu",
    dtype: Annotated[
        str,
        typer.Option("--dtype", help="transformers engine: float32, bfloat16 or float16 (a trainer in another "
                     "dtype recomputes π_old; reported in /v1/gateway/status).", rich_help_panel=_GATEWAY),
    ] = "float32",
    tool_parser: Annotated[
        str | None,
        typer.Option(
            "--tool-parser",
            help="vllm/transformers engines: how the model writes tool calls (hermes, llama3_json, xlam); "
            "default: read from the chat template.",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            "--tokenizer",
            help="vllm or sglang engine: the served model's tokenizer (directory or Hub name); the gateway then "
            "templates chats itself and sends token ids to the engine (token-exact history). Required by sglang.",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    max_tokens: Annotated[
        int | None,
        typer.Option(
            "--max-tokens",
            min=1,
            help="The limit of a call that sets none (default: all the room the context leaves after the prompt).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    context_length: Annotated[
        int | None,
        typer.Option(
            "--context-length",
            min=2,
            help="The context window in tokens: transformers engine, at most the model's (its default); vllm engine "
            "with --tokenizer, the server's --max-model-len. Longer prompts get a 400 (context_length_exceeded).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    train_temperature: Annotated[
        float | None,
        typer.Option(
            "--train-temperature",
            min=0.0,
            help="Temperature forced on every call of a training rollout.",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    val_temperature: Annotated[
        float | None,
        typer.Option(
            "--val-temperature",
            min=0.0,
            help="Temperature forced on every call of a validation or test rollout.",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Serve a store over HTTP until interrupted (Ctrl-C); with --engine, also the model gateway."""
    gateway = _gateway_spec(
        engine, engine_url, engine_model, engine_api_key, model_path, device, train_temperature, val_temperature,
        dtype=dtype, tool_parser=tool_parser, tokenizer=tokenizer, max_tokens=max_tokens, context_length=context_length,
    )
    if workers > 1:
        _check_workers(workers, store, gateway is not None)
    try:
        from agentbolt.models import MissingModelError
        from agentbolt.server import run_server
    except ImportError as err:
        fail(f"the server is not available in this installation: {err}", RUNTIME_ERROR)

    def serve(sockets: list[socket.socket] | None = None) -> None:
        run_server(
            store_url=store,
            host=host,
            port=port,
            admin_token=admin_token,
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            log_level=log_level.value,
            gateway=gateway,
            cors_origins=cors_origin or (),
            sockets=sockets,
        )

    try:
        if workers > 1:
            _serve_workers(workers, host, port, serve)
        else:
            serve()
    except KeyboardInterrupt:
        return
    except MissingModelError as err:  # no torch, no model package, a model directory that does not load
        fail(str(err), RUNTIME_ERROR)
    except ValueError as err:  # includes InvalidRequestError: a setting that cannot work
        fail(str(err), USAGE_ERROR)
    except OSError as err:
        fail(f"cannot serve on {host}:{port}: {err.strerror or err}", RUNTIME_ERROR)
    except SystemExit as exit_:  # uvicorn exits (code 3) when startup fails, e.g. a taken port
        if exit_.code not in (0, None):
            fail(
                f"the server on {host}:{port} could not start or stopped with an error: see its log above",
                RUNTIME_ERROR,
            )


def _check_workers(workers: int, store: str, with_gateway: bool) -> None:
    if not store.startswith(("postgresql://", "postgres://")):
        fail(
            f"--workers {workers} needs a store several processes can share: --store postgresql://...; "
            f"{store} is one process's (SQLite allows one writer, memory:// lives in one process). "
            "Run a single server on it, or move the store to PostgreSQL (docs/scale-out.md)"
        )
    if with_gateway:
        fail("--engine serves the model gateway from one process: use --workers 1 with --engine "
             "(run store-only servers with --workers beside it)")


def _serve_workers(n: int, host: str, port: int, serve: Callable[[list[socket.socket]], None]) -> None:
    """Bind ``host:port`` once and fork ``n`` processes serving on it; replace any that
    dies, stop them all on SIGINT/SIGTERM. A worker failing within seconds of its start
    (bad database URL, taken port...) stops everything: restarting would fail the same way."""
    log = logging.getLogger("agentbolt.server")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=2048)
    except OSError as err:
        fail(f"cannot serve on {host}:{port}: {err.strerror or err}", RUNTIME_ERROR)
    children: dict[int, tuple[int, float]] = {}  # pid -> (slot, start time)
    stopping = False

    def spawn(slot: int) -> None:
        pid = os.fork()
        if pid == 0:  # the worker: serve until told to stop, never return into the parent's code
            code = 1
            try:
                signal.signal(signal.SIGINT, signal.default_int_handler)
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                serve([sock])
                code = 0
            except KeyboardInterrupt:
                code = 0
            except typer.Exit as exit_:
                code = exit_.exit_code
            except SystemExit as exit_:
                code = exit_.code if isinstance(exit_.code, int) else 1
            except BaseException:
                log.exception("server worker %d crashed", slot)
            finally:
                os._exit(code)
        children[pid] = (slot, time.monotonic())

    def stop(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True
        for pid in list(children):
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass

    for slot in range(n):
        spawn(slot)
    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    log.warning("agentbolt server: %d worker processes on %s:%d (pids %s)", n, host, sock.getsockname()[1],
                ", ".join(str(pid) for pid in children))
    failed_early = None
    while children:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid not in children:
            continue
        slot, started = children.pop(pid)
        if stopping:
            continue
        code = os.waitstatus_to_exitcode(status)
        if time.monotonic() - started < 10.0 and code > 0:
            failed_early = (
                f"server worker {slot} (pid {pid}) failed at startup with exit code {code}: see its log above"
            )
            stop(signal.SIGTERM, None)
            continue
        log.warning("server worker %d (pid %d) exited with %s: starting a new one", slot, pid, code)
        spawn(slot)
    sock.close()
    if failed_early:
        fail(failed_early, RUNTIME_ERROR)


def _gateway_spec(
    engine: EngineKind | None,
    urls: list[str] | None,
    model: str | None,
    api_key: str | None,
    model_path: str | None,
    device: str,
    train_temperature: float | None,
    val_temperature: float | None,
    *,
    dtype: str = "float32",
    tool_parser: str | None = None,
    tokenizer: str | None = None,
    max_tokens: int | None = None,
    context_length: int | None = None,
) -> GatewaySpec | None:
    """The gateway the options describe (None without --engine); usage errors say what to add."""
    if engine is None:
        given = [
            flag
            for flag, value in (
                ("--engine-url", urls),
                ("--engine-model", model),
                ("--model-path", model_path),
                ("--train-temperature", train_temperature),
                ("--val-temperature", val_temperature),
                ("--tool-parser", tool_parser),
                ("--tokenizer", tokenizer),
                ("--max-tokens", max_tokens),
                ("--context-length", context_length),
            )
            if value is not None
        ]
        if given:
            fail(f"{', '.join(given)} configure the model gateway: add --engine openai, vllm, sglang or transformers")
        return None
    if engine in (EngineKind.OPENAI, EngineKind.VLLM, EngineKind.SGLANG):
        if not urls:
            fail(f"--engine {engine.value} needs --engine-url, the base URL of its server, e.g. http://127.0.0.1:8000/v1")
        if model_path is not None:
            fail(f"--model-path is for --engine transformers; --engine {engine.value} forwards to --engine-url")
    elif not model_path:
        fail("--engine transformers needs --model-path: a model directory saved with save_pretrained, or 'smollm2'")
    elif urls:
        fail("--engine-url is for --engine openai, vllm or sglang; --engine transformers serves --model-path in this "
             "process")

    from agentbolt.engines.spec import EngineSpec
    from agentbolt.gateway.config import GatewayConfig
    from agentbolt.gateway.spec import GatewaySpec

    sampling: dict[str, dict[str, float]] = {}
    if train_temperature is not None:
        sampling["train"] = {"temperature": train_temperature}
    if val_temperature is not None:
        sampling["val"] = sampling["test"] = {"temperature": val_temperature}
    url = None if not urls else urls[0] if len(urls) == 1 else list(urls)
    try:
        return GatewaySpec(
            engine=EngineSpec(
                kind=engine.value, url=url, model=model, api_key=api_key, path=model_path, device=device,
                dtype=dtype, tool_parser=tool_parser, tokenizer=tokenizer, max_tokens=max_tokens,
                context_length=context_length,
            ),
            config=GatewayConfig(sampling=sampling),
        )
    except ValueError as err:
        fail(str(err))
