"""Reward functions of the four seeds as pure functions (no env, model or file I/O imports).

Families: accuracy by problem type (Video-R1), format and Ref-Delta format (VideoMend F1–F5),
timestamp validity r_ts (VideoMend), and their composition into an episode reward
(`score_episode`). See docs/rewards.md for every family, its seed, equation and defaults.
"""

from .accuracy import accuracy_reward, extract_choice, normalize_problem_type, parse_number, word_error_rate
from .compose import PRESETS, EpisodeSummary, RewardConfig, score_episode, thinking_text
from .format import format_reward, ref_delta_checks, ref_delta_format_reward
from .intervals import clip, intersection, measure, tiou, union
from .rouge import rouge_avg, rouge_features, rouge_scores, rouge_tokenize
from .timestamps import find_times, parse_span, parse_time, timestamp_checks, timestamp_reward

__all__ = [
    "EpisodeSummary",
    "PRESETS",
    "RewardConfig",
    "accuracy_reward",
    "clip",
    "extract_choice",
    "find_times",
    "format_reward",
    "intersection",
    "measure",
    "normalize_problem_type",
    "parse_number",
    "parse_span",
    "parse_time",
    "ref_delta_checks",
    "ref_delta_format_reward",
    "rouge_avg",
    "rouge_features",
    "rouge_scores",
    "rouge_tokenize",
    "score_episode",
    "thinking_text",
    "tiou",
    "timestamp_checks",
    "timestamp_reward",
    "union",
    "word_error_rate",
]
