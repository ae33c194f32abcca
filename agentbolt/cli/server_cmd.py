"""``agentbolt server``: serve a store over HTTP (store API, OTLP, metrics), and with
``--engine`` the model gateway in front of an inference engine."""

from __future__ import annotations

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
    TRANSFORMERS = "transformers"


_GATEWAY = "Model gateway"


def server(
    store: Annotated[
        str, typer.Option("--store", help="Store to serve: sqlite:///path.db (durable) or memory:// (lost on exit).")
    ] = DEFAULT_STORE_URL,
    host: Annotated[
        str, typer.Option("--host", help="Interface to bind. Anything but loopback needs --admin-token.")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", "-p", min=0, max=65535, help="TCP port.")] = 4747,
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
            "vLLM (vllm: token ids for RL) or a local Hugging Face model (transformers).",
            rich_help_panel=_GATEWAY,
            show_default=False,
        ),
    ] = None,
    engine_url: Annotated[
        list[str] | None,
        typer.Option(
            "--engine-url",
            help="Base URL of the openai/vllm server, e.g. http://127.0.0.1:8000/v1 (repeat for replicas).",
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
            help="API key of the openai/vllm server (prefer the environment variable).",
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
        engine, engine_url, engine_model, engine_api_key, model_path, device, train_temperature, val_temperature
    )
    try:
        from agentbolt.models import MissingModelError
        from agentbolt.server import run_server
    except ImportError as err:
        fail(f"the server is not available in this installation: {err}", RUNTIME_ERROR)
    try:
        run_server(
            store_url=store,
            host=host,
            port=port,
            admin_token=admin_token,
            max_body_bytes=int(max_body_mb * 1024 * 1024),
            log_level=log_level.value,
            gateway=gateway,
            cors_origins=cors_origin or (),
        )
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


def _gateway_spec(
    engine: EngineKind | None,
    urls: list[str] | None,
    model: str | None,
    api_key: str | None,
    model_path: str | None,
    device: str,
    train_temperature: float | None,
    val_temperature: float | None,
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
            )
            if value is not None
        ]
        if given:
            fail(f"{', '.join(given)} configure the model gateway: add --engine openai, vllm or transformers")
        return None
    if engine in (EngineKind.OPENAI, EngineKind.VLLM):
        if not urls:
            fail(f"--engine {engine.value} needs --engine-url, the base URL of its server, e.g. http://127.0.0.1:8000/v1")
        if model_path is not None:
            fail(f"--model-path is for --engine transformers; --engine {engine.value} forwards to --engine-url")
    elif not model_path:
        fail("--engine transformers needs --model-path: a model directory saved with save_pretrained, or 'smollm2'")
    elif urls:
        fail("--engine-url is for --engine openai or vllm; --engine transformers serves --model-path in this process")

    from agentbolt.gateway.config import GatewayConfig
    from agentbolt.gateway.spec import EngineSpec, GatewaySpec

    sampling: dict[str, dict[str, float]] = {}
    if train_temperature is not None:
        sampling["train"] = {"temperature": train_temperature}
    if val_temperature is not None:
        sampling["val"] = sampling["test"] = {"temperature": val_temperature}
    url = None if not urls else urls[0] if len(urls) == 1 else list(urls)
    try:
        return GatewaySpec(
            engine=EngineSpec(
                kind=engine.value, url=url, model=model, api_key=api_key, path=model_path, device=device
            ),
            config=GatewayConfig(sampling=sampling),
        )
    except ValueError as err:
        fail(str(err))
