"""OTLP/JSON (``application/json``) trace exports to span fields, checked field by field."""

from __future__ import annotations

import base64
import binascii
import functools
import math
from typing import Any

import orjson

from agentbolt.server.otlp.common import (
    _HEX_RE,
    _INT_RE,
    _KIND_NAMES,
    _KINDS,
    _SPAN_ID_BYTES,
    _STATUS_NAMES,
    _STATUSES,
    _TRACE_ID_BYTES,
    MAX_VALUE_DEPTH,
    OtlpDecodeError,
    _add_scope,
    _Batch,
    _Fields,
    _seconds,
    _too_deep,
)
from agentbolt.types import SpanEvent


# ---------------------------------------------------------------------------- OTLP/JSON
def _read_json(data: bytes) -> _Batch:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise OtlpDecodeError(f"body is not valid UTF-8 (byte {e.start}); OTLP/JSON must be UTF-8") from None
    try:
        doc = orjson.loads(text)
    except orjson.JSONDecodeError as e:
        raise OtlpDecodeError(f"body is not valid JSON ({e})") from None
    return _json_spans(doc)


def _json_spans(doc: Any) -> _Batch:
    for ri, rs in enumerate(_list(_obj(doc, "body").get("resourceSpans"), "resourceSpans")):
        rpath = f"resourceSpans[{ri}]"
        rs = _obj(rs, rpath)
        res = _obj(rs.get("resource"), f"{rpath}.resource")
        resource = _json_attributes(res.get("attributes"), f"{rpath}.resource.attributes")
        for si, ss in enumerate(_list(rs.get("scopeSpans"), f"{rpath}.scopeSpans")):
            spath = f"{rpath}.scopeSpans[{si}]"
            ss = _obj(ss, spath)
            scope = _obj(ss.get("scope"), f"{spath}.scope")
            scope_name = _str(scope.get("name"), f"{spath}.scope.name")
            scope_version = _str(scope.get("version"), f"{spath}.scope.version")
            for pi, sp in enumerate(_list(ss.get("spans"), f"{spath}.spans")):
                path = f"{spath}.spans[{pi}]"
                span = _json_span(_obj(sp, path), path, scope_name, scope_version)
                yield functools.partial(str, path), span, resource


def _json_span(sp: dict[str, Any], path: str, scope_name: str, scope_version: str) -> _Fields:
    attributes = _json_attributes(sp.get("attributes"), f"{path}.attributes")
    _add_scope(attributes, scope_name, scope_version)
    status = _obj(sp.get("status"), f"{path}.status")
    end = _int(sp.get("endTimeUnixNano"), f"{path}.endTimeUnixNano")
    events = []
    for ei, ev in enumerate(_list(sp.get("events"), f"{path}.events")):
        epath = f"{path}.events[{ei}]"
        ev = _obj(ev, epath)
        events.append(
            SpanEvent(
                name=_str(ev.get("name"), f"{epath}.name"),
                timestamp=_seconds(_int(ev.get("timeUnixNano"), f"{epath}.timeUnixNano")),
                attributes=_json_attributes(ev.get("attributes"), f"{epath}.attributes"),
            )
        )
    return {
        "trace_id": _json_id(sp.get("traceId"), _TRACE_ID_BYTES, f"{path}.traceId", required=True),
        "span_id": _json_id(sp.get("spanId"), _SPAN_ID_BYTES, f"{path}.spanId", required=True),
        "parent_id": _json_id(sp.get("parentSpanId"), _SPAN_ID_BYTES, f"{path}.parentSpanId", required=False),
        "name": _str(sp.get("name"), f"{path}.name"),
        "kind": _KINDS[_enum(sp.get("kind"), _KIND_NAMES, len(_KINDS), f"{path}.kind")],
        "status": _STATUSES[_enum(status.get("code"), _STATUS_NAMES, len(_STATUSES), f"{path}.status.code")],
        "status_message": _str(status.get("message"), f"{path}.status.message") or None,
        "start_time": _seconds(_int(sp.get("startTimeUnixNano"), f"{path}.startTimeUnixNano")),
        "end_time": _seconds(end) if end else None,
        "attributes": attributes,
        "events": events,
    }


def _json_id(value: Any, size: int, path: str, *, required: bool) -> str | None:
    """An id given as hex (the OTLP/JSON rule) or base64 (protobuf's generic JSON mapping)."""
    text = _str(value, path)
    if not text:
        if required:
            raise OtlpDecodeError(f"{path} is empty")
        return None
    if len(text) == 2 * size and _HEX_RE.fullmatch(text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if len(raw) != size:
        raise OtlpDecodeError(
            f"{path} must be {size} bytes as {2 * size} hex digits (or base64), got {text[:100]!r}"
        )
    return raw.hex()


def _json_attributes(value: Any, path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for i, kv in enumerate(_list(value, path)):
        kv = _obj(kv, f"{path}[{i}]")
        out[_str(kv.get("key"), f"{path}[{i}].key")] = _json_value(kv.get("value"), 0, f"{path}[{i}].value")
    return out


def _json_kvlist(value: Any, depth: int, path: str) -> dict[str, Any]:
    """A nested kvlist. Errors inside nested values name the top attribute's path (a
    path through 30 levels would drown the message)."""
    out: dict[str, Any] = {}
    for kv in _list(value, path):
        kv = _obj(kv, path)
        out[_str(kv.get("key"), path)] = _json_value(kv.get("value"), depth, path)
    return out


def _json_value(value: Any, depth: int, path: str) -> Any:
    v = _obj(value, path)
    if "stringValue" in v:
        return _str(v["stringValue"], f"{path}.stringValue")
    if "intValue" in v:
        return _int(v["intValue"], f"{path}.intValue")
    if "doubleValue" in v:
        return _double(v["doubleValue"], f"{path}.doubleValue")
    if "boolValue" in v:
        b = v["boolValue"]
        if not isinstance(b, bool):
            raise OtlpDecodeError(f"{path}.boolValue must be true or false, got {b!r}")
        return b
    if "bytesValue" in v:
        return _bytes(v["bytesValue"], f"{path}.bytesValue")
    if "arrayValue" in v:
        if depth >= MAX_VALUE_DEPTH:
            raise _too_deep(path)
        values = _list(_obj(v["arrayValue"], path).get("values"), path)
        return [_json_value(x, depth + 1, path) for x in values]
    if "kvlistValue" in v:
        if depth >= MAX_VALUE_DEPTH:
            raise _too_deep(path)
        return _json_kvlist(_obj(v["kvlistValue"], path).get("values"), depth + 1, path)
    return None  # an empty AnyValue


def _obj(value: Any, path: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise OtlpDecodeError(f"{path} must be a JSON object, got {type(value).__name__}")
    return value


def _list(value: Any, path: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise OtlpDecodeError(f"{path} must be a JSON array, got {type(value).__name__}")
    return value


def _str(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise OtlpDecodeError(f"{path} must be a string, got {type(value).__name__}")
    return value


def _int(value: Any, path: str) -> int:
    """An int64 field: a JSON number or, as protobuf's JSON mapping writes them, a string."""
    if value is None:
        return 0
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and _INT_RE.fullmatch(value.strip()):
        return int(value)
    raise OtlpDecodeError(f"{path} must be an integer (a number or a decimal string), got {value!r}")


def _double(value: Any, path: str) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):
        try:
            number = float(value)
        except ValueError:
            pass
        else:
            if math.isfinite(number) or value in ("NaN", "Infinity", "-Infinity"):
                return number
    raise OtlpDecodeError(f"{path} must be a number, got {value!r}")


def _bytes(value: Any, path: str) -> str:
    """Bytes arrive base64-encoded (standard or URL-safe); keep them as standard base64."""
    text = _str(value, path)
    try:
        raw = base64.b64decode(text.replace("-", "+").replace("_", "/"), validate=True)
    except (binascii.Error, ValueError):
        raise OtlpDecodeError(f"{path} must be base64, got {text[:100]!r}") from None
    return base64.b64encode(raw).decode("ascii")


def _enum(value: Any, names: dict[str, int], count: int, path: str) -> int:
    if value is None:
        return 0
    if isinstance(value, str) and value in names:
        return names[value]
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < count:
        return value
    raise OtlpDecodeError(f"{path} must be one of {sorted(names)} or 0..{count - 1}, got {value!r}")
