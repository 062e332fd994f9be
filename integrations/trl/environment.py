"""`VideoSeekTRLEnv`: a `VideoSeekEnv` episode as TRL's `GRPOTrainer(environment_factory=...)` plays it.

What TRL 1.16 does with such a class (`trl/trainer/grpo_trainer.py`), and how this one fits:

- Every public method of the instance's class other than `reset` and `get_reward` becomes a tool,
  its JSON schema built by transformers' `get_json_schema` from the signature's type hints and
  the Google-style docstring. So `VideoSeekTRLEnv(config)` is an instance of a class made for
  `config.tools` (`env_class`): one public method per configured tool, named after it, with the
  tool's description and parameters as its docstring and hints, and no method for a tool that
  is not configured (TRL would advertise it). Its schema is the tool's (`Tool.schema()`), less
  the keywords a type hint cannot carry (`advertised_schema`: zoom's `minItems`/`maxItems` of
  `box`); the env still checks every call against the whole schema. A tool whose schema a
  signature and docstring cannot reproduce is refused when the class is made, not in training.
- Instances are pooled and reused across batches: `reset(**row)` builds a fresh `VideoSeekEnv`
  from the row, so nothing of an earlier episode survives; it accepts the row's `prompt`.
- `reset` returns the question and the sparse frames as content blocks, which TRL appends to the
  prompt's last user turn; a tool method returns the call's frames as image blocks, each after
  its time ("Frame at 12.5s: "), laid out as the renderer lays out a tool turn in images mode
  (`agents.prompting.frames_content`, `lay_out`). TRL collects only image blocks from tool
  results, so frames travel as images, not as one video (docs/training.md says what that loses).
- A tool call is stepped through the env as the Hermes text the protocol defines, so the env
  judges the arguments: a bad value ("abc", a missing or extra argument, a crop with start >= end,
  a span outside the video) is an error observation that costs a turn, never an exception in the
  trainer (a method takes whatever arguments TRL passes and lets the env check them).
- TRL never shows the final answer to the environment (`get_reward()` takes no arguments), so the
  episode is finished by the reward function (`rewards.videoseek_reward`), which steps the env
  with the last assistant turn and reads the env's reward.

Group presets (dmgrpo, tgrpo, sfgrpo: perturbed groups; processthinker: continuations) need the
group engine (`agents/groups.py`), which TRL's one-environment-per-rollout contract cannot run:
they are refused at construction.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, Union

import numpy as np
from PIL import Image

from videoseek.agents.groups import score_origin_group
from videoseek.agents.prompting import defang, frames_content, lay_out
from videoseek.envs.env import EnvConfig, VideoSeekEnv
from videoseek.envs.tools import Tool, resolve_tools
from videoseek.integrations.trl.dataset import sample_from_row

if TYPE_CHECKING:
    from videoseek.integrations.trl.recorder import TrajectoryRecorder

ENDED_TEXT = "The episode has ended (turn budget spent); no frames. Give your final answer in <answer></answer>."


def observation_blocks(role: str, obs: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An env observation as chat content blocks: text, and one PIL image per frame after its time.

    The text is defanged (`<|...|>` spellings broken), so no text can add a vision placeholder
    without an image behind it.
    """
    text = {"type": "text", "text": defang(obs["text"])}
    frames, timestamps = obs["frames"], np.asarray(obs["timestamps"], dtype=np.float64)
    if len(frames) == 0:
        return [text]
    images = iter(Image.fromarray(np.ascontiguousarray(f)) for f in frames)
    items = [{"type": "image", "image": next(images)} if item["type"] == "image" else item for item in frames_content(timestamps, "images")]
    return lay_out(role, text, items)


def group_preset_reason(config: EnvConfig) -> str | None:
    """Why `config`'s reward cannot be formed one episode at a time, or None."""
    reward = config.reward
    if reward.group_kinds():
        return f"reward preset {reward.preset!r} needs perturbed groups ({', '.join(reward.group_kinds())})"
    if reward.needs_continuations():
        return f"reward preset {reward.preset!r} needs continuations of each step prefix"
    return None


class VideoSeekTRLEnv:
    """One VideoSeek episode per rollout of TRL's `GRPOTrainer` (see the module docstring).

    `VideoSeekTRLEnv(config)` returns an instance of `env_class(config.tools)`: this class plus
    one public method per configured tool, which TRL offers the model.

    Args:
        config: the `EnvConfig` of every episode (tools, frame budgets, turns, reward preset).
    """

    _tools: tuple[type[Tool], ...] = ()  # the tools this class has methods for (`env_class`)

    def __new__(cls, config: EnvConfig | None = None, recorder: TrajectoryRecorder | None = None) -> VideoSeekTRLEnv:
        if cls is VideoSeekTRLEnv:
            cls = env_class(tuple(resolve_tools((config or EnvConfig()).tools)))
        return super().__new__(cls)

    def __init__(self, config: EnvConfig | None = None, recorder: TrajectoryRecorder | None = None) -> None:
        self._config = config or EnvConfig()
        self._recorder = recorder
        if [t.name for t in self._tools] != [t.name for t in resolve_tools(self._config.tools)]:
            raise ValueError(f"{type(self).__name__} has methods for other tools than the config's {self._config.tools}; use VideoSeekTRLEnv(config)")
        reason = group_preset_reason(self._config)
        if reason:
            raise ValueError(f"{reason}: the group engine runs in `videoseek rollout`, the local backend and VideoSeekAgentLoop, not in TRL")
        self._env: VideoSeekEnv | None = None
        self._ended = False
        self._result: tuple[float, dict[str, float]] | None = None
        self.frames_returned = 0  # frames the episode has shown the model, initial ones included

    @property
    def env(self) -> VideoSeekEnv | None:
        """The episode's `VideoSeekEnv` (its `trajectory` is the viewer's record)."""
        return self._env

    @property
    def result(self) -> tuple[float, dict[str, float]] | None:
        """(reward, components) once the reward function has finished the episode, else None."""
        return self._result

    def reset(self, prompt: Any = None, **row: Any) -> list[dict[str, Any]]:
        """Start the episode of the dataset row (a `VideoSample`'s fields); returns the question and frames."""
        self._env, self._ended, self._result, self.frames_returned = None, False, None, 0
        env = VideoSeekEnv(sample_from_row(row), self._config)
        obs, _ = env.reset(seed=0)
        self._env = env
        self.frames_returned = len(obs["frames"])
        return observation_blocks("user", obs)

    def _call(self, name: str, arguments: dict[str, Any]) -> list[dict[str, Any]]:
        """Step the env with a call of tool `name` as the model wrote it; the observation as content blocks."""
        if self._env is None:
            return [{"type": "text", "text": "Error: no episode (reset was not called)."}]
        if self._ended:
            return [{"type": "text", "text": ENDED_TEXT}]
        call = {"name": name, "arguments": arguments}
        obs, _, terminated, truncated, _ = self._env.step(f"<tool_call>{json.dumps(call, default=str)}</tool_call>")
        self._ended = terminated or truncated
        self.frames_returned += len(obs["frames"])
        return observation_blocks("tool", obs)

    def _finish(self, final_text: str | None) -> tuple[float, dict[str, float]]:
        """Step the env with the rollout's last assistant turn (None: it ended on a tool call TRL
        did not run) and return the env's (reward, components). A rollout that ends without an
        answer (no `<answer>`, TRL's completion budget, a tool result TRL rolled back) is scored as
        truncated, as `VideoSeekAgentLoop` scores an episode its response budget ends."""
        if self._result is not None:
            return self._result
        env = self._env
        if env is None:
            raise RuntimeError("reward requested for an environment that was never reset")
        if not self._ended and final_text is not None:
            _, _, terminated, truncated, _ = env.step(final_text)
            self._ended = terminated or truncated
        traj = env.trajectory
        if self._ended:
            self._result = (float(traj.reward), dict(traj.reward_components))
        else:
            summary = dataclasses.replace(env.summary(), truncated=True)
            scores, _ = score_origin_group(env.sample, [summary], {}, self._config.reward)
            traj.truncated, (traj.reward, traj.reward_components) = True, scores[0]
            traj.metrics["ended_by"] = "trl"
            self._result = scores[0]
        if self._recorder is not None:
            self._recorder.add(env)
        return self._result


# ---- one method per tool ----------------------------------------------------------------------
_SCALARS = {"number": float, "integer": int, "string": str, "boolean": bool, "null": type(None)}
# The JSON-schema keywords transformers' `get_json_schema` writes from a type hint and a docstring;
# the others (minItems, minimum, pattern, ...) a signature cannot carry, and only the env checks them.
_CARRIED = ("type", "description", "enum", "nullable", "items", "properties", "required", "additionalProperties")


def _hint(schema: Mapping[str, Any]) -> Any:
    """The type hint `get_json_schema` turns into this parameter schema (as near as hints go)."""
    if "enum" in schema:
        return Literal[tuple(schema["enum"])]
    kind = schema.get("type")
    if isinstance(kind, list):
        return Union[tuple(_hint({"type": k}) for k in kind)]  # noqa: UP007 (a tuple of types)
    if kind == "array":
        return list[_hint(schema["items"])] if isinstance(schema.get("items"), Mapping) else list
    if kind == "object":
        extra = schema.get("additionalProperties")
        return dict[str, _hint(extra)] if isinstance(extra, Mapping) else dict
    return _SCALARS.get(kind, Any)


def _carried(schema: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key not in _CARRIED or (key == "additionalProperties" and not isinstance(value, Mapping)) or (key == "required" and not value):
            continue
        if key == "items" or key == "additionalProperties":
            value = _carried(value)
        elif key == "properties":
            value = {name: _carried(p) for name, p in value.items()}
        out[key] = json.loads(json.dumps(value))
    return out


def advertised_schema(tool: type[Tool]) -> dict[str, Any]:
    """The tool's OpenAI schema as TRL advertises its method: `Tool.schema()` without the keywords
    a type hint cannot carry (see `_CARRIED`), the required arguments in the order of `properties`.

    >>> from videoseek.envs.tools import get_tool
    >>> advertised_schema(get_tool("crop_video")) == get_tool("crop_video").schema()
    True
    >>> advertised_schema(get_tool("zoom"))["function"]["parameters"]["properties"]["box"]["type"]
    'array'
    """
    schema = tool.schema()
    params = _carried(schema["function"]["parameters"])
    if "required" in params:
        order = list(params.get("properties", {}))
        params["required"] = sorted(params["required"], key=lambda n: order.index(n) if n in order else len(order))
    return {"type": "function", "function": {**schema["function"], "parameters": params}}


class _Absent:
    """The default of an optional argument the model left out (it is not passed to the tool)."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = _Absent()


def tool_method(tool: type[Tool]) -> Callable[..., list[dict[str, Any]]]:
    """The method TRL offers for `tool`: named after it, its signature and Google docstring made
    from the tool's parameters and description (what `get_json_schema` reads). It takes whatever
    TRL passes and steps the env with the call, so the env judges the arguments."""
    properties: dict[str, Any] = dict(tool.parameters.get("properties", {}))
    required = [n for n in properties if n in tool.parameters.get("required", [])]
    optional = [n for n in properties if n not in required]
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter("self", kind)]
    params += [inspect.Parameter(n, kind, annotation=_hint(properties[n])) for n in required]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=ABSENT, annotation=_hint(properties[n])) for n in optional]
    lines = [f"    {n}: {properties[n].get('description', '')}" for n in properties]
    returns = f"    The env's reply as content blocks: its text, and each frame {tool.name} returned as an image after its time."

    def method(self: VideoSeekTRLEnv, *args: Any, **arguments: Any) -> list[dict[str, Any]]:
        if len(args) > len(required):
            raise TypeError(f"{tool.name}() takes {len(required)} positional arguments but {len(args)} were given")
        arguments = {**dict(zip(required, args)), **arguments}
        return self._call(tool.name, {k: v for k, v in arguments.items() if v is not ABSENT})

    method.__name__ = tool.name
    method.__doc__ = f"{tool.description}\n\nArgs:\n" + "\n".join(lines) + f"\n\nReturns:\n{returns}\n"
    method.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    method.__annotations__ = {p.name: p.annotation for p in params[1:]}
    return method


def _first_difference(a: Any, b: Any, where: str = "") -> str:
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for key in [*a, *(k for k in b if k not in a)]:
            if a.get(key) != b.get(key):
                return _first_difference(a.get(key), b.get(key), f"{where}.{key}" if where else str(key))
    return f"{where}: {json.dumps(a, default=str)[:80]} instead of {json.dumps(b, default=str)[:80]}"


@lru_cache(maxsize=None)
def env_class(tools: tuple[type[Tool], ...]) -> type[VideoSeekTRLEnv]:
    """`VideoSeekTRLEnv` with one public method per tool (`tool_method`), made once per tool list.

    Raises ValueError for a tool TRL cannot offer: a name that is private (TRL skips it) or one of
    the class's own attributes, or a schema a signature and docstring cannot reproduce (a
    parameter without a description, a description the docstring parser would cut).
    """
    own = {name for name in dir(VideoSeekTRLEnv)} | {"frames_returned"}
    methods: dict[str, Any] = {}
    for tool in tools:
        if tool.name.startswith("_") or tool.name in own:
            raise ValueError(f"tool {tool.name!r} cannot be a method of VideoSeekTRLEnv: TRL offers only public methods, "
                             "and env, reset, result and frames_returned are the class's own")
        methods[tool.name] = tool_method(tool)
    name = f"VideoSeekTRLEnv[{', '.join(t.name for t in tools)}]"
    cls = type(name, (VideoSeekTRLEnv,), {"_tools": tools, "__module__": __name__, "__qualname__": name, **methods})
    for method in methods.values():
        method.__qualname__ = f"{name}.{method.__name__}"
    try:
        from transformers.utils import get_json_schema
    except ImportError:  # without transformers, TRL cannot run either: nothing to compare with
        return cls
    for tool in tools:
        try:
            made = get_json_schema(getattr(cls, tool.name))
        except Exception as exc:  # transformers' TypeHintParsingException, DocstringParsingException
            raise ValueError(f"tool {tool.name!r}: TRL cannot build its schema from a signature and docstring ({exc})") from None
        if made != advertised_schema(tool):
            raise ValueError(f"tool {tool.name!r}: TRL would advertise a schema other than the tool's ({_first_difference(made, advertised_schema(tool))})")
    return cls


def environment_factory(config: EnvConfig | None = None, recorder: TrajectoryRecorder | None = None) -> Callable[[], VideoSeekTRLEnv]:
    """The `environment_factory` for `GRPOTrainer`: a new `VideoSeekTRLEnv(config)` per call; with a
    `recorder` (`TrajectoryRecorder`, also given to the trainer as a callback) every scored episode
    is written where the viewer reads a run."""
    config = config or EnvConfig()
    VideoSeekTRLEnv(config)  # refuse a group preset or a tool TRL cannot offer here, not when TRL first builds one

    def factory() -> VideoSeekTRLEnv:
        return VideoSeekTRLEnv(config, recorder)

    return factory


__all__: Sequence[str] = ("ENDED_TEXT", "VideoSeekTRLEnv", "advertised_schema", "env_class", "environment_factory", "observation_blocks", "tool_method")
