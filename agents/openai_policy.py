"""`OpenAIPolicy` (``openai:URL[#MODEL]``): a model served over the OpenAI chat API (``vllm serve``,
SGLang, a hosted API) as a VideoSeek policy. docs/serving.md, "Evaluate a served model", lists the
server flags each feature needs.

**What the model sees is what training shows it.** Each request is the env's conversation laid out
as `ConversationRenderer` lays it out for a local checkpoint (`prompting.lay_out`,
`prompting.frames_content`), so a server applying the checkpoint's chat template builds the same
prompt:

- the env's system prompt (`info["instructions"]`), defanged like the renderer's (a zero-width space
  after the ``<`` of every ``<|...|>`` control string), followed by the tool list as Qwen's Hermes
  template writes it (`tools_block`: ``# Tools ... <tools>{schema}</tools> ...``). So the *text*
  tool protocol needs no server flag, and the prompt's tokens are those of the renderer's system
  turn, which passes the same schemas to the template.
- the question with its frames, then alternating assistant turns (their text) and tool turns. A
  tool turn is sent as a ``user`` message wrapped in ``<tool_response>\\n ... \\n</tool_response>``:
  the text Qwen's templates (and VideoSeek's) write for a ``tool`` message, which any server
  accepts without a preceding ``tool_calls`` message.
- frames (`frames`): ``"video"`` (default) sends each message's frames as one ``video_url`` of
  JPEG frames (``data:video/jpeg;base64,<f1>,<f2>,...``, vLLM's frame-list video); ``"images"``
  one ``image_url`` per frame after its ``Frame at 12.0s:`` label, as the renderer's images mode.
  Every frame is JPEG-encoded once per episode (once per group for the shared first frames, which
  the env hands every episode as the same read-only array), and each message's JSON is built
  once: every later request resends the same bytes, so the server's prefix and multimodal caches
  hit, and the client's cost of a turn stays flat as the history grows (bench/bench_openai_client.py).
- frame times (`frame_times`): the label before each video (``Frames at 0.0s, 2.5s, ...:``) always
  states them, as in training. vLLM reads a video's own times only from the request-level
  ``media_io_kwargs`` (``--trust-request-mm-kwargs``), one setting for every video of a request.
  ``"auto"`` (default) sends them (`prompting.frames_metadata`: the renderer's metadata, so
  Qwen3-VL's ``<t seconds>`` and Qwen2.5-VL's temporal positions are the renderer's) when all the
  request's videos share one set of times (a first turn, a no-tool run), and the labels alone
  otherwise; a server that refuses them (400) gets the labels alone for the rest of the run
  (`record()` says so). ``"text"`` never sends them.
- native function calling (`tool_protocol="native"`, servers started with
  ``--enable-auto-tool-choice --tool-call-parser hermes``): the env's schemas go as ``tools``, the
  reply's ``tool_calls`` are mapped back to the env's action text,
  ``<tool_call>{"name": N, "arguments": A}</tool_call>`` after the reply's content (the first call
  of a reply; `parallel_tool_calls` is off), and the tool turn that answers it goes back as a
  ``tool`` message with its ``tool_call_id``. Each cached response line keeps the text it was mapped to.

**Decoding.** `Decoding`'s fields; ``stop`` strings are kept in the turn (vLLM's
``include_stop_str_in_output``, else put back from the server's ``stop_reason`` or the tag the
turn left open). Each episode's turn t is sampled with seed ``stable_seed(seed, group, t) + i`` for
the group's episode i, so the G episodes of a group can share one first request with ``n = G``
(`share_initial`): vLLM samples its choice i with ``seed + i``, the seed the episode would have
sent alone. With ``extras="vllm"`` (default) vLLM's fields are sent (``top_k``,
``include_stop_str_in_output``, ``media_io_kwargs``, ``return_token_ids``, ``continue_final_message``
for a turn prefix); ``extras="none"`` sends only OpenAI's own fields (hosted APIs reject others).

**Faults.** Up to `concurrency` requests are in flight (`agents.openai_client`), each retried with
backoff on 429s, 5xx answers, connection errors and timeouts. A request that still fails fails
its episodes only: `act` raises after answering the batch, the driver asks again one episode at
a time, the answered ones come from the cache, and the failed one raises its own error, which the
driver records as that episode's `failure`. A reply without a usable turn (no choice, no text and
no tool call) is the env's `Invalid` turn (`PolicyOutput.invalid`), never an exception.

**Replay.** Every response is cached under its request's key (`openai_client.request_key`; a
shared request is stored per choice, under the request its episode would have sent alone) in the
run's ``openai_responses.jsonl``; a rerun of the run answers from it, and ``offline=True`` with
`replay` files (``videoseek rollout --from-run``) answers only from them, the server down.
Token usage per turn is `PolicyOutput.usage` (the trajectory's ``tokens``).
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import threading
import time
import warnings
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from videoseek.agents.model_options import Decoding, split_options
from videoseek.agents.openai_client import Endpoint, OpenAIClient, OpenAIError, ResponseCache, ServerRefused, parse_endpoint, request_key
from videoseek.agents.policy import Message, PolicyInput, PolicyOutput, stable_seed
from videoseek.agents.prompting import MODES, ZERO_WIDTH_SPACE, frames_content, frames_metadata, lay_out, schemas_of

CACHE_FILE = "openai_responses.jsonl"
FRAME_TIMES = ("auto", "text")
TOOL_PROTOCOLS = ("text", "native")
EXTRAS = ("vllm", "none")
# vLLM keeps the first 32 frames of a video unless told otherwise (`num_frames`).
VLLM_DEFAULT_VIDEO_FRAMES = 32
_CONTROL = re.compile(r"<\|[A-Za-z0-9_]{1,64}\|>")
_GROUP_MEMBER = re.compile(r"^(?P<group>.+)/g(?P<index>\d+)$")
FAILED_BATCH = "requests failed"

# Qwen's Hermes tool block, as Qwen2.5 / Qwen3 templates (and `prompting.VIDEOSEEK_CHAT_TEMPLATE`)
# write it after the system text; each schema is HF's `tojson` (json.dumps, default separators).
_TOOLS_HEAD = ("\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
               "You are provided with function signatures within <tools></tools> XML tags:\n<tools>")  # fmt: skip
_TOOLS_TAIL = ("\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
               "<tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>")  # fmt: skip


def tools_block(schemas: Sequence[Mapping[str, Any]]) -> str:
    """The system prompt's tool list as the chat template writes it ("" without tools)."""
    if not schemas:
        return ""
    return _TOOLS_HEAD + "".join("\n" + json.dumps(dict(s), ensure_ascii=False) for s in schemas) + _TOOLS_TAIL


def defang(text: str) -> str:
    """`ConversationRenderer.defang` without a tokenizer: every ``<|name|>`` control string gets a
    zero-width space after its ``<``, so message text can never open a turn or a vision run.

    >>> defang("say <|im_end|> now") == "say <" + ZERO_WIDTH_SPACE + "|im_end|> now"
    True
    """
    return _CONTROL.sub(lambda m: "<" + ZERO_WIDTH_SPACE + m.group(0)[1:], text) if "<|" in text else text


def close_open_tag(text: str, stop: Sequence[str], stop_reason: Any = None) -> str:
    """The turn with the stop string the server cut off put back: vLLM's `stop_reason` when it is
    one of `stop`, else the closing tag of the last tag the turn left open (``<answer>`` ...).

    >>> close_open_tag("<think>x</think> <answer>B", ("</tool_call>", "</answer>"))
    '<think>x</think> <answer>B</answer>'
    """
    if isinstance(stop_reason, str) and stop_reason in stop:
        return text if text.endswith(stop_reason) else text + stop_reason
    for closing in stop:
        if closing.startswith("</") and closing.endswith(">") and text.count("<" + closing[2:]) > text.count(closing):
            return text + closing
    return text


@dataclass(frozen=True)
class ServedProtocol:
    """How the conversation goes to the server (recorded in run.json): see the module docstring."""

    frames: str = "video"
    frame_times: str = "auto"
    tool_protocol: str = "text"
    extras: str = "vllm"
    share_initial: bool = True
    return_token_ids: bool = False
    jpeg_quality: int = 95

    def __post_init__(self) -> None:
        for name, value, choices in (("frames", self.frames, MODES), ("frame_times", self.frame_times, FRAME_TIMES),
                                     ("tool_protocol", self.tool_protocol, TOOL_PROTOCOLS), ("extras", self.extras, EXTRAS)):  # fmt: skip
            if value not in choices:
                raise ValueError(f"openai policy: {name} must be one of {', '.join(choices)}, got {value!r}")
        if not 1 <= self.jpeg_quality <= 100:
            raise ValueError(f"openai policy: jpeg_quality must be within 1..100, got {self.jpeg_quality}")
        if self.extras == "none" and self.return_token_ids:
            raise ValueError("openai policy: return_token_ids is a vLLM field; it needs extras='vllm'")

    def record(self) -> dict[str, Any]:
        out = {k: getattr(self, k) for k in ("frames", "frame_times", "tool_protocol", "extras", "share_initial", "return_token_ids", "jpeg_quality")}
        out["tool_response"] = ("role 'tool' with the call's id after a mapped tool call, else a user message in <tool_response>"
                                if self.tool_protocol == "native" else "a user message wrapped in <tool_response>...</tool_response>")
        if self.tool_protocol == "native":
            out["tool_call_mapping"] = 'content + <tool_call>{"name": NAME, "arguments": ARGUMENTS}</tool_call> (the first call of a reply)'
        return out


@dataclass
class _EpisodeMessages:
    """One episode's conversation as sent: each message's JSON (built once) and digest."""

    held: list[Message] = field(default_factory=list)
    json: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)
    videos: list[tuple[float, ...]] = field(default_factory=list)  # each video's frame times, in order
    frame_counts: list[int] = field(default_factory=list)
    tools_key: str = ""
    # native protocol: the assistant turns mapped from tool calls, by turn: (text, message dict, call id)
    native: dict[int, tuple[str, dict[str, Any], str]] = field(default_factory=dict)


@dataclass
class _Request:
    """One episode's request at one turn (before sharing)."""

    item: PolicyInput
    fields: dict[str, Any]  # everything but messages, seed and n
    messages: _EpisodeMessages
    extra_messages: list[str]  # a turn prefix's final assistant message
    seed: int
    group: tuple[str, int] | None  # (group key, index) for sharing a first turn
    keys: list[str]  # this episode's keys (the media_io_kwargs variant first)


class OpenAIPolicy:
    """A served model as a `Policy` (see the module docstring).

    `target` is ``URL[#MODEL]`` (what follows ``openai:``; `model` overrides the ``#MODEL``).
    `decoding` (or its fields as keywords) is `Decoding`; `tools` the tool list until an input
    carries the env's schemas (True: the default tools). `cache` is the JSONL response file
    (``RUN/openai_responses.jsonl``; None: in memory only), `replay` other runs' response files
    read first, and `offline` answers from the cache alone (a miss fails that episode). `timeout`,
    `retries`, `backoff`, `api_key_env` and `concurrency` go to the client
    (`agents.openai_client`). The rest are `ServedProtocol`'s fields.
    """

    def __init__(
        self,
        target: str,
        decoding: Decoding | None = None,
        *,
        model: str | None = None,
        tools: bool | Sequence[str] | Sequence[Mapping[str, Any]] = True,
        frames: str = "video",
        frame_times: str = "auto",
        tool_protocol: str = "text",
        extras: str = "vllm",
        share_initial: bool = True,
        return_token_ids: bool = False,
        jpeg_quality: int = 95,
        concurrency: int = 8,
        timeout: float = 300.0,
        retries: int = 4,
        backoff: float = 1.0,
        api_key_env: str = "OPENAI_API_KEY",
        cache: str | Path | None = None,
        replay: Sequence[str | Path] = (),
        offline: bool = False,
        name: str | None = None,
        **decoding_fields: Any,
    ) -> None:
        self.decoding, _ = split_options(Decoding, decoding, decoding_fields, type(self).__name__)
        url, spec_model = parse_endpoint(target)
        self.protocol = ServedProtocol(frames, frame_times, tool_protocol, extras, share_initial, return_token_ids, jpeg_quality)
        if extras == "none" and self.decoding.top_k is not None:
            raise ValueError("openai policy: top_k is not an OpenAI API field; drop it or use extras='vllm'")
        if concurrency < 1:
            raise ValueError(f"openai policy: concurrency must be at least 1, got {concurrency}")
        self.endpoint = Endpoint(url, model or spec_model, api_key_env=api_key_env, timeout=timeout, retries=retries, backoff=backoff)
        self.concurrency = concurrency
        self.tools = schemas_of(tools)
        self.offline = offline
        self.cache = ResponseCache(cache, replay=replay)
        self.replay = [str(Path(p)) for p in replay]
        self._client: OpenAIClient | None = None
        self.model = self.endpoint.model
        self.name = name or f"openai:{spec_model or url}"
        self._states: dict[str, _EpisodeMessages] = {}
        self._frames: dict[tuple[int, int], tuple[weakref.ref, list[str]]] = {}  # JPEG base64 of read-only frame arrays
        self._failed: dict[str, OpenAIError] = {}  # the last batch's failed requests, by key
        self._media_refused = False
        self._lock = threading.Lock()
        self.stats = {"turns": 0, "requests": 0, "shared_requests": 0, "cache_hits": 0, "failures": 0, "invalid": 0,
                      "native_calls": 0, "frames_encoded": 0, "client_cpu_s": 0.0, "wait_s": 0.0}  # fmt: skip

    # -- the client ------------------------------------------------------------------------------
    def client(self) -> OpenAIClient:
        if self._client is None:
            self._client = OpenAIClient(self.endpoint, concurrency=self.concurrency)
        return self._client

    def _resolve_model(self) -> str:
        if self.model is None:
            if self.offline:
                raise OpenAIError(f"openai:{self.endpoint.url}: replaying offline needs the model name (#MODEL)")
            self.model = self.client().resolve_model()
        return self.model

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def record(self) -> dict[str, Any]:
        """What run.json keeps: endpoint (no key), model, decoding, protocol, cache and counts."""
        endpoint = self.endpoint.record() | {"model": self.model}
        protocol = self.protocol.record()
        if self._media_refused:
            protocol["frame_times_sent"] = "labels only: the server refused media_io_kwargs (start it with --trust-request-mm-kwargs)"
        return {"endpoint": endpoint, "model": self.model, "decoding": self.decoding.record(), "protocol": protocol,
                "concurrency": self.concurrency, "cache": {"file": str(self.cache.path) if self.cache.path else None,
                                                           "replay": self.replay, "offline": self.offline},
                "stats": dict(self.stats)}  # fmt: skip

    # -- frames ----------------------------------------------------------------------------------
    def _frame_b64(self, frames: np.ndarray) -> list[str]:
        """Base64 JPEG of each frame; a read-only array (the env's, shared by a group) is encoded
        once while it lives."""
        memo = (id(frames), self.protocol.jpeg_quality)
        if not frames.flags.writeable:
            hit = self._frames.get(memo)
            if hit is not None and hit[0]() is frames:
                return hit[1]
        from PIL import Image

        out = []
        for frame in frames:
            buf = io.BytesIO()
            Image.fromarray(np.ascontiguousarray(frame)).save(buf, format="JPEG", quality=self.protocol.jpeg_quality)
            out.append(base64.b64encode(buf.getvalue()).decode("ascii"))
        self.stats["frames_encoded"] += len(out)
        if not frames.flags.writeable:
            try:
                ref = weakref.ref(frames, lambda _, k=memo: self._frames.pop(k, None))
            except TypeError:
                return out
            self._frames[memo] = (ref, out)
        return out

    def _frame_parts(self, frames: np.ndarray, timestamps: np.ndarray) -> list[dict[str, Any]]:
        """The frames' content parts in the renderer's layout: labels, then a video or images."""
        encoded = self._frame_b64(frames)
        parts: list[dict[str, Any]] = []
        image = 0
        for item in frames_content(timestamps, self.protocol.frames):
            if item["type"] == "text":
                parts.append({"type": "text", "text": item["text"]})
            elif item["type"] == "video":
                parts.append({"type": "video_url", "video_url": {"url": "data:video/jpeg;base64," + ",".join(encoded)}})
            else:
                parts.append({"type": "image_url", "image_url": {"url": "data:image/jpeg;base64," + encoded[image]}})
                image += 1
        return parts

    # -- messages --------------------------------------------------------------------------------
    @staticmethod
    def _content(parts: list[Any]) -> Any:
        """Adjacent text parts joined (the template concatenates them anyway); one text is a string."""
        merged: list[dict[str, Any]] = []
        for part in parts:
            if isinstance(part, str):
                part = {"type": "text", "text": part}
            if part["type"] == "text" and merged and merged[-1]["type"] == "text":
                merged[-1] = {"type": "text", "text": merged[-1]["text"] + part["text"]}
            elif part["type"] != "text" or part["text"]:
                merged.append(part)
        if len(merged) == 1 and merged[0]["type"] == "text":
            return merged[0]["text"]
        return merged or ""

    def _message(self, state: _EpisodeMessages, message: Message, k: int, tools: list[dict[str, Any]]) -> dict[str, Any]:
        """The JSON message of conversation message `k` (see the module docstring for the layout)."""
        frames = message.frames if message.frames is not None and len(message.frames) else None
        if frames is not None and message.role not in ("user", "tool"):
            raise ValueError(f"message {k} ({message.role}): only user and tool messages may carry frames")
        frame_parts: list[Any] = []
        if frames is not None:
            if message.timestamps is None or len(message.timestamps) != len(frames):
                raise ValueError(f"message {k} ({message.role}): field 'timestamps' must give one time per frame")
            ts = np.asarray(message.timestamps, dtype=np.float64)
            frame_parts = self._frame_parts(np.asarray(frames), ts)
            if self.protocol.frames == "video":
                state.videos.append(tuple(float(t) for t in ts))
                state.frame_counts.append(len(frames))
        if message.role == "system":
            block = tools_block(tools) if self.protocol.tool_protocol == "text" else ""
            return {"role": "system", "content": defang(message.text) + block}
        if message.role == "assistant":
            turn = sum(1 for m in state.held[:k] if m.role == "assistant")
            native = state.native.get(turn)
            if native is not None and native[0] == message.text:
                return native[1]
            return {"role": "assistant", "content": message.text}
        if message.role == "user":
            return {"role": "user", "content": self._content(lay_out("user", defang(message.text), frame_parts))}
        if message.role != "tool":
            raise ValueError(f"message {k}: role must be system, user, assistant or tool, got {message.role!r}")
        body = lay_out("tool", defang(message.text), frame_parts)
        previous = state.held[k - 1] if k else None
        if self.protocol.tool_protocol == "native" and previous is not None and previous.role == "assistant":
            turn = sum(1 for m in state.held[: k - 1] if m.role == "assistant")
            native = state.native.get(turn)
            if native is not None and native[0] == previous.text:
                return {"role": "tool", "tool_call_id": native[2], "content": self._content(body)}
        return {"role": "user", "content": self._content(["<tool_response>\n", *body, "\n</tool_response>"])}

    def _conversation(self, item: PolicyInput) -> _EpisodeMessages:
        """The episode's messages as JSON, extended by the messages added since its last turn."""
        tools = schemas_of(item.tools) if item.tools is not None else self.tools
        tools_key = hashlib.sha256(json.dumps(tools, sort_keys=True).encode()).hexdigest()
        state = self._states.get(item.episode_id) if item.episode_id else None
        if state is None or state.tools_key != tools_key or len(state.held) > len(item.messages) or any(
            a is not b for a, b in zip(state.held, item.messages)
        ):
            native = state.native if state is not None else {}
            state = _EpisodeMessages(tools_key=tools_key, native=native)
        for k in range(len(state.held), len(item.messages)):
            message = item.messages[k]
            state.held.append(message)
            try:
                text = json.dumps(self._message(state, message, k, tools), ensure_ascii=False)
            except BaseException:
                self._states.pop(item.episode_id, None)
                raise
            state.json.append(text)
            state.digests.append(hashlib.sha256(text.encode()).hexdigest())
        if item.episode_id:
            self._states[item.episode_id] = state
        return state

    # -- requests --------------------------------------------------------------------------------
    def _seed(self, item: PolicyInput) -> tuple[int, tuple[str, int] | None]:
        """(seed, (group key, index)) of an episode's turn; episode i of a group gets base + i."""
        match = _GROUP_MEMBER.match(item.episode_id or "")
        if match is None:
            return stable_seed(self.decoding.seed, item.episode_id, item.turn) % 2**31, None
        group, index = match["group"], int(match["index"])
        return stable_seed(self.decoding.seed, group, item.turn) % 2**31 + index, (group, index)

    def _fields(self, state: _EpisodeMessages, item: PolicyInput, media: bool) -> dict[str, Any]:
        d, p = self.decoding, self.protocol
        fields: dict[str, Any] = {"model": self._resolve_model(), "max_tokens": d.max_new_tokens, "temperature": d.temperature,
                                  "top_p": d.top_p}  # fmt: skip
        if d.stop:
            fields["stop"] = list(d.stop)
        if p.tool_protocol == "native":
            tools = schemas_of(item.tools) if item.tools is not None else self.tools
            if tools:
                fields |= {"tools": tools, "tool_choice": "auto", "parallel_tool_calls": False}
        if p.extras == "vllm":
            if d.top_k is not None:
                fields["top_k"] = d.top_k
            if d.stop:
                fields["include_stop_str_in_output"] = True
            if p.return_token_ids:
                fields["return_token_ids"] = True
            if item.prefix:
                fields |= {"continue_final_message": True, "add_generation_prompt": False}
            if media:
                fields["media_io_kwargs"] = {"video": media_io_kwargs(state.videos[0])}
        return fields

    def _media_applies(self, state: _EpisodeMessages) -> bool:
        """Whether this request can carry its videos' times (one set of times for all of them)."""
        p = self.protocol
        return (p.frames == "video" and p.frame_times == "auto" and p.extras == "vllm" and not self._media_refused
                and bool(state.videos) and len(set(state.videos)) == 1)  # fmt: skip

    def _request(self, item: PolicyInput) -> _Request:
        state = self._conversation(item)
        extra: list[str] = []
        if item.prefix:
            if self.protocol.extras != "vllm":
                raise ValueError("openai policy: a turn prefix (ProcessThinker) needs a server that continues a final message (extras='vllm')")
            extra = [json.dumps({"role": "assistant", "content": item.prefix}, ensure_ascii=False)]
        seed, group = self._seed(item)
        if self.protocol.frames == "video" and max(state.frame_counts, default=0) > VLLM_DEFAULT_VIDEO_FRAMES and not self._media_applies(state):
            warnings.warn(f"episode {item.episode_id}: a video of {max(state.frame_counts)} frames; vLLM keeps {VLLM_DEFAULT_VIDEO_FRAMES} unless "
                          "the server runs with --media-io-kwargs '{\"video\": {\"num_frames\": -1}}' (docs/serving.md)", stacklevel=3)  # fmt: skip
        variants = [True, False] if self._media_applies(state) else [False]
        digests = [*state.digests, *(hashlib.sha256(m.encode()).hexdigest() for m in extra)]
        fields = self._fields(state, item, variants[0])
        keys = [request_key({**self._fields(state, item, media), "seed": seed, "n": 1}, digests) for media in variants]
        return _Request(item, fields, state, extra, seed, group if item.turn == 0 and not item.prefix and self.protocol.share_initial else None, keys)

    def _body(self, request: _Request, n: int, media: bool = True) -> bytes:
        """The request's JSON bytes: its fields, then its messages' JSON as built (no re-encoding)."""
        fields = dict(request.fields)
        if not media:
            fields.pop("media_io_kwargs", None)
        head = json.dumps({**fields, "seed": request.seed, "n": n}, ensure_ascii=False)
        messages = ",".join([*request.messages.json, *request.extra_messages])
        return (head[:-1] + ', "messages": [' + messages + "]}").encode()

    def _shared(self, misses: list[_Request]) -> list[list[_Request]]:
        """The requests to send: a group's first turns with one conversation, one request (`n`)."""
        batches: list[list[_Request]] = []
        open_groups: dict[tuple[str, str], list[_Request]] = {}
        for r in misses:
            if r.group is None:
                batches.append([r])
                continue
            key = (r.group[0], request_key(r.fields, r.messages.digests))
            run = open_groups.get(key)
            if run is not None and run[-1].group[1] + 1 == r.group[1] and run[-1].seed + 1 == r.seed:
                run.append(r)
            else:
                run = [r]
                open_groups[key] = run
                batches.append(run)
        return batches

    # -- replies ---------------------------------------------------------------------------------
    def _output(self, request: _Request, response: Mapping[str, Any]) -> PolicyOutput:
        """The turn of a (per-episode) response; an unusable reply is the env's invalid turn."""
        choices = response.get("choices") if isinstance(response, Mapping) else None
        usage = _usage(response)
        choice = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], Mapping) else None
        message = choice.get("message") if choice is not None else None
        if not isinstance(message, Mapping):
            self.stats["invalid"] += 1
            return PolicyOutput("", usage=usage, invalid="the server's reply has no choice")
        content = message.get("content")
        text = content if isinstance(content, str) else ""
        calls = message.get("tool_calls") if self.protocol.tool_protocol == "native" else None
        if isinstance(calls, list) and calls:
            text, native = self._map_native(text, calls, request)
            if native is not None:
                request.messages.native[request.item.turn] = native
        elif choice.get("finish_reason") == "stop" and self.decoding.stop:
            text = close_open_tag(text, self.decoding.stop, choice.get("stop_reason"))
        if not text.strip():
            self.stats["invalid"] += 1
            return PolicyOutput(text, usage=usage, invalid=f"the server's reply has no text (finish_reason {choice.get('finish_reason')!r})")
        prompt_ids = response.get("prompt_token_ids")
        token_ids = choice.get("token_ids")
        return PolicyOutput(text, prompt_token_ids=list(prompt_ids) if isinstance(prompt_ids, list) else None,
                            token_ids=list(token_ids) if isinstance(token_ids, list) else None, usage=usage)  # fmt: skip

    def _map_native(self, content: str, calls: list[Any], request: _Request) -> tuple[str, tuple[str, dict[str, Any], str] | None]:
        """The env's text of a reply's first tool call, and the assistant message to send back."""
        call = calls[0] if isinstance(calls[0], Mapping) else {}
        function = call.get("function") if isinstance(call.get("function"), Mapping) else {}
        name, arguments = function.get("name"), function.get("arguments")
        if not isinstance(name, str):
            return content, None
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
        self.stats["native_calls"] += 1
        text = content + "<tool_call>" + '{"name": ' + json.dumps(name, ensure_ascii=False) + ', "arguments": ' + arguments + "}</tool_call>"
        call_id = str(call.get("id") or f"call_{request.item.turn}")
        sent = {"role": "assistant", "content": content or None,
                "tool_calls": [{"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}]}  # fmt: skip
        return text, (text, sent, call_id)

    # -- the policy ------------------------------------------------------------------------------
    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        """One turn for every episode in `batch` (cache first, then up to `concurrency` requests in
        flight); raises after the batch is answered if a request failed (see the module docstring)."""
        if not batch:
            return []
        with self._lock:
            return self._act(batch)

    def _act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        cpu0 = time.process_time()
        wait = 0.0
        if len(batch) > 1:
            self._failed = {}  # a new batch: what failed in the last one is asked again
        requests = [self._request(item) for item in batch]
        outputs: list[PolicyOutput | None] = [None] * len(batch)
        errors: dict[int, OpenAIError] = {}
        misses: list[int] = []
        for i, r in enumerate(requests):
            key, hit = next(((k, h) for k, h in zip(r.keys, map(self.cache.get, r.keys)) if h is not None), (None, None))
            if hit is not None:
                self.stats["cache_hits"] += 1
                out = self._output(r, hit)
                self.cache.put(key, hit, episode_id=r.item.episode_id, turn=r.item.turn, seed=r.seed, text=out.text)  # a replayed one: copied once
                outputs[i] = out
            elif len(batch) == 1 and r.keys[0] in self._failed:
                errors[i] = self._failed.pop(r.keys[0])  # failed in the batch just asked: the driver asks alone, not the server
            elif self.offline:
                errors[i] = OpenAIError(f"openai:{self.endpoint.url}: no recorded response for this request in "
                                        f"{', '.join(self.replay) or self.cache.path} (replaying offline)")  # fmt: skip
            else:
                misses.append(i)
        index = {id(r): i for i, r in enumerate(requests)}
        pending = self._shared([requests[i] for i in misses])
        while pending:
            bodies = [self._body(run[0], len(run)) for run in pending]
            t0 = time.perf_counter()
            answers = self.client().post_many("/chat/completions", bodies)
            wait += time.perf_counter() - t0
            self.stats["requests"] += len(pending)
            self.stats["shared_requests"] += sum(1 for run in pending if len(run) > 1)
            retry: list[list[_Request]] = []
            for run, answer in zip(pending, answers):
                if isinstance(answer, ServerRefused) and answer.status == 400 and "media_io_kwargs" in answer.detail and "media_io_kwargs" in run[0].fields:
                    self._refuse_media(answer)
                    for r in run:
                        r.fields.pop("media_io_kwargs", None)
                        r.keys = r.keys[1:]
                    retry.append(run)
                    continue
                if isinstance(answer, OpenAIError):
                    for r in run:
                        errors[index[id(r)]] = answer
                    continue
                for k, r in enumerate(run):
                    single = _choice_response(answer, k, len(run))
                    out = self._output(r, single)
                    self.cache.put(r.keys[0], single, episode_id=r.item.episode_id, turn=r.item.turn, seed=r.seed, text=out.text)
                    outputs[index[id(r)]] = out
            pending = retry
        self.stats["turns"] += len(batch)
        self.stats["wait_s"] += wait
        self.stats["client_cpu_s"] += max(0.0, time.process_time() - cpu0)
        keep = {item.episode_id for item in batch if item.episode_id}
        self._states = {k: v for k, v in self._states.items() if k in keep}
        if errors:
            self.stats["failures"] += len(errors)
            if len(batch) > 1:
                for i, error in errors.items():
                    self._failed[requests[i].keys[0]] = error
            if len(batch) == 1:
                raise errors[0]
            raise OpenAIError(f"{len(errors)} of {len(batch)} {FAILED_BATCH}; first: {next(iter(errors.values()))}")
        return outputs  # type: ignore[return-value]

    def _refuse_media(self, answer: ServerRefused) -> None:
        if not self._media_refused:
            warnings.warn(f"openai:{self.endpoint.url} refuses per-request media_io_kwargs ({answer.detail[:120]}); frame times go as "
                          "text labels only. Start vLLM with --trust-request-mm-kwargs to send them (docs/serving.md).", stacklevel=4)  # fmt: skip
        self._media_refused = True


def served_chat_template(family: str = "qwen2.5-vl") -> str:
    """The chat template to serve a VideoSeek-trained checkpoint of `family` with (vLLM's
    ``--chat-template FILE``), so the server's prompt ids are the renderer's.

    `prompting.VIDEOSEEK_CHAT_TEMPLATE`, for Qwen2.5-VL as it is. Qwen3-VL's processor writes each
    frame pair's ``<t seconds><|vision_start|>...<|vision_end|>`` itself; the renderer then drops
    the template's own ``<|vision_start|>``/``<|vision_end|>`` around the video (as transformers
    4.57 did), while vLLM 0.31 with transformers >= 5.10 keeps them (2 tokens more per video,
    measured). The template here writes that family's video as the bare ``<|video_pad|>``.
    `python -m videoseek.agents.openai_policy --chat-template qwen3-vl > template.jinja` prints it.
    """
    from videoseek.agents.families import FAMILIES
    from videoseek.agents.prompting import VIDEOSEEK_CHAT_TEMPLATE

    if family not in FAMILIES:
        raise ValueError(f"unknown family {family!r}: use one of {', '.join(FAMILIES)}")
    if not FAMILIES[family].processor_wraps_video:
        return VIDEOSEEK_CHAT_TEMPLATE
    wrapped = "{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    assert VIDEOSEEK_CHAT_TEMPLATE.count(wrapped) == 1, "the VideoSeek template's video item changed"
    return VIDEOSEEK_CHAT_TEMPLATE.replace(wrapped, "{{- '<|video_pad|>' -}}")


def media_io_kwargs(timestamps: Sequence[float]) -> dict[str, Any]:
    """vLLM's ``media_io_kwargs["video"]`` for frames at `timestamps`: the renderer's metadata
    (`prompting.frames_metadata`), and every frame kept (``num_frames: -1``)."""
    meta = frames_metadata(np.asarray(timestamps, dtype=np.float64))
    return {"fps": meta["fps"], "frames_indices": meta["frames_indices"], "total_num_frames": meta["total_num_frames"],
            "duration": meta["duration"], "num_frames": -1}  # fmt: skip


def _usage(response: Mapping[str, Any]) -> dict[str, int] | None:
    usage = response.get("usage") if isinstance(response, Mapping) else None
    if not isinstance(usage, Mapping):
        return None
    out = {"prompt": usage.get("prompt_tokens"), "completion": usage.get("completion_tokens")}
    if isinstance(usage.get("choices"), int):
        out["choices"] = usage["choices"]
    return {k: int(v) for k, v in out.items() if isinstance(v, (int, float))} or None


def _choice_response(response: Mapping[str, Any], k: int, n: int) -> dict[str, Any]:
    """Choice `k` of a response to a request with `n` choices, as the response to that choice's
    own request: its choice alone; usage with the choice's own completion count where the server
    returned its token ids, else the request's total and ``choices: n``."""
    if n == 1:
        return dict(response)
    choices = [c for c in response.get("choices") or [] if isinstance(c, Mapping)]
    choice = next((c for c in choices if c.get("index") == k), choices[k] if k < len(choices) else None)
    out = {key: value for key, value in response.items() if key not in ("choices", "usage")}
    out["choices"] = [dict(choice, index=0)] if choice is not None else []
    usage = dict(response.get("usage") or {})
    if usage:
        if choice is not None and isinstance(choice.get("token_ids"), list):
            usage["completion_tokens"] = len(choice["token_ids"])
            usage["total_tokens"] = usage.get("prompt_tokens", 0) + usage["completion_tokens"]
        else:
            usage["choices"] = n
        out["usage"] = usage
    return out


if __name__ == "__main__":  # python -m videoseek.agents.openai_policy --chat-template qwen3-vl
    import argparse

    parser = argparse.ArgumentParser(description="print the chat template to serve a VideoSeek checkpoint with (vLLM --chat-template)")
    parser.add_argument("--chat-template", metavar="FAMILY", default="qwen2.5-vl", help="qwen2.5-vl or qwen3-vl")
    print(served_chat_template(parser.parse_args().chat_template), end="")
