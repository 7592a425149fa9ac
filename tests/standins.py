"""Loopback stand-ins of the model APIs the agent CLIs talk to, for the end-to-end tests.

Each serves on 127.0.0.1 only, streams one short answer in its API's wire format, and records every
request (path and parsed body) so a test can assert on exactly what the agent sent the model:
- ``anthropic``: the Messages API (``POST /v1/messages``, SSE when ``stream``), for Claude Code via
  ``ANTHROPIC_BASE_URL``;
- ``openai``: the Responses API (``POST /v1/responses``, SSE), for Codex via its provider ``base_url``;
- ``gemini``: ``generateContent`` / ``streamGenerateContent`` (``?alt=sse``), for Gemini CLI via
  ``GOOGLE_GEMINI_BASE_URL``.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ANSWER = "Noted: the stand-in model answered."


class StandIn:
    ANSWER_TEXT = ANSWER

    def __init__(self, api: str, answer: str = ANSWER, tool_call: tuple[str, dict] | None = None) -> None:
        """``tool_call`` (a tool's name, its input): the first model call that offers a tool of that
        name is answered with a call of it instead of the text, as the model would (``anthropic``, ``openai``)."""
        self.api = api
        self.answer = answer
        self.tool_call = tool_call
        self.tool_called = False
        self.requests: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        standin = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *a: Any) -> None:  # quiet
                pass

            def _body(self) -> Any:
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                if self.headers.get("Content-Encoding") == "zstd" or self.headers.get("Content-Encoding") == "gzip":
                    import gzip

                    try:
                        raw = gzip.decompress(raw)
                    except OSError:
                        pass
                try:
                    return json.loads(raw) if raw else None
                except ValueError:
                    return raw.decode("utf-8", "replace")

            def do_GET(self) -> None:  # noqa: N802
                standin._record(self.command, self.path, None, dict(self.headers))
                if standin.api == "openai" and self.path.rstrip("/").endswith("/models"):
                    self._json({"object": "list", "data": [], "models": []})
                    return
                self._json({"error": {"message": "not here"}}, 404)

            def do_HEAD(self) -> None:  # noqa: N802
                standin._record(self.command, self.path, None, dict(self.headers))
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def do_POST(self) -> None:  # noqa: N802
                body = self._body()
                standin._record(self.command, self.path, body, dict(self.headers))
                getattr(self, f"_{standin.api}")(body if isinstance(body, dict) else {})

            # ------------------------------------------------------------------ output
            def _json(self, data: Any, code: int = 200) -> None:
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _sse(self, events: list[tuple[str | None, Any]]) -> None:
                out = b""
                for name, data in events:
                    if name:
                        out += f"event: {name}\n".encode()
                    out += f"data: {json.dumps(data)}\n\n".encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                self.send_header("Content-Length", str(len(out)))
                self.end_headers()
                self.wfile.write(out)

            # ------------------------------------------------------------------ apis
            def _anthropic(self, body: dict) -> None:
                if "count_tokens" in self.path:
                    self._json({"input_tokens": 10})
                    return
                model = body.get("model", "claude")
                if standin._wants_tool(body):
                    self._anthropic_tool_use(body, model)
                    return
                msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                       "stop_reason": None, "stop_sequence": None,
                       "usage": {"input_tokens": 10, "output_tokens": 1}}
                if not body.get("stream"):
                    self._json({**msg, "content": [{"type": "text", "text": standin.answer}],
                                "stop_reason": "end_turn"})
                    return
                self._sse([
                    ("message_start", {"type": "message_start", "message": msg}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {"type": "text", "text": ""}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "text_delta", "text": standin.answer}}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn",
                                                                          "stop_sequence": None},
                                       "usage": {"output_tokens": 2}}),
                    ("message_stop", {"type": "message_stop"}),
                ])

            def _anthropic_tool_use(self, body: dict, model: str) -> None:
                assert standin.tool_call is not None
                name, args = standin.tool_call
                block = {"type": "tool_use", "id": "toolu_standin_1", "name": name, "input": args}
                msg = {"id": "msg_1", "type": "message", "role": "assistant", "model": model, "content": [],
                       "stop_reason": None, "stop_sequence": None,
                       "usage": {"input_tokens": 10, "output_tokens": 1}}
                if not body.get("stream"):
                    self._json({**msg, "content": [block], "stop_reason": "tool_use"})
                    return
                # As the API streams a tool call: the block opens with an empty input, then the
                # input arrives as partial JSON.
                self._sse([
                    ("message_start", {"type": "message_start", "message": msg}),
                    ("content_block_start", {"type": "content_block_start", "index": 0,
                                             "content_block": {**block, "input": {}}}),
                    ("content_block_delta", {"type": "content_block_delta", "index": 0,
                                             "delta": {"type": "input_json_delta",
                                                       "partial_json": json.dumps(args)}}),
                    ("content_block_stop", {"type": "content_block_stop", "index": 0}),
                    ("message_delta", {"type": "message_delta", "delta": {"stop_reason": "tool_use",
                                                                          "stop_sequence": None},
                                       "usage": {"output_tokens": 5}}),
                    ("message_stop", {"type": "message_stop"}),
                ])

            def _openai_tool_call(self, body: dict) -> None:
                assert standin.tool_call is not None
                name, args = standin.tool_call
                now = int(time.time())
                # A tool inside a namespace (Codex offers an MCP server's tools as one): "<namespace>.<tool>".
                namespace, _, function = name.rpartition(".")
                item = {"type": "function_call", "id": "fc_1", "call_id": "call_standin_1", "name": function,
                        **({"namespace": namespace} if namespace else {}),
                        "arguments": json.dumps(args), "status": "completed"}
                resp = {"id": "resp_1", "object": "response", "created_at": now, "status": "in_progress",
                        "model": body.get("model", "gpt"), "output": []}
                usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 5,
                         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 15}
                # As the Responses API streams a function call: the item, its arguments, the item done.
                self._sse([
                    ("response.created", {"type": "response.created", "response": resp}),
                    ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                    "item": {**item, "arguments": "", "status": "in_progress"}}),
                    ("response.function_call_arguments.delta", {"type": "response.function_call_arguments.delta",
                                                                "item_id": "fc_1", "output_index": 0,
                                                                "delta": item["arguments"]}),
                    ("response.function_call_arguments.done", {"type": "response.function_call_arguments.done",
                                                               "item_id": "fc_1", "output_index": 0,
                                                               "arguments": item["arguments"]}),
                    ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                   "item": item}),
                    ("response.completed", {"type": "response.completed",
                                            "response": {**resp, "status": "completed", "output": [item],
                                                         "usage": usage}}),
                ])

            def _openai(self, body: dict) -> None:
                if standin._wants_tool(body):
                    self._openai_tool_call(body)
                    return
                now = int(time.time())
                item = {"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
                        "content": [{"type": "output_text", "text": standin.answer, "annotations": []}]}
                resp = {"id": "resp_1", "object": "response", "created_at": now, "status": "in_progress",
                        "model": body.get("model", "gpt"), "output": []}
                usage = {"input_tokens": 10, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 2,
                         "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 12}
                self._sse([
                    ("response.created", {"type": "response.created", "response": resp}),
                    ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0,
                                                    "item": {**item, "status": "in_progress", "content": []}}),
                    ("response.output_text.delta", {"type": "response.output_text.delta", "item_id": "msg_1",
                                                    "output_index": 0, "content_index": 0,
                                                    "delta": standin.answer}),
                    ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0,
                                                   "item": item}),
                    ("response.completed", {"type": "response.completed",
                                            "response": {**resp, "status": "completed", "output": [item],
                                                         "usage": usage}}),
                ])

            def _gemini(self, body: dict) -> None:
                if ":countTokens" in self.path:
                    self._json({"totalTokens": 10})
                    return
                part: dict[str, Any] = {"text": standin.answer}
                if standin._wants_tool(body):
                    assert standin.tool_call is not None
                    part = {"functionCall": {"name": standin.tool_call[0], "args": standin.tool_call[1]}}
                chunk = {"candidates": [{"content": {"role": "model", "parts": [part]},
                                         "finishReason": "STOP", "index": 0}],
                         "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 2,
                                           "totalTokenCount": 12},
                         "modelVersion": "gemini-stand-in"}
                if ":streamGenerateContent" in self.path:
                    self._sse([(None, chunk)])
                else:
                    self._json(chunk)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def _record(self, method: str, path: str, body: Any, headers: dict) -> None:
        with self._lock:
            self.requests.append({"method": method, "path": path, "body": body, "headers": headers})

    def _wants_tool(self, body: dict) -> bool:
        """Whether this call gets the tool call: the first one offering the tool by that name."""
        if self.tool_call is None:
            return False
        with self._lock:
            if self.tool_called or self.tool_call[0] not in tool_names(body):
                return False
            self.tool_called = True
            return True

    def model_calls(self) -> list[dict]:
        """The requests that asked the model for an answer (not token counts or model lists)."""
        keys = {"anthropic": "/v1/messages", "openai": "/responses", "gemini": "generateContent"}
        with self._lock:
            return [r for r in self.requests
                    if r["method"] == "POST" and keys[self.api].lower() in r["path"].lower()
                    and "count_tokens" not in r["path"]]

    def __enter__(self) -> StandIn:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def tool_names(body: Any) -> list[str]:
    """The names of the tools a model call offered (the ``tools`` list, Anthropic's and OpenAI's); a
    tool inside an OpenAI ``namespace`` tool as ``<namespace>.<tool>``."""
    tools = body.get("tools") if isinstance(body, dict) else None
    names = []
    for t in tools if isinstance(tools, list) else []:
        if isinstance(t, dict) and isinstance(t.get("functionDeclarations"), list):  # Gemini
            names += [f.get("name", "") for f in t["functionDeclarations"] if isinstance(f, dict)]
        elif isinstance(t, dict) and t.get("type") == "namespace":
            names += [f"{t.get('name')}.{f.get('name')}" for f in t.get("tools") or [] if isinstance(f, dict)]
        elif isinstance(t, dict) and t.get("name"):
            names.append(t["name"])
    return names
