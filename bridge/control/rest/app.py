"""The routes of Kafka Connect's REST API (Starlette), over a `KafkaBackend`.

Every answer is Connect's shape and status code; every error is `{"error_code", "message"}`.
Basic auth (when `rest.auth.credentials.file` is set) is checked before any route: nothing
answers without it (401). Without credentials, a listener that is not loopback serves reads
only (403 for a change): a fresh deployment reachable by others is not open for writes. Each
request that changes state is logged with its user. Creating, deleting or reconfiguring the
connector is not done here: its config is the worker's file (or the Helm values), so those
requests get 405 with a message saying so (the route exists; the method is not allowed on it).
Handlers are plain functions: Starlette runs them on its thread pool, off the event loop.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import structlog
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from bridge.control.control_records import RestartRequest, TargetState
from bridge.control.rest.auth import Credentials
from bridge.control.rest.backend import KafkaBackend
from bridge.control.rest.shapes import (
    CONNECT_VERSION,
    CONNECTOR_CLASS,
    OffsetEdit,
    RequestError,
    connector_info,
    error_body,
    offset_edits,
    offsets_body,
    query_flag,
    task_id,
    tasks_info,
)
from bridge.control.rest.validate import config_infos, definitions
from bridge.kafka.errors import KafkaUnavailableError
from bridge.observability.logs import run_time_levels, set_run_time_level

log = structlog.get_logger(__name__)
MAX_BODY_BYTES = 1 << 20  # a request body larger than this is refused (413) before it is read
READS = frozenset({"GET", "HEAD", "OPTIONS"})
CONFIG_LIVES = ("the connector's config is the worker's file (cdc-bridge run --config) or, on Kubernetes, the Helm "
                "values' config: change it there and restart the workers")
LEVELS = ("OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE")
_TO_STDLIB = {"OFF": logging.CRITICAL + 10, "FATAL": logging.CRITICAL, "ERROR": logging.ERROR, "WARN": logging.WARNING,
              "INFO": logging.INFO, "DEBUG": logging.DEBUG, "TRACE": logging.DEBUG}


def _json(body: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(body, status_code=status)


def build_app(backend: KafkaBackend, credentials: Credentials | None, writes_open: bool) -> ASGIApp:
    """The ASGI app. `writes_open`: changes allowed without credentials (a loopback listener)."""

    def connector(request: Request) -> str:
        name = request.path_params["name"]
        if name != backend.name:
            raise RequestError(404, f"Connector {name} not found")
        return str(name)

    def body(request_body: bytes) -> Any:
        if not request_body.strip():
            return None
        try:
            return json.loads(request_body)
        except (ValueError, UnicodeDecodeError) as error:
            raise RequestError(400, f"Request body is not valid JSON: {error}") from None

    def root(request: Request) -> Response:
        return _json({"version": CONNECT_VERSION, "commit": f"scylla-cdc-bridge {_bridge_version()}",
                      "kafka_cluster_id": backend.cluster_id()})

    def health(request: Request) -> Response:
        return _json({"status": "healthy", "message": "Worker has completed startup and is ready to handle requests."})

    def connectors(request: Request) -> Response:
        expand = set(request.query_params.getlist("expand"))
        if not expand & {"status", "info"}:
            return _json([backend.name])
        entry: dict[str, Any] = {}
        if "status" in expand:
            entry["status"] = backend.status()
        if "info" in expand:
            entry["info"] = connector_info(backend.name, backend.masked_config(), backend.slots_count)
        return _json({backend.name: entry})

    def info(request: Request) -> Response:
        return _json(connector_info(connector(request), backend.masked_config(), backend.slots_count))

    def config(request: Request) -> Response:
        connector(request)
        return _json(backend.masked_config())

    def status(request: Request) -> Response:
        connector(request)
        return _json(backend.status())

    def topics(request: Request) -> Response:
        return _json({connector(request): {"topics": backend.topics()}})

    def tasks(request: Request) -> Response:
        return _json(tasks_info(connector(request), backend.masked_config(), backend.slots_count))

    def task_status(request: Request) -> Response:
        name = connector(request)
        slot = task_id(request.path_params["task"], backend.slots_count, name)
        found = [task for task in backend.status()["tasks"] if task["id"] == slot]
        if not found:  # a STOPPED connector has no tasks, as in Connect
            raise RequestError(404, f"No status found for task {name}-{slot}")
        return _json(found[0])

    def target(state: TargetState, code: int) -> Callable[[Request], Response]:
        def change(request: Request) -> Response:
            connector(request)
            backend.set_target(state, request.state.user)
            return Response(status_code=code)
        return change

    def restart(request: Request) -> Response:
        connector(request)
        include = query_flag(request.query_params.get("includeTasks"), "includeTasks")
        only_failed = query_flag(request.query_params.get("onlyFailed"), "onlyFailed")
        backend.restart(RestartRequest(None, include, only_failed, request.state.user, _now_ms()))
        if not (include or only_failed):
            return Response(status_code=204)
        return _json(backend.status(), 202)

    def restart_task(request: Request) -> Response:
        name = connector(request)
        slot = task_id(request.path_params["task"], backend.slots_count, name)
        backend.restart(RestartRequest(slot, False, False, request.state.user, _now_ms()))
        return Response(status_code=204)

    def offsets(request: Request) -> Response:
        connector(request)
        return _json(offsets_body(backend.offsets()))

    def alter_offsets(request: Request) -> Response:
        connector(request)
        edits = offset_edits(body(request.state.body))  # every record checked before anything is written
        backend.check_stopped()
        backend.write_offsets(edits)
        return _json({"message": "The offsets for this connector have been altered successfully"})

    def reset_offsets(request: Request) -> Response:
        connector(request)
        backend.check_stopped()
        backend.write_offsets([OffsetEdit(group, None) for group in backend.offsets()])
        return _json({"message": "The offsets for this connector have been reset successfully"})

    def plugins(request: Request) -> Response:
        return _json([{"class": CONNECTOR_CLASS, "type": "source", "version": CONNECT_VERSION}])

    def plugin_config(request: Request) -> Response:
        _plugin(request)
        return _json(definitions())

    def validate(request: Request) -> Response:
        _plugin(request)
        values = body(request.state.body)
        if not isinstance(values, dict):
            raise RequestError(400, "The body must be a JSON object of the connector's settings")
        return _json(config_infos(values))

    def _plugin(request: Request) -> None:
        plugin = request.path_params["plugin"]
        if plugin.split(".")[-1] not in (CONNECTOR_CLASS.split(".")[-1], "ScyllaCdcBridgeConnector"):
            raise RequestError(404, f"Unknown plugin {plugin}; this worker runs {CONNECTOR_CLASS}")

    def loggers(request: Request) -> Response:
        manager = logging.Logger.manager.loggerDict
        found = {"root": _level_of(logging.getLogger())}
        found.update({name: _level_of(item) for name, item in sorted(manager.items())
                      if isinstance(item, logging.Logger) and item.level != logging.NOTSET})
        found.update({name: _level_of(logging.getLogger(None if name == "root" else name))
                      for name in run_time_levels()})
        return _json(found)

    def logger(request: Request) -> Response:
        name = request.path_params["logger"]
        if request.method == "GET":
            known = name == "root" or name in logging.Logger.manager.loggerDict or name in run_time_levels()
            if not known:
                raise RequestError(404, f"Logger {name} not found.")
            return _json(_level_of(logging.getLogger(None if name == "root" else name)))
        level = body(request.state.body)
        text = str(level.get("level", "")).upper() if isinstance(level, dict) else ""
        if text not in LEVELS:
            raise RequestError(400, f"Invalid log level '{text}'; one of {', '.join(LEVELS)}")
        logging.getLogger(None if name == "root" else name).setLevel(_TO_STDLIB[text])
        set_run_time_level(name, _TO_STDLIB[text])  # the bridge's own (structlog) lines of that name
        return _json([name])

    def not_here(request: Request) -> Response:
        raise RequestError(405, f"{request.method} {request.url.path} is not served: {CONFIG_LIVES}")

    routes = [
        Route("/", root), Route("/health", health),
        Route("/connectors", connectors, methods=["GET"]), Route("/connectors", not_here, methods=["POST"]),
        Route("/connectors/{name}", info, methods=["GET"]),
        Route("/connectors/{name}", not_here, methods=["DELETE"]),
        Route("/connectors/{name}/config", config, methods=["GET"]),
        Route("/connectors/{name}/config", not_here, methods=["PUT", "PATCH"]),
        Route("/connectors/{name}/status", status), Route("/connectors/{name}/topics", topics),
        Route("/connectors/{name}/topics/reset", not_here, methods=["PUT"]),
        Route("/connectors/{name}/tasks", tasks), Route("/connectors/{name}/tasks/{task}/status", task_status),
        Route("/connectors/{name}/pause", target(TargetState.PAUSED, 202), methods=["PUT"]),
        Route("/connectors/{name}/resume", target(TargetState.STARTED, 202), methods=["PUT"]),
        Route("/connectors/{name}/stop", target(TargetState.STOPPED, 204), methods=["PUT"]),
        Route("/connectors/{name}/restart", restart, methods=["POST"]),
        Route("/connectors/{name}/tasks/{task}/restart", restart_task, methods=["POST"]),
        Route("/connectors/{name}/offsets", offsets, methods=["GET"]),
        Route("/connectors/{name}/offsets", alter_offsets, methods=["PATCH"]),
        Route("/connectors/{name}/offsets", reset_offsets, methods=["DELETE"]),
        Route("/connector-plugins", plugins), Route("/connector-plugins/{plugin}/config", plugin_config),
        Route("/connector-plugins/{plugin}/config/validate", validate, methods=["PUT"]),
        Route("/admin/loggers", loggers), Route("/admin/loggers/{logger}", logger, methods=["GET", "PUT"]),
    ]
    app = Starlette(routes=routes, exception_handlers={404: _not_found, 405: _not_allowed,
                                                       RequestError: _refused, KafkaUnavailableError: _unavailable})
    return _Guard(app, credentials, writes_open)


class _Guard:
    """Around the routes: the trailing slash some clients send, auth, the read-only rule, the
    body read whole (bounded) before a handler runs, and Connect's error body for every error."""

    def __init__(self, app: ASGIApp, credentials: Credentials | None, writes_open: bool) -> None:
        self._app, self._credentials, self._writes_open = app, credentials, writes_open

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return
        path = scope["path"]
        if len(path) > 1 and path.endswith("/"):
            scope = {**scope, "path": path.rstrip("/") or "/", "raw_path": path.rstrip("/").encode()}
        request = Request(scope)
        user = "anonymous"
        if self._credentials is not None:
            found = self._credentials.user_of(request.headers.get("authorization"))
            if found is None:
                await _error(401, "Credentials are required (HTTP basic auth)", scope, receive, send,
                             {"WWW-Authenticate": 'Basic realm="cdc-bridge"'})
                return
            user = found
        write = scope["method"] not in READS
        if write and self._credentials is None and not self._writes_open:
            await _error(403, "This listener is read-only: set rest.auth.credentials.file to allow changes", scope,
                         receive, send)
            return
        chunks, size = [], 0
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > MAX_BODY_BYTES:
                await _error(413, f"Request body is larger than {MAX_BODY_BYTES} bytes", scope, receive, send)
                return
            chunks.append(chunk)
            more = message.get("more_body", False)
        scope.setdefault("state", {}).update({"user": user, "body": b"".join(chunks)})
        if write:
            log.info("rest request", method=scope["method"], path=scope["path"], user=user,
                     query=scope.get("query_string", b"").decode(errors="replace"))

        async def replay() -> dict[str, Any]:
            return {"type": "http.request", "body": scope["state"]["body"], "more_body": False}

        await self._app(scope, replay, send)


async def _error(status: int, message: str, scope: Scope, receive: Receive, send: Send,
                 headers: dict[str, str] | None = None) -> None:
    await JSONResponse(error_body(status, message), status_code=status, headers=headers)(scope, receive, send)


async def _refused(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestError)
    return _json(error_body(exc.status, exc.message), exc.status)


async def _unavailable(request: Request, exc: Exception) -> Response:
    log.warning("rest request failed", method=request.method, path=request.url.path, error=str(exc))
    return _json(error_body(500, f"Kafka did not answer: {exc}"), 500)


async def _not_found(request: Request, exc: Exception) -> Response:
    return _json(error_body(404, f"Not found: {request.url.path}"), 404)


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _json(error_body(405, f"HTTP {request.method} is not supported on {request.url.path}"), 405)


def _level_of(logger: logging.Logger) -> dict[str, Any]:
    level = logger.getEffectiveLevel()
    name = {logging.CRITICAL: "FATAL", logging.ERROR: "ERROR", logging.WARNING: "WARN", logging.INFO: "INFO",
            logging.DEBUG: "DEBUG"}.get(level, "OFF" if level > logging.CRITICAL else logging.getLevelName(level))
    return {"level": name, "last_modified": None}


def _now_ms() -> int:
    return int(time.time() * 1000)


def _bridge_version() -> str:
    try:
        return version("scylla-cdc-bridge")
    except PackageNotFoundError:
        return "unknown"
