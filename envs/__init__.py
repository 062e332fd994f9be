"""VideoSeek environment: samples, video access, action parsing, evidence state, the Gymnasium env.

>>> import gymnasium as gym, videoseek.envs
>>> "videoseek/VideoSeek-v0" in gym.registry
True
"""

from gymnasium.envs.registration import register

from videoseek.envs.actions import Answer, CropVideo, Invalid, ParsedTurn, Think, parse_action, parse_time
from videoseek.envs.env import EnvConfig, Perturbation, VideoSeekEnv
from videoseek.envs.evidence import CallEvidence, EvidenceState
from videoseek.envs.sample import DataError, KeyFrame, MaskPattern, ProblemType, VideoSample, iter_jsonl, write_jsonl
from videoseek.envs.trajectory import SCHEMA_VERSION, Trajectory
from videoseek.envs.video import FRAME_CACHE, FrameCache, VideoReader, open_video, probe_video

register(id="videoseek/VideoSeek-v0", entry_point="videoseek.envs.env:VideoSeekEnv")

__all__ = [
    "Answer", "CallEvidence", "CropVideo", "DataError", "EnvConfig", "EvidenceState", "FRAME_CACHE", "FrameCache",
    "Invalid", "KeyFrame", "MaskPattern", "ParsedTurn", "Perturbation", "ProblemType", "SCHEMA_VERSION", "Think",
    "Trajectory", "VideoReader", "VideoSample", "VideoSeekEnv", "iter_jsonl", "open_video", "parse_action",
    "parse_time", "probe_video", "write_jsonl",
]
