"""One client for OpenAI-compatible servers (``vllm serve``, SGLang, hosted APIs), shared by the LLM
judge (`agents.judge.OpenAIJudge`) and the served policy (`agents.openai_policy.OpenAIPolicy`).

What every caller gets from it:

- **Endpoints** are written ``URL[#MODEL]`` (after the ``openai:`` prefix of a spec):
  `parse_endpoint`. Without a model the client asks ``GET /models`` once and takes the first.
- **Retries with backoff.** A 408, 409, 429 or 5xx answer, a connection error, a timeout and a
  body that is not JSON are retried `retries` times, waiting `backoff`, 2 x `backoff`, ... (at most
  30 s; a ``Retry-After`` header is honoured up to 60 s). Anything else (a 400, a 404) is not: the
  request is wrong, and asking again would not change the answer. What still fails is an
  `OpenAIError`, one line: `ServerUnreachable` (no answer) or `ServerRefused` (an HTTP status).
- **Concurrency.** `post_many` keeps up to `concurrency` requests in flight on one ``httpx``
  connection pool (asyncio, on a private event-loop thread, so it works from plain code, from
  threads and from a notebook whose own loop is running).
- **The API key** comes from the environment variable `api_key_env` (``OPENAI_API_KEY`` by
  default) when the request is sent; it is never stored: `Endpoint.record()` names the variable
  only. A local server started without ``--api-key`` needs none, and none is sent.
- **The response cache** (`ResponseCache`): one JSONL line per response, keyed by a digest of its
  request (`request_key`); a run keeps its own file (`RUN/openai_responses.jsonl`) and can replay
  another's with the server down.

``httpx`` is the only dependency (the ``judge`` extra installs it).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

RETRIED_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})
MAX_BACKOFF_S = 30.0
MAX_RETRY_AFTER_S = 60.0
INSTALL_HINT = "the OpenAI-compatible client needs httpx (pip install 'videoseek[judge]')"


class OpenAIError(RuntimeError):
    """A request that failed after its retries, or could not be made (one line); `detail` is the
    cause without the endpoint (what the judge words its own way)."""

    status: int | None = None

    def __init__(self, message: str, detail: str = "") -> None:
        super().__init__(message)
        self.detail = detail or message


class ServerUnreachable(OpenAIError):
    """No answer: connection refused or reset, a timeout, a body that is not JSON."""


class ServerRefused(OpenAIError):
    """The server answered an HTTP error status (`status`); `detail` is its error message."""

    def __init__(self, message: str, status: int, detail: str = "") -> None:
        super().__init__(message, detail)
        self.status = status


def parse_endpoint(target: str) -> tuple[str, str | None]:
    """``(url, model)`` of ``URL[#MODEL]``; ValueError for anything but an http(s) URL with a host.

    >>> parse_endpoint("http://127.0.0.1:8000/v1#Qwen/Qwen2.5-VL-7B-Instruct")
    ('http://127.0.0.1:8000/v1', 'Qwen/Qwen2.5-VL-7B-Instruct')
    >>> parse_endpoint("https://api.openai.com/v1")
    ('https://api.openai.com/v1', None)
    """
    url, _, model = target.partition("#")
    if not url.startswith(("http://", "https://")) or not url.split("://", 1)[1].strip("/"):
        raise ValueError(f"openai:{target}: expected openai:http(s)://HOST:PORT/v1[#MODEL]")
    return url.rstrip("/"), model or None


@dataclass(frozen=True)
class Endpoint:
    """Where requests go and how hard to try. `timeout` is per request (seconds), `retries` the
    extra tries after the first, `backoff` the first wait (seconds, doubling)."""

    url: str
    model: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    timeout: float = 300.0
    retries: int = 4
    backoff: float = 1.0

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"timeout must be positive, got {self.timeout}")
        if self.retries < 0:
            raise ValueError(f"retries must be at least 0, got {self.retries}")
        if not self.api_key_env.isidentifier():
            raise ValueError(f"api_key_env must name an environment variable, got {self.api_key_env!r}")

    def api_key(self) -> str | None:
        """The key, read now from the environment (never kept on the object or recorded)."""
        return os.environ.get(self.api_key_env) or None

    def record(self) -> dict[str, Any]:
        """What run.json keeps of the endpoint: no key, only the variable it was read from."""
        return {"url": self.url, "model": self.model, "api_key_env": self.api_key_env, "api_key_set": self.api_key() is not None,
                "timeout": self.timeout, "retries": self.retries}  # fmt: skip


def _first_line(text: str, limit: int = 300) -> str:
    line = next((x.strip() for x in str(text).splitlines() if x.strip()), "")
    return line[:limit]


def _error_detail(response: Any) -> str:
    """The server's error message (vLLM and OpenAI: {"error": {"message"}} or {"message"})."""
    try:
        body = response.json()
    except ValueError:
        return _first_line(response.text)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return _first_line(err["message"])
        if isinstance(err, str):
            return _first_line(err)
    return _first_line(response.text)


class OpenAIClient:
    """Requests to one `Endpoint` (see the module docstring). Thread-safe; `close()` when done.

    `stats`: requests sent (tries included), retries, failures, and the wall seconds spent waiting
    for answers, for benchmarks and run summaries.
    """

    def __init__(self, endpoint: Endpoint, concurrency: int = 8, sleep: Callable[[float], Any] | None = None) -> None:
        try:
            import httpx  # noqa: F401
        except ImportError:
            raise OpenAIError(INSTALL_HINT) from None
        if concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {concurrency}")
        self.endpoint, self.concurrency = endpoint, concurrency
        self.model = endpoint.model  # set by `resolve_model` when the endpoint names none
        self._sleep = sleep or asyncio.sleep
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._http: Any = None
        self._lock = threading.Lock()
        self.stats = {"requests": 0, "retries": 0, "failures": 0, "seconds": 0.0}

    # -- the private event loop ------------------------------------------------------------------
    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._loop is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="videoseek-openai-client", daemon=True)
                thread.start()
                self._loop, self._thread = loop, thread
            return self._loop

    def _run(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._ensure_loop()).result()

    def _client(self) -> Any:
        import httpx

        if self._http is None:  # created on the loop's thread, used only there
            limits = httpx.Limits(max_connections=self.concurrency, max_keepalive_connections=self.concurrency)
            self._http = httpx.AsyncClient(timeout=httpx.Timeout(self.endpoint.timeout), limits=limits)
        return self._http

    def close(self) -> None:
        """Close the connections and stop the loop thread (the client can be used again after)."""
        loop, thread = self._loop, self._thread
        if loop is None:
            return
        if self._http is not None:
            asyncio.run_coroutine_threadsafe(self._http.aclose(), loop).result()
            self._http = None
        loop.call_soon_threadsafe(loop.stop)
        if thread is not None:
            thread.join(timeout=5)
        loop.close()
        self._loop = self._thread = None

    # -- requests --------------------------------------------------------------------------------
    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        key = self.endpoint.api_key()
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    async def _request(self, method: str, path: str, body: bytes | None) -> dict[str, Any]:
        import httpx

        url = self.endpoint.url + path
        where = f"openai:{self.endpoint.url}"
        attempt = 0
        while True:
            self.stats["requests"] += 1
            wait: float | None = None
            t0 = time.perf_counter()
            response = None
            try:
                response = await self._client().request(method, url, content=body, headers=self._headers())
            except httpx.TimeoutException as exc:
                cause = f"no answer within {self.endpoint.timeout:g} s ({type(exc).__name__})"
                error: OpenAIError = ServerUnreachable(f"{where}: {cause}", cause)
            except httpx.TransportError as exc:
                cause = f"{type(exc).__name__}: {_first_line(str(exc)) or 'no detail'}"
                error = ServerUnreachable(f"{where}: cannot reach the server ({cause})", cause)
            self.stats["seconds"] += time.perf_counter() - t0
            if response is not None and response.status_code < 400:
                try:
                    out = response.json()
                except ValueError:
                    out = None
                if isinstance(out, dict):
                    return out
                cause = f"the server answered {response.status_code} with a body that is not a JSON object"
                error = ServerUnreachable(f"{where}: {cause}", cause)
            elif response is not None:
                detail = _error_detail(response)
                error = ServerRefused(f"{where}: the server answered {response.status_code} ({detail})", response.status_code, detail)
                if response.status_code not in RETRIED_STATUS:
                    self.stats["failures"] += 1
                    raise error
                wait = _retry_after(response.headers.get("retry-after"))
            if attempt >= self.endpoint.retries:
                self.stats["failures"] += 1
                if attempt:
                    tries = f" after {attempt + 1} tries"
                    if isinstance(error, ServerRefused):
                        raise ServerRefused(f"{error}{tries}", error.status, error.detail)
                    raise type(error)(f"{error}{tries}", f"{error.detail}{tries}")
                raise error
            delay = wait if wait is not None else min(MAX_BACKOFF_S, self.endpoint.backoff * 2**attempt) * (0.75 + 0.5 * random.random())
            attempt += 1
            self.stats["retries"] += 1
            await self._sleep(delay)

    def get(self, path: str) -> dict[str, Any]:
        """``GET url + path`` (e.g. ``/models``), with the retries."""
        return self._run(self._request("GET", path, None))

    def post(self, path: str, body: Mapping[str, Any] | bytes) -> dict[str, Any]:
        """``POST url + path`` with a JSON body (a dict, or its encoded bytes), with the retries."""
        return self._run(self._request("POST", path, _encode(body)))

    def post_many(self, path: str, bodies: Sequence[Mapping[str, Any] | bytes]) -> list[dict[str, Any] | OpenAIError]:
        """Each body's answer, or its `OpenAIError`, in order; `concurrency` requests in flight."""

        async def all_of() -> list[Any]:
            gate = asyncio.Semaphore(self.concurrency)

            async def one(body: bytes) -> Any:
                async with gate:
                    try:
                        return await self._request("POST", path, body)
                    except OpenAIError as exc:
                        return exc

            return await asyncio.gather(*(one(_encode(b)) for b in bodies))

        return self._run(all_of()) if bodies else []

    def resolve_model(self) -> str:
        """The endpoint's model, else the first one the server lists (asked once)."""
        if self.model is None:
            models = self.get("/models").get("data") or []
            if not models or not isinstance(models[0], dict) or not models[0].get("id"):
                raise OpenAIError(f"openai:{self.endpoint.url}: the server lists no model; name one with #MODEL")
            self.model = str(models[0]["id"])
        return self.model


def _encode(body: Mapping[str, Any] | bytes) -> bytes:
    return body if isinstance(body, bytes) else json.dumps(body, ensure_ascii=False).encode()


def _retry_after(value: str | None) -> float | None:
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value))) if value is not None else None
    except ValueError:
        return None


# ---- the response cache -------------------------------------------------------------------------
def request_key(fields: Mapping[str, Any], message_digests: Iterable[str] = ()) -> str:
    """SHA-256 of a request: its fields (JSON with sorted keys) and its messages' digests, so a
    long conversation is keyed without hashing its frames again (`OpenAIPolicy` digests each
    message once). A request without such digests is keyed by its fields alone.

    >>> request_key({"model": "m", "seed": 1}) == request_key({"seed": 1, "model": "m"})
    True
    """
    h = hashlib.sha256(json.dumps(dict(fields), sort_keys=True, ensure_ascii=False).encode())
    for digest in message_digests:
        h.update(b"\0" + digest.encode())
    return h.hexdigest()


class ResponseCache:
    """Responses keyed by their request (`request_key`), kept in the JSONL file `path` (appended,
    one ``{"key", ..., "response"}`` object a line) and read from `replay` files too.

    A line cut by a killed run is skipped on load. `get` looks in memory (this run's file and the
    replayed ones); `put` keeps a response and appends it to `path` unless that file holds it
    already (a replayed response is copied once, so the new run replays on its own).
    """

    def __init__(self, path: str | Path | None, replay: Sequence[str | Path] = ()) -> None:
        self.path = Path(path) if path is not None else None
        self._responses: dict[str, dict[str, Any]] = {}
        self._own: set[str] = set()  # keys the file at `path` holds
        self._lock = threading.Lock()
        self.hits = self.stored = 0
        for source in replay:
            self._load(Path(source), own=False)
        if self.path is not None:
            self._load(self.path, own=True)

    def _load(self, path: Path, own: bool) -> None:
        if not path.is_file():
            return
        with path.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # cut by a kill
                if isinstance(row, dict) and isinstance(row.get("key"), str) and isinstance(row.get("response"), dict):
                    self._responses[row["key"]] = row["response"]
                    if own:
                        self._own.add(row["key"])

    def __len__(self) -> int:
        return len(self._responses)

    def __contains__(self, key: str) -> bool:
        return key in self._responses

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            response = self._responses.get(key)
            if response is not None:
                self.hits += 1
            return response

    def put(self, key: str, response: dict[str, Any], **meta: Any) -> None:
        """Keep `response` under `key`; append it with `meta` (e.g. the episode and turn) to the file."""
        with self._lock:
            self._responses[key] = response
            if self.path is None or key in self._own:
                return
            self._own.add(key)
            self.stored += 1
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"key": key, **meta, "response": response}, ensure_ascii=False) + "\n")
