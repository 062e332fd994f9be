"""Prompts and conversation rendering for Qwen2.5-VL / Qwen3-VL policies.

The action protocol (DESIGN.md, "Action protocol"): one assistant turn is an optional
`<think>...</think>` followed by exactly one Hermes tool call
`<tool_call>{"name": ..., "arguments": {...}}</tool_call>` of one of the env's tools, or one
`<answer>...</answer>`. The env's `info["instructions"]` teaches exactly that for its tools, and
`info["tools"]` holds their OpenAI function schemas, which the chat template lists. Policies take
both from the env: the system prompt is the conversation's first message, and each
`PolicyInput.tools` sets the renderer's tool list (`ConversationRenderer.use_tools`).

`ConversationRenderer` turns a conversation (`Message`s) into model inputs through the model's
own processor: the tokenizer, and the image / video processor that resizes frames and expands each
`<|video_pad|>` / `<|image_pad|>` placeholder into one token per merged patch. Every backend (the
transformers policy, the vLLM policy, verl's agent loop) renders with it, so a conversation has
the same token ids wherever it is rendered.

Invariants the renderer guarantees (and checks, raising `TemplateError` when a chat template
breaks them):

- Prefix stability: the tokens of a conversation are a prefix of the tokens of any continuation
  of it, so turn k's prompt is a prefix of turn k+1's prompt and multi-turn generation never
  re-tokenises history.
- Verbatim history: assistant turns appear exactly as generated. Qwen3's templates rewrite
  earlier assistant turns (`<think>` is stripped or re-spaced), so the default template is
  `VIDEOSEEK_CHAT_TEMPLATE`: Qwen's own ChatML + Hermes-tool format (the tokens Qwen2.5 and
  Qwen3 use for system, user, tool responses and vision placeholders) without any rewriting.
  `chat_template="model"` uses the checkpoint's template instead, after a probe render proves
  it keeps history verbatim.
- Token-exact assistant turns: an assistant `Message` that carries `token_ids` (the ids the
  policy generated; see `assistant_message`) is rendered from those ids, never re-tokenised
  from text, because a sampled token sequence is not always the tokenizer's canonical split
  of its own text.

A conversation can be rendered incrementally: `renderer.start(messages)` returns a `RenderState`
whose `extend(new_messages)` renders, tokenises and processes only the new messages (verl's
agent loop does this: a turn costs the same at turn 10 as at turn 1, and the loop never
concatenates pixel values it does not read). `render(messages)` is `start(messages).output()`.
The model policies keep each live episode's state (`EpisodeRenders`), so a turn renders only
its new messages. Whole-conversation renders are served by an `EncodingCache` (content-keyed,
bounded in bytes) that keeps the processor's output for frames already seen, so a render only
processes new frames (a group's rollouts share their first frames); read-only frames (the env's)
are hashed once per array.

How the text is tokenised: the template renders prefixes of the conversation; the difference
between consecutive prefixes is one message's segment. Segments start and end at special tokens
(`<|im_start|>` / `<|im_end|>`), where the tokenizer splits anyway, so tokenising segments one by
one gives the same ids as tokenising the whole text (a test checks this against the processor).
Message text written by the env or a policy is data, not markup: special-token strings inside it
(`<|video_pad|>`, `<|im_end|>`, ...) are defanged (a zero-width space after the `<`) in user,
system and tool text, and assistant text without token ids is tokenised with
`split_special_tokens=True`, so no text can add a vision placeholder or end a turn.

Frames arrive as decoded uint8 arrays with their timestamps (seconds in the source video). They
are passed to the processor as a video (or as one image per frame, `mode="images"`) with
`VideoMetadata` built from the timestamps (`frames_metadata`): Qwen2.5-VL derives its temporal
position spacing from the sampled fps, Qwen3-VL writes `<t seconds>` from `frames_indices / fps`,
and both then see the real times. Each frame's time is also stated in the text.
"""

from __future__ import annotations

import hashlib
import threading
import warnings
import weakref
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from videoseek.agents.families import family_of
from videoseek.agents.policy import Message, PolicyInput
# The protocol's words live with the env (rewards <- envs <- agents); the defaults re-exported from here.
from videoseek.envs.protocol import NO_TOOL_SYSTEM_PROMPT, SYSTEM_PROMPT  # noqa: F401
# Frame times come from the env's one formatter (`format_times`): the env's text and the frame labels name a frame alike.
from videoseek.envs.tools import DEFAULT_TOOLS, format_times, tool_schemas
from videoseek.envs.video import format_seconds  # noqa: F401  (re-exported: its home before)

# The env's frames are read-only (shared by the episodes that saw them); the video processor only
# reads them, but torch.from_numpy warns about any read-only array it wraps.
warnings.filterwarnings("ignore", message="The given NumPy array is not writable", module="transformers")

ROLES = ("system", "user", "assistant", "tool")
MODES = ("video", "images")
END_OF_TURN = "<|im_end|>"
# Stop strings that close a turn early: the protocol allows nothing after them.
DEFAULT_STOP_STRINGS = ("</tool_call>", "</answer>")
# Frame indices in VideoMetadata are integers: express timestamps in milliseconds.
TIME_BASE = 1000
ZERO_WIDTH_SPACE = "\u200b"

# Qwen's ChatML with Hermes tools, as Qwen2.5 and Qwen3 render system prompts, tool schemas, tool
# responses (`<tool_response>` inside a user turn) and vision items, but with every message
# rendered verbatim and independently of later messages (see the module docstring). An assistant
# message given as parsed fields (`reasoning_content`, `content`, `tool_calls`: what TRL's response
# parser returns) is written back in the protocol's own form, `<think>...</think>` then one-line
# `<tool_call>{"name": ..., "arguments": ...}</tool_call>`; the renderer never passes those fields,
# so its assistant turns stay verbatim text.
_TOOL_CALLS_BRANCH = (
    "{%- elif message.role == 'assistant' and (message.tool_calls or message.reasoning_content) -%}"
    "{{- '<|im_start|>assistant\\n' -}}"
    "{%- if message.reasoning_content -%}{{- '<think>' + message.reasoning_content + '</think>' -}}{%- endif -%}"
    "{{- render_content(message.content) if message.content is not none else '' -}}"
    "{%- for call in message.tool_calls or [] -%}"
    "{%- set call = call.function if call.function is defined else call -%}"
    "{{- '<tool_call>{\"name\": ' + (call.name | tojson) + ', \"arguments\": ' -}}"
    "{{- (call.arguments if call.arguments is string else (call.arguments | tojson)) + '}</tool_call>' -}}"
    "{%- endfor -%}"
    "{{- '<|im_end|>\\n' -}}"
)
_TOOL_TURN = (
    "{%- if message.role == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + render_content(message.content) + '\\n</tool_response><|im_end|>\\n' -}}"
)
# The template before the tool-calls branch: the tiny tokenizer is trained on this text
# (`agents.tiny_model.training_corpus`), so the branch leaves the tiny models' vocabularies, and
# every run recorded with them, as they were.
VIDEOSEEK_BASE_CHAT_TEMPLATE = (
    "{%- macro render_content(content) -%}"
    "{%- if content is string -%}{{- content -}}"
    "{%- else -%}{%- for item in content -%}"
    "{%- if item.type == 'image' -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif item.type == 'video' -%}{{- '<|vision_start|><|video_pad|><|vision_end|>' -}}"
    "{%- elif item.type == 'text' -%}{{- item.text -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{%- endmacro -%}"
    "{%- if messages[0].role == 'system' -%}"
    "{%- set system_text = render_content(messages[0].content) -%}{%- set rest = messages[1:] -%}"
    "{%- else -%}"
    "{%- set system_text = 'You are a helpful assistant.' -%}{%- set rest = messages -%}"
    "{%- endif -%}"
    "{{- '<|im_start|>system\\n' + system_text -}}"
    "{%- if tools -%}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\n"
    "You are provided with function signatures within <tools></tools> XML tags:\\n<tools>' -}}"
    "{%- for tool in tools -%}{{- '\\n' + (tool | tojson) -}}{%- endfor -%}"
    "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, "
    "\"arguments\": <args-json-object>}\\n</tool_call>' -}}"
    "{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- for message in rest -%}"
    "{%- if message.role == 'tool' -%}"
    "{{- '<|im_start|>user\\n<tool_response>\\n' + render_content(message.content) + '\\n</tool_response><|im_end|>\\n' -}}"
    "{%- else -%}"
    "{{- '<|im_start|>' + message.role + '\\n' + render_content(message.content) + '<|im_end|>\\n' -}}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)
VIDEOSEEK_CHAT_TEMPLATE = VIDEOSEEK_BASE_CHAT_TEMPLATE.replace(_TOOL_TURN, _TOOL_TURN + _TOOL_CALLS_BRANCH, 1)


class TemplateError(ValueError):
    """A chat template that rewrites history or breaks prefix stability; names the message."""


# ---- messages ---------------------------------------------------------------------------------
def _observation_frames(obs: Mapping[str, Any], where: str) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(frames, timestamps) of an env observation; (None, None) when it has no frames."""
    frames = obs.get("frames")
    if frames is None or len(frames) == 0:
        return None, None
    timestamps = obs.get("timestamps")
    if timestamps is None:
        raise ValueError(f"{where}: observation has frames but no 'timestamps'")
    return np.asarray(frames), np.asarray(timestamps, dtype=np.float64)


def _observation_text(obs: Mapping[str, Any], where: str) -> str:
    if not isinstance(obs, Mapping) or not isinstance(obs.get("text"), str):
        raise ValueError(f"{where}: observation field 'text' must be a string")
    return obs["text"]


def schemas_of(tools: bool | Sequence[str] | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas from what a policy or loop is given: True (the default tools), False (none),
    tool names or import paths, or schemas (`info["tools"]`) as they are.

    >>> [t["function"]["name"] for t in schemas_of(["crop_video", "zoom"])], schemas_of(False)
    (['crop_video', 'zoom'], [])
    """
    if tools is True:
        return tool_schemas(DEFAULT_TOOLS)
    if tools is False or tools is None:
        return []
    if all(isinstance(t, str) for t in tools):
        return tool_schemas(list(tools))
    return [dict(t) for t in tools]


def initial_messages(obs: Mapping[str, Any], system_prompt: str | None = SYSTEM_PROMPT) -> list[Message]:
    """The system prompt and the user turn (question, options, sparse frames) of an env's first observation.

    `system_prompt=None` leaves the system message out (the template then uses its default).
    """
    text = _observation_text(obs, "initial_messages")
    frames, timestamps = _observation_frames(obs, "initial_messages")
    messages = [Message("system", system_prompt)] if system_prompt is not None else []
    messages.append(Message("user", text, frames, timestamps))
    return messages


def tool_message(obs: Mapping[str, Any]) -> Message:
    """The tool turn for an env observation after a step: what was returned, and the crop's frames."""
    frames, timestamps = _observation_frames(obs, "tool_message")
    return Message("tool", _observation_text(obs, "tool_message"), frames, timestamps)


def assistant_message(text: str, token_ids: Sequence[int] | None = None, forced: bool = False) -> Message:
    """An assistant turn; with the policy's `token_ids` it is rendered from those ids, never re-tokenised.

    The rollout runner should append `assistant_message(out.text, out.token_ids)` for a model
    policy's `PolicyOutput`, so training sees exactly the tokens that were sampled. `forced`: the
    episode's start wrote it (`agents.groups.look_on_start`), so no loss is put on it.
    """
    return Message("assistant", text, token_ids=None if token_ids is None else [int(t) for t in token_ids], forced=forced)


# ---- text as data -----------------------------------------------------------------------------
# What makes text markup when no tokenizer is at hand: verl's RLHFDataset splits prompt text on its
# media markers (`<image>` would ask it for a second image), and every Qwen special token is spelt
# `<|...|>` (`<|video_pad|>` would reach a processor as a placeholder without frames).
MARKUP_STRINGS = ("<image>", "<video>", "<audio>", "<|")


def defang(text: str, strings: Sequence[str] = MARKUP_STRINGS) -> str:
    """`text` with each of `strings` broken by a zero-width space after its first character, so it
    stays text: the renderer passes its tokenizer's special tokens (longest first), the verl export
    and the TRL adapter the default `MARKUP_STRINGS`. The one defang of the project.

    >>> defang("see <|video_pad|> and <video>").replace(ZERO_WIDTH_SPACE, "+")
    'see <+|video_pad|> and <+video>'
    >>> defang("<|im_end|> <video>", ["<|im_end|>"]).replace(ZERO_WIDTH_SPACE, "+")
    '<+|im_end|> <video>'
    """
    for special in strings:
        if special in text:
            text = text.replace(special, special[0] + ZERO_WIDTH_SPACE + special[1:])
    return text


# ---- frames -----------------------------------------------------------------------------------
def frames_metadata(timestamps: Sequence[float]) -> dict[str, Any]:
    """`VideoMetadata` fields that make Qwen's processors see the frames' real times.

    `frames_indices / fps` equals the timestamps (to the millisecond; Qwen3-VL prints these), and
    the sampled fps `len(frames_indices) / total_num_frames * fps` is the frames' mean rate
    (Qwen2.5-VL spaces temporal positions by it). One frame, or frames at one time, count as 1 fps.
    """
    ts = np.asarray(timestamps, dtype=np.float64)
    n = len(ts)
    span = float(ts.max() - ts.min()) if n > 1 else 0.0  # shuffled frames (T-GRPO) keep their rate
    rate = (n - 1) / span if span > 0 else 1.0
    return {
        "total_num_frames": max(n, round(n * TIME_BASE / rate)),
        "fps": float(TIME_BASE),
        "frames_indices": [int(round(t * TIME_BASE)) for t in ts],
        "duration": float(ts.max()) if n else 0.0,
    }


def _check_frames(message: Message, index: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The message's (frames, timestamps) after validation, or None when it has no frames."""
    frames, timestamps = message.frames, message.timestamps
    if frames is None or len(frames) == 0:
        return None
    where = f"message {index} ({message.role})"
    if message.role not in ("user", "tool"):
        raise ValueError(f"{where}: only user and tool messages may carry frames")
    frames = np.asarray(frames)
    if frames.dtype != np.uint8 or frames.ndim != 4 or frames.shape[-1] != 3:
        raise ValueError(f"{where}: field 'frames' must be uint8 of shape (n, H, W, 3), got {frames.dtype} {frames.shape}")
    if timestamps is None:
        raise ValueError(f"{where}: field 'timestamps' is missing for {len(frames)} frames")
    timestamps = np.asarray(timestamps, dtype=np.float64)
    if timestamps.shape != (len(frames),):
        raise ValueError(f"{where}: field 'timestamps' has shape {timestamps.shape}, expected ({len(frames)},)")
    if not np.all(np.isfinite(timestamps)):
        raise ValueError(f"{where}: field 'timestamps' holds a non-finite time")
    return frames, timestamps


def frames_content(timestamps: np.ndarray, mode: str, label_times: bool = True) -> list[dict[str, str]]:
    """Chat content items for a message's frames: one video, or one image per frame, with their times."""
    if mode == "video":
        items = [{"type": "text", "text": FRAMES_LABEL + format_times(timestamps) + ":\n"}]
        return (items if label_times else []) + [{"type": "video"}]
    items: list[dict[str, str]] = []
    for k, t in enumerate(timestamps):
        items.append({"type": "text", "text": ("\n" if k else "") + f"Frame at {format_times([t])}: "})
        items.append({"type": "image"})
    return items


FRAMES_LABEL = "Frames at "


def lay_out(role: str, text: Any, frames: list[Any]) -> list[Any]:
    """The one frame layout of a conversation: the question follows its frames (Qwen's
    convention); a tool says what it returned first. `text` and `frames` are content items (or
    strings); the renderer, `export-verl`'s text prompts and `export-sft` all lay messages out here."""
    newline = {"type": "text", "text": "\n"} if isinstance(text, dict) else "\n"
    return [*frames, newline, text] if role == "user" else [text, newline, *frames]


def placeholder_text(role: str, text: str, timestamps: Sequence[float], placeholder: str) -> str:
    """A message with frames as one string, its video written as `placeholder` (export formats)."""
    items = frames_content(np.asarray(timestamps, dtype=np.float64), "video")
    frames = [item["text"] if item["type"] == "text" else placeholder for item in items]
    return "".join(lay_out(role, text, frames))


def split_placeholder_text(role: str, content: str, placeholder: str) -> str:
    """The message text of `placeholder_text`'s output (its inverse); ValueError if the layout differs."""
    head, sep, tail = content.partition(placeholder)
    label = head.rfind(FRAMES_LABEL)
    if not sep or label < 0 or placeholder in tail:
        raise ValueError(f"expected one '{FRAMES_LABEL}...:\\n{placeholder}' block")
    if role == "user":
        if head[:label] or not tail.startswith("\n"):
            raise ValueError("expected the frames first, then a newline and the text")
        return tail[1:]
    if tail or not head[:label].endswith("\n"):
        raise ValueError("expected the text, a newline, then the frames")
    return head[: label - 1]


# ---- rendering --------------------------------------------------------------------------------
class EncodingCache:
    """A thread-safe LRU of processor outputs for visual segments, bounded in bytes.

    Policies re-render the whole conversation every turn, so without it the frames of turn 1 go
    through the image/video processor once per later turn. Keys are content digests (blake2b of
    the segment text, frames and timestamps), so a hit returns exactly what the processor would.
    """

    def __init__(self, max_bytes: int = 256 * 2**20) -> None:

        self.max_bytes = max_bytes
        self._entries: OrderedDict[bytes, tuple[dict[str, Any], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0
        self._digests: dict[tuple, tuple[weakref.ref, bytes]] = {}  # read-only frames' digests by array identity

    def key(self, mode: str, text: str, frames: np.ndarray, timestamps: np.ndarray) -> bytes:
        """The segment's content digest. Read-only frames (the env's: shared by every episode that
        saw them) are hashed once per array object, not at every render or every episode: their
        bytes cannot change while the array lives (the memo drops the entry when it dies)."""
        if frames.flags.writeable:
            return self.digest(mode, text, frames, timestamps)
        memo_key = (id(frames), mode, text, timestamps.tobytes())
        with self._lock:
            hit = self._digests.get(memo_key)
        if hit is not None and hit[0]() is frames:
            return hit[1]
        digest = self.digest(mode, text, frames, timestamps)
        try:
            ref = weakref.ref(frames, lambda _, k=memo_key: self._digests.pop(k, None))
        except TypeError:  # a view of a foreign buffer without weakref support: hash again next time
            return digest
        with self._lock:
            self._digests[memo_key] = (ref, digest)
        return digest

    @staticmethod
    def digest(mode: str, text: str, frames: np.ndarray, timestamps: np.ndarray) -> bytes:
        """blake2b of the segment's mode, text, frame shape and bytes, and timestamps."""
        digest = hashlib.blake2b(digest_size=20)
        for part in (mode.encode(), text.encode(), str(frames.shape).encode(), np.ascontiguousarray(frames).data, timestamps.tobytes()):
            digest.update(len(part).to_bytes(8, "little"))
            digest.update(part)
        return digest.digest()

    def get(self, key: bytes) -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[0]

    def put(self, key: bytes, value: dict[str, Any]) -> None:
        size = sum(v.numel() * v.element_size() for v in value.values() if hasattr(v, "element_size"))
        if size > self.max_bytes:
            return
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted


@dataclass(frozen=True)
class _Segment:
    text: str
    message: int | None  # index into the messages, None for the final generation prompt
    part: str  # "message" | "header" | "content" | "tail" | "generation_prompt"


class ConversationRenderer:
    """Render `Message`s into Qwen-VL model inputs with the model's processor (see the module docstring).

    `render(messages, add_generation_prompt=True)` returns a dict:

    - `input_ids`, `attention_mask`, `mm_token_type_ids`: LongTensor (1, L); placeholders expanded.
    - the processor's vision tensors for all frames in order: `pixel_values_videos`,
      `video_grid_thw` (and `second_per_grid_ts` for Qwen2.5-VL) in video mode; `pixel_values`,
      `image_grid_thw` in image mode.
    - `assistant_spans`: [(start, end)) token ranges of each assistant turn's own tokens: its text
      and the `<|im_end|>` that closes it (what a response mask marks 1). Role headers, tool
      responses and frames are 0.
    - `message_spans`: [(start, end)) of every message's tokens, role header to closing newline.
    - `text`: the rendered template text with unexpanded placeholders (for logs; the ids are
      authoritative).
    - `multi_modal_data`: {"video": [(frames, metadata dict)]} or {"image": [frame, ...]}, the raw
      frames in placeholder order, as vLLM and verl take them.

    `chat_template`: "videoseek" (default, `VIDEOSEEK_CHAT_TEMPLATE`), "model" (the processor's
    own template, probed for verbatim history at construction) or a Jinja string (probed too).
    `min_pixels` / `max_pixels` override the processor's per-frame resize bounds. `cache_bytes`
    bounds the `EncodingCache` of processed frames (0 disables it).
    """

    def __init__(
        self,
        processor: Any,
        mode: str = "video",
        chat_template: str = "videoseek",
        tools: bool | Sequence[str] | Sequence[Mapping[str, Any]] = True,
        label_frame_times: bool = True,
        min_pixels: int | None = None,
        max_pixels: int | None = None,
        cache_bytes: int = 256 * 2**20,
    ) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.processor = processor
        self.tokenizer = processor.tokenizer
        self.mode = mode
        self.tools = schemas_of(tools) or None
        self.label_frame_times = label_frame_times
        self.template = self._resolve_template(chat_template)
        self.end_of_turn_id = self._token_id(END_OF_TURN)
        self.image_token_id = self._token_id(getattr(processor, "image_token", "<|image_pad|>"))
        self.video_token_id = self._token_id(getattr(processor, "video_token", "<|video_pad|>"))
        self._special_strings = sorted(
            (t.content for t in self.tokenizer.added_tokens_decoder.values() if t.special), key=len, reverse=True
        )
        self.vision_kwargs = self._resize_kwargs(min_pixels, max_pixels)
        self.cache = EncodingCache(cache_bytes)
        self._anchors: dict[tuple[str, bool], str] = {}  # the first message rendered alone (_message_texts)
        # HF fast tokenizers raise "Already borrowed" when two threads encode at once (verl runs
        # processors in executor threads), so renders are serialised.
        self._lock = threading.Lock()
        # Qwen3-VL's processor writes `<t seconds><|vision_start|>pads<|vision_end|>` per frame pair
        # itself, as Qwen3-VL was trained; transformers 5.x no longer removes the template's own
        # `<|vision_start|>...<|vision_end|>` around the video, so the renderer does (as 4.57 did).
        family = family_of(processor)
        self.unwrap_video_placeholder = bool(family and family.processor_wraps_video)
        if chat_template != "videoseek":
            self._probe_template()

    def use_tools(self, tools: Sequence[Mapping[str, Any]]) -> bool:
        """Render later conversations with these tool schemas (an env's `info["tools"]`); True when
        they differ from the current ones (the caller's kept render states are then stale)."""
        new = schemas_of(tools) or None
        if new == self.tools:
            return False
        with self._lock:
            self.tools = new
            self._anchors.clear()  # the system message's render holds the tool list
        return True

    # -- setup ------------------------------------------------------------------------------
    def _token_id(self, token: str) -> int:
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ValueError(f"the tokenizer has no {token} token: not a Qwen-VL processor")
        return int(token_id)

    def _resolve_template(self, chat_template: str) -> str:
        if chat_template == "videoseek":
            return VIDEOSEEK_CHAT_TEMPLATE
        if chat_template == "model":
            template = getattr(self.processor, "chat_template", None) or getattr(self.tokenizer, "chat_template", None)
            if not isinstance(template, str) or not template:
                raise ValueError("chat_template='model' but the processor has no chat template")
            return template
        return chat_template

    def _resize_kwargs(self, min_pixels: int | None, max_pixels: int | None) -> dict[str, Any]:
        if min_pixels is None and max_pixels is None:
            return {}
        defaults = getattr(self.processor, "video_processor", None) or self.processor.image_processor
        size = dict(defaults.size)
        if min_pixels is not None:
            size["shortest_edge"] = int(min_pixels)
        if max_pixels is not None:
            size["longest_edge"] = int(max_pixels)
        if size["shortest_edge"] > size["longest_edge"]:
            raise ValueError(f"min_pixels {size['shortest_edge']} exceeds max_pixels {size['longest_edge']}")
        return {"size": size}

    def _probe_template(self) -> None:
        """Render a conversation with thinking and a tool call; raises TemplateError if history changes."""
        probe = [
            Message("system", "probe"),
            Message("user", "question"),
            Message("assistant", '<think>\nfirst\n</think>\n\n<tool_call>{"name": "probe", "arguments": {"start": 1, "end": 2}}</tool_call>'),
            Message("tool", "result"),
            Message("assistant", "<think>second</think> <answer>A</answer>"),
        ]
        self.start(probe).generation_prompt_ids()  # every message and the generation prompt, checked

    # -- text ---------------------------------------------------------------------------------
    def _chat_entry(self, message: Message, index: int) -> dict[str, Any]:
        if message.role not in ROLES:
            raise ValueError(f"message {index}: role must be one of {ROLES}, got {message.role!r}")
        if not isinstance(message.text, str):
            raise ValueError(f"message {index} ({message.role}): field 'text' must be a string")
        visual = _check_frames(message, index)  # raises for frames on a system or assistant message
        if message.role == "assistant":
            return {"role": "assistant", "content": message.text}
        text = {"type": "text", "text": defang(message.text, self._special_strings)}  # every special token stays text
        if visual is None:
            return {"role": message.role, "content": [text]}
        return {"role": message.role, "content": lay_out(message.role, text, frames_content(visual[1], self.mode, self.label_frame_times))}

    def _apply(self, conversation: list[dict[str, Any]], add_generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            conversation,
            chat_template=self.template,
            tools=self.tools,
            add_generation_prompt=add_generation_prompt,
            tokenize=False,
        )

    def _message_texts(self, conversation: list[dict[str, Any]], k: int, previous: str) -> tuple[str | None, str]:
        """(assistant header or None, the message's full text) of message k, as deltas after `previous`.

        The default template renders each message independently of the others (the system prompt
        aside), so message k's text is that of [message 0, message k] less that of [message 0]: a
        constant cost per message, not a re-render of the whole prefix. Another template is
        rendered over the whole prefix and checked to extend `previous` (prefix stability).
        """
        assistant = conversation[k]["role"] == "assistant"
        if self.template == VIDEOSEEK_CHAT_TEMPLATE and k > 0:
            base = self._anchor(conversation[0])
            header = self._anchor(conversation[0], True)[len(base) :] if assistant else None
            return header, self._apply([conversation[0], conversation[k]], False)[len(base) :]
        header = self._checked_extension(previous, conversation[:k], True, k)[len(previous) :] if assistant else None
        return header, self._checked_extension(previous, conversation[: k + 1], False, k)[len(previous) :]

    def _anchor(self, first: dict[str, Any], add_generation_prompt: bool = False) -> str:
        """The rendering of the first message alone (the constant part of every anchored render)."""
        key = (repr(first), add_generation_prompt)
        text = self._anchors.get(key)
        if text is None:
            if len(self._anchors) > 64:
                self._anchors.clear()
            text = self._anchors[key] = self._apply([first], add_generation_prompt)
        return text

    def _checked_extension(self, previous: str, conversation: list[dict[str, Any]], add_generation_prompt: bool, k: int) -> str:
        text = self._apply(conversation, add_generation_prompt)
        if not text.startswith(previous):
            raise TemplateError(
                f"message {k}: the chat template re-renders earlier messages when this one is added "
                "(tokens of a turn would not be a prefix of the next turn's); use chat_template='videoseek'"
            )
        return text

    # -- tokens -------------------------------------------------------------------------------
    def _assistant_ids(self, message: Message, index: int) -> list[int]:
        """The assistant turn's own ids without its closing `<|im_end|>` (the template adds it)."""
        token_ids = message.token_ids
        if token_ids is None:
            return self.tokenizer(message.text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
        ids = [int(t) for t in token_ids]
        if ids and ids[-1] == self.end_of_turn_id:
            ids = ids[:-1]
        vocab = len(self.tokenizer)
        if any(t < 0 or t >= vocab for t in ids):
            raise ValueError(f"message {index} (assistant): field 'token_ids' holds ids outside the vocabulary [0, {vocab})")
        if self.image_token_id in ids or self.video_token_id in ids:
            raise ValueError(f"message {index} (assistant): field 'token_ids' holds vision placeholder ids with no frames behind them")
        decoded = self.tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)
        if decoded != message.text:
            raise ValueError(f"message {index} (assistant): field 'token_ids' does not decode to its text")
        return ids

    def _encode_visual(self, text: str, frames: np.ndarray, timestamps: np.ndarray) -> dict[str, Any]:
        """The processor's output for one visual segment (ids and vision tensors), through the cache."""
        key = self.cache.key(self.mode, text, frames, timestamps) if self.cache.max_bytes else None
        cached = self.cache.get(key) if key is not None else None
        if cached is not None:
            return cached
        if self.mode == "video":
            if self.unwrap_video_placeholder:
                video = self.processor.video_token
                text = text.replace(f"<|vision_start|>{video}<|vision_end|>", video)
            encoded = self.processor(
                text=[text],
                videos=[frames],
                video_metadata=[frames_metadata(timestamps)],
                do_sample_frames=False,
                return_tensors="pt",
                **self.vision_kwargs,
            )
        else:
            encoded = self.processor(text=[text], images=list(frames), return_tensors="pt", **self.vision_kwargs)
        encoded = dict(encoded)
        if key is not None:
            self.cache.put(key, encoded)
        return encoded

    def _count_placeholders(self, text: str) -> int:
        token = self.processor.video_token if self.mode == "video" else self.processor.image_token
        other = self.processor.image_token if self.mode == "video" else self.processor.video_token
        if other in text:
            raise TemplateError(f"the chat template wrote {other} in {self.mode} mode")
        return text.count(token)

    def _segment_tokens(self, seg: _Segment, message: Message | None) -> tuple[list[int], dict[str, Any], list[Any]]:
        """(token ids, vision tensors, raw multi-modal items) of one segment."""
        if seg.part == "content":
            return self._assistant_ids(message, seg.message), {}, []
        visual = _check_frames(message, seg.message) if seg.part == "message" else None
        if visual is None:
            return self.tokenizer(seg.text, add_special_tokens=False)["input_ids"], {}, []
        frames, timestamps = visual
        expected = 1 if self.mode == "video" else len(frames)
        if self._count_placeholders(seg.text) != expected:
            raise TemplateError(f"message {seg.message}: the chat template did not write one placeholder per {self.mode} item")
        encoded = self._encode_visual(seg.text, frames, timestamps)
        tensors = {k: v for k, v in encoded.items() if k not in ("input_ids", "attention_mask", "mm_token_type_ids") and hasattr(v, "shape")}
        items = [(frames, frames_metadata(timestamps))] if self.mode == "video" else list(frames)
        return encoded["input_ids"][0].tolist(), tensors, items

    def render(self, messages: Sequence[Message], add_generation_prompt: bool = True) -> dict[str, Any]:
        """Model inputs for `messages` (see the class docstring for the keys). Thread-safe."""
        state = self.start(messages)
        return state.output(add_generation_prompt)

    def start(self, messages: Sequence[Message] = ()) -> RenderState:
        """A `RenderState` holding `messages` rendered: extend it turn by turn (the agent loop)."""
        state = RenderState(self)
        if messages:
            state.extend(messages)
        return state

    def _mm_token_type_ids(self, input_ids: Any) -> Any:
        """0 text, 1 image, 2 video per token: Qwen's 3D rope needs it to find the vision spans."""
        return (input_ids == self.image_token_id).long() + 2 * (input_ids == self.video_token_id).long()


class RenderState:
    """One conversation rendered so far, extended message by message.

    Each message is rendered, tokenised and (frames) put through the processor once, when it is
    added: a later turn costs only its own messages, never a re-render of the history. The vision
    tensors stay per segment; `output()` concatenates them for a caller that reads them (the
    transformers policy), and the agent loop, which sends frames to the server raw, reads `ids`,
    `videos` and `video_grid_thw()` instead. Not thread-safe itself; its renderer's lock
    serialises the tokenizer between states.
    """

    def __init__(self, renderer: ConversationRenderer) -> None:
        self.renderer = renderer
        self.messages: list[Message] = []
        self.ids: list[int] = []  # the messages' ids, without the generation prompt
        self.videos: list[Any] = []  # multi_modal_data items in placeholder order
        self._conversation: list[dict[str, Any]] = []
        self._text = ""  # the full text, kept only for a template rendered over its whole prefix
        self._parts: list[tuple[_Segment, int, dict[str, Any], list[Any]]] = []  # (segment, start, tensors, items)
        self._assistant_spans: list[tuple[int, int]] = []
        self._message_spans: list[tuple[int, int]] = []
        self._generation: tuple[str, list[int]] | None = None

    def extend(self, messages: Sequence[Message]) -> None:
        """Render `messages` after those already held (ValueError / TemplateError naming the message)."""
        r = self.renderer
        with r._lock:
            for message in messages:
                k = len(self.messages)
                if k == 0 and message.role == "assistant":
                    raise ValueError("message 0: a conversation must start with a system or user message")
                self._conversation.append(r._chat_entry(message, k))
                try:
                    header, full = r._message_texts(self._conversation, k, self._text)
                except BaseException:
                    self._conversation.pop()
                    raise
                self.messages.append(message)
                if r.template != VIDEOSEEK_CHAT_TEMPLATE:
                    self._text += full
                    self._generation = None  # another template's generation prompt may depend on the history
                start = len(self.ids)
                if header is None:
                    self._add(_Segment(full, k, "message"), message)
                else:
                    body = full[len(header) :]
                    if not body.startswith(message.text):
                        raise TemplateError(
                            f"message {k} (assistant): the chat template rewrites assistant text (e.g. strips "
                            "<think>), so history would not be verbatim; use chat_template='videoseek'"
                        )
                    self._add(_Segment(header, k, "header"), message)
                    content_start = len(self.ids)
                    self._add(_Segment(message.text, k, "content"), message)
                    tail_start = len(self.ids)
                    tail_ids = self._add(_Segment(body[len(message.text) :], k, "tail"), message)
                    # the span ends after the <|im_end|> that closes the turn
                    self._assistant_spans.append((content_start, tail_start + int(tail_ids[:1] == [r.end_of_turn_id])))
                self._message_spans.append((start, len(self.ids)))

    def _add(self, seg: _Segment, message: Message) -> list[int]:
        ids, tensors, items = self.renderer._segment_tokens(seg, message)
        self._parts.append((seg, len(self.ids), tensors, items))
        self.ids.extend(ids)
        self.videos.extend(items)
        return ids

    def _generation_prompt(self) -> tuple[str, list[int]]:
        """The text and ids that open the assistant's next turn (the same after every message)."""
        if self._generation is None:
            r = self.renderer
            with r._lock:
                if not self._conversation:
                    raise ValueError("render: the conversation has no messages")
                if r.template == VIDEOSEEK_CHAT_TEMPLATE:
                    base = r._anchor(self._conversation[0])
                    text = r._anchor(self._conversation[0], True)[len(base) :]
                else:
                    text = r._checked_extension(self._text, self._conversation, True, len(self._conversation))[len(self._text) :]
                self._generation = (text, r.tokenizer(text, add_special_tokens=False)["input_ids"])
        return self._generation

    def generation_prompt_ids(self) -> list[int]:
        return list(self._generation_prompt()[1])

    def prompt_ids(self) -> list[int]:
        """The ids a model continues from: the messages and the generation prompt."""
        return self.ids + self._generation_prompt()[1]

    def video_grid_thw(self) -> Any:
        """The (videos, 3) grid of every video so far (small: one row per video), or None."""
        import torch

        grids = [t["video_grid_thw"] for _, _, t, _ in self._parts if "video_grid_thw" in t]
        return torch.cat(grids, dim=0) if grids else None

    def output(self, add_generation_prompt: bool = True) -> dict[str, Any]:
        """Model inputs of the conversation, the keys `ConversationRenderer.render` documents."""
        import torch

        if not self.messages:
            raise ValueError("render: the conversation has no messages")
        ids, text = self.ids, "".join(seg.text for seg, _, _, _ in self._parts)
        if add_generation_prompt:
            generation_text, generation_ids = self._generation_prompt()
            ids, text = ids + generation_ids, text + generation_text
        input_ids = torch.tensor([ids], dtype=torch.long)
        out: dict[str, Any] = {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "mm_token_type_ids": self.renderer._mm_token_type_ids(input_ids),
        }
        vision: dict[str, list[Any]] = {}
        for _, _, tensors, _ in self._parts:
            for key, value in tensors.items():
                vision.setdefault(key, []).append(value)
        out.update({key: torch.cat(values, dim=0) for key, values in vision.items()})
        out["assistant_spans"] = list(self._assistant_spans)
        out["message_spans"] = list(self._message_spans)
        out["text"] = text
        out["multi_modal_data"] = {("video" if self.renderer.mode == "video" else "image"): list(self.videos)} if self.videos else {}
        return out


class EpisodeRenders:
    """The live episodes' `RenderState`s, so a model policy renders only each turn's new messages.

    A policy's `act` gets every live conversation whole. Rendering it from scratch repeats, for
    all of its history, the template, the tokenizer and a processed-frames cache lookup (blake2b
    digests): 1.2 s of a 33 s greedy `videoseek rollout` of 192 questions with `make learn`'s SFT
    checkpoint on CPU. Here each episode's state is kept and extended by the messages added since
    its last turn.

    A state is reused only when the messages it holds are, object for object, the first
    messages of the episode's list (the agent loop appends to one list); anything else (a new
    episode under an old id, a truncated history, no episode id) renders afresh. So the output
    equals `renderer.render(messages)` by construction: `render` is one `extend` of the same
    messages. A message that fails to render drops its episode's state (the next render starts
    afresh). After each batch only the batch's episodes are kept (memory stays one batch).
    """

    def __init__(self, renderer: ConversationRenderer) -> None:
        self.renderer = renderer
        self._states: dict[str, RenderState] = {}
        self._lock = threading.Lock()

    def render_inputs(self, batch: Sequence[PolicyInput]) -> list[Mapping[str, Any]]:
        """Each input's conversation rendered with the generation prompt, continued by its `prefix`:
        `with_assistant_prefix(renderer.render(item.messages), tokenizer, item.prefix)`."""
        with self._lock:
            offered = [item.tools for item in batch if item.tools is not None]
            if any(tools != offered[0] for tools in offered[1:]):
                raise ValueError("one batch holds episodes with different tool lists; run each env configuration as its own batch")
            if offered and self.renderer.use_tools(offered[0]):
                self._states = {}  # rendered with the old tool list
            kept: dict[str, RenderState] = {}
            out = []
            for item in batch:
                episode_id, messages = item.episode_id, item.messages
                state = kept.get(episode_id) or self._states.get(episode_id)
                held = state.messages if state is not None else []
                if state is None or len(held) > len(messages) or any(a is not b for a, b in zip(held, messages)):
                    state, held = self.renderer.start(), []
                if len(held) < len(messages):
                    try:
                        state.extend(messages[len(held) :])
                    except BaseException:
                        self._states.pop(episode_id, None)  # half extended: never reuse it
                        raise
                out.append(with_assistant_prefix(state.output(add_generation_prompt=True), self.renderer.tokenizer, item.prefix))
                if episode_id:
                    kept[episode_id] = state
            self._states = kept
            return out


def prefix_token_ids(tokenizer: Any, prefix: str) -> list[int]:
    """The ids of an assistant-turn prefix (ProcessThinker's step prefixes), for every driver.

    `split_special_tokens=True`: the prefix is the policy's decoded text, and a special token it
    spelled out (`<|im_end|>`, `<|video_pad|>`) must stay text, not become a control or vision
    token the conversation has no frames for.
    """
    return list(tokenizer(prefix, add_special_tokens=False, split_special_tokens=True)["input_ids"])


def with_assistant_prefix(rendered: Mapping[str, Any], tokenizer: Any, prefix: str) -> Mapping[str, Any]:
    """The rendered generation prompt continued by `prefix`, the start of the assistant's turn.

    ProcessThinker samples continuations of a response's step prefixes: the model generates
    what follows `prefix` inside the same turn. Returns `rendered` unchanged for an empty prefix.
    """
    if not prefix:
        return rendered
    import torch

    ids = torch.tensor([prefix_token_ids(tokenizer, prefix)], dtype=rendered["input_ids"].dtype)
    out = dict(rendered)
    out["input_ids"] = torch.cat([rendered["input_ids"], ids], dim=1)
    out["attention_mask"] = torch.cat([rendered["attention_mask"], torch.ones_like(ids)], dim=1)
    if "mm_token_type_ids" in rendered:
        out["mm_token_type_ids"] = torch.cat([rendered["mm_token_type_ids"], torch.zeros_like(ids)], dim=1)
    return out


def assistant_token_mask(rendered: Mapping[str, Any]) -> Any:
    """LongTensor (1, L): 1 on each assistant turn's tokens, 0 on prompts, tool responses and frames."""
    import torch

    mask = torch.zeros_like(rendered["input_ids"])
    for start, end in rendered["assistant_spans"]:
        mask[0, start:end] = 1
    return mask
