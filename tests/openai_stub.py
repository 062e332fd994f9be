"""A loopback OpenAI-compatible chat server for the served-policy tests (`openai:URL#MODEL`).

`StubServer` listens on 127.0.0.1 (a free port), records every request (`requests`: the JSON body,
the Authorization header, the arrival time), and answers ``POST /v1/chat/completions`` the way vLLM
does: ``n`` choices, choice i sampled with ``seed + i``, ``usage``, ``stop_reason``, the stop
string kept with ``include_stop_str_in_output``, and ``prompt_token_ids`` / ``token_ids`` with
``return_token_ids``. Its "model" is a script (`scripted_reply`): before any tool response it
crops the clue, then it answers with the option ``"ABCD"[seed % 4]``, so replies depend on the
sampling seed the way a sampled model's do. `fault(body, count) -> (status, extra headers[, message]) | None`
injects failures (status 0: the connection dropped); `reply(body, seed) -> message dict` replaces the script; `delay` (seconds) holds
each answer.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CROP = '<think>look at the clue</think><tool_call>{"name": "crop_video", "arguments": {"start": 12, "end": 14}}'


def message_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content or ""


def scripted_reply(body: dict[str, Any], seed: int) -> tuple[dict[str, Any], str]:
    """(message, the stop string it ended at): a crop before any tool response, then an answer."""
    answered = any("<tool_response>" in message_text(m) or m.get("role") == "tool" for m in body["messages"])
    if not answered:
        return {"role": "assistant", "content": CROP}, "</tool_call>"
    return {"role": "assistant", "content": f"<think>seen</think> <answer>{'ABCD'[seed % 4]}"}, "</answer>"


class StubServer:
    def __init__(self, model: str = "stub-vl", *, delay: float = 0.0,
                 fault: Callable[[dict[str, Any], int], tuple[int, dict[str, str]] | None] | None = None,
                 reply: Callable[[dict[str, Any], int], Any] | None = None) -> None:
        self.model, self.delay, self.fault, self.reply = model, delay, fault, reply
        self.requests: list[dict[str, Any]] = []
        self.in_flight = self.max_in_flight = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            timeout = 30
            protocol_version = "HTTP/1.1"

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802
                self._send(200, {"object": "list", "data": [{"id": stub.model, "object": "model", "owned_by": "stub"}]})

            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub._lock:
                    count = len(stub.requests)
                    stub.requests.append({"body": body, "authorization": self.headers.get("Authorization"), "time": time.perf_counter()})
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                try:
                    if stub.delay:
                        time.sleep(stub.delay)
                    self._answer(body, count)
                finally:
                    with stub._lock:
                        stub.in_flight -= 1

            def _answer(self, body: dict[str, Any], count: int) -> None:
                fault = stub.fault(body, count) if stub.fault else None
                if fault is not None:
                    status, headers, *text = fault
                    if status == 0:  # drop the connection without an answer
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                    message = text[0] if text else f"stub fault {status}"  # vLLM's error body
                    self._send(status, {"error": {"message": message, "type": "BadRequestError", "param": None, "code": status}}, headers)
                    return
                if body.get("model") != stub.model:
                    self._send(404, {"object": "error", "message": f"The model `{body.get('model')}` does not exist.", "code": 404})
                    return
                choices, completion = [], 0
                for i in range(int(body.get("n", 1))):
                    seed = int(body.get("seed", 0)) + i
                    if stub.reply is not None:
                        message, stop = stub.reply(body, seed), None
                    else:
                        message, stop = scripted_reply(body, seed)
                    if message is None:
                        continue
                    text = message.get("content") or ""
                    if stop and body.get("include_stop_str_in_output"):
                        message = dict(message, content=text + stop)
                    tokens = list(range(len(text.split()) + 1))
                    completion += len(tokens)
                    choice = {"index": i, "message": message, "finish_reason": "stop", "stop_reason": stop, "logprobs": None}
                    if body.get("return_token_ids"):
                        choice["token_ids"] = tokens
                    choices.append(choice)
                prompt = sum(len(json.dumps(m)) for m in body["messages"]) // 100
                out = {"id": f"chatcmpl-{count}", "object": "chat.completion", "created": 0, "model": stub.model, "choices": choices,
                       "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}}
                if body.get("return_token_ids"):
                    out["prompt_token_ids"] = list(range(prompt))
                self._send(200, out)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    @property
    def bodies(self) -> list[dict[str, Any]]:
        return [r["body"] for r in self.requests]

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.thread.join(timeout=5)
        self.server.server_close()
