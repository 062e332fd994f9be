"""VideoSeek environment: samples, video access, action parsing, evidence state, the Gymnasium env.

The env is registered with Gymnasium as "videoseek/VideoSeek-v0" on `import videoseek` (which
importing this package implies):

>>> import gymnasium as gym, videoseek.envs
>>> "videoseek/VideoSeek-v0" in gym.registry
True
"""

from videoseek.envs.actions import Answer, CropVideo, Invalid, ParsedTurn, Think, ToolCall, parse_action, parse_time
from videoseek.envs.env import EnvConfig, Perturbation, VideoSeekEnv
from videoseek.envs.evidence import CallEvidence, EvidenceState
from videoseek.envs.protocol import CROP_VIDEO_TOOL, SYSTEM_PROMPT
from videoseek.envs.sample import DataError, KeyFrame, MaskPattern, ProblemType, VideoSample, iter_jsonl, write_jsonl
from videoseek.envs.tools import Tool, ToolError, ToolResult, register_tool
from videoseek.envs.trajectory import SCHEMA_VERSION, Trajectory
from videoseek.envs.video import FRAME_CACHE, FrameCache, VideoReader, open_video, probe_video

__all__ = [
    "Answer", "CROP_VIDEO_TOOL", "CallEvidence", "CropVideo", "DataError", "EnvConfig", "EvidenceState", "FRAME_CACHE", "FrameCache",
    "Invalid", "KeyFrame", "MaskPattern", "ParsedTurn", "Perturbation", "ProblemType", "SCHEMA_VERSION", "SYSTEM_PROMPT", "Think", "Tool", "ToolCall", "ToolError", "ToolResult",
    "Trajectory", "VideoReader", "VideoSample", "VideoSeekEnv", "iter_jsonl", "open_video", "parse_action",
    "parse_time", "probe_video", "register_tool", "write_jsonl",
]
