"""Reward functions of the four seeds as pure functions (no env, model or file I/O imports).

Families (docs/rewards.md lists each with its seed, equation, parameters and defaults):
- accuracy by problem type (Video-R1): `accuracy_reward`
- format (Video-R1 / MOSS-ChatV eq. 4) and Ref-Delta format F1–F5 (VideoMend): `format_reward`,
  `ref_delta_format_reward`
- timestamp validity r_ts (VideoMend): `timestamp_reward`
- CS-GRPO clue-seek tool reward (Open-o3-Video-v2): `clue_seek_reward`
- grounded thinking (Open-o3-Video): `grounding_reward`
- DM-GRPO delta-mask, T-GRPO and SF-GRPO group contrasts (VideoMend, Video-R1): `delta_mask_reward`,
  `dmgrpo_reward`, `tgrpo_bonus`, `sfgrpo_bonus`
- Process Reasoning Reward (MOSS-ChatV): `rouge_scores`, `subsequence_dtw`, `process_reward`
- ProcessThinker rollout process reward: `rollout_process_reward`
- composition: `EpisodeSummary`, `RewardConfig`, `score_episode`, `score_group`; presets
  (`PRESETS`, `preset_table`); the component registry (`RewardComponent`, `register_component`,
  `get_component`; the built-ins in `components.py`)
- tagged blocks of model text (`<think>`, `<answer>`, …): `tags.py`
- GRPO's group statistics and advantages: `group_stats`, `group_advantages`
"""

from .advantage import group_advantages, group_stats
from .accuracy import accuracy_reward, extract_choice, normalize_problem_type, parse_number, word_error_rate
from .clue_seek import CallEvidence, ClueSeekParams, EvidenceState, clue_seek_reward, evidence_trace
from .compose import (
    COMPONENTS,
    EpisodeSummary,
    RewardConfig,
    episode_components,
    score_episode,
    score_group,
)
from .presets import PRESETS, preset_table
from .registry import (
    REWARD_COMPONENTS,
    ComponentParams,
    EpisodeContext,
    GroupContext,
    RewardComponent,
    get_component,
    register_component,
)
from .tags import first_block, last_block, tag_blocks, thinking_text
from .delta_mask import delta_mask_reward, dmgrpo_reward, group_accuracy, sfgrpo_bonus, tgrpo_bonus
from .format import format_reward, ref_delta_checks, ref_delta_format_reward
from .grounding import box_iou, grounding_reward, parse_citations
from .intervals import clip, intersection, measure, tiou, union
from .process import prepare_reference, prepare_steps, process_cost_matrix, process_reward, subsequence_dtw
from .process_thinker import parse_step_response, prefix_success_rates, rollout_process_reward, step_bonus
from .rouge import RougeReference, lcs_length, rouge_avg, rouge_avg_matrix, rouge_features, rouge_scores, rouge_tokenize
from .steps import split_sentences, split_steps
from .timestamps import find_times, parse_span, parse_time, timestamp_checks, timestamp_reward

__all__ = [
    "COMPONENTS",
    "PRESETS",
    "REWARD_COMPONENTS",
    "CallEvidence",
    "ClueSeekParams",
    "ComponentParams",
    "EpisodeContext",
    "EpisodeSummary",
    "EvidenceState",
    "GroupContext",
    "RewardComponent",
    "RewardConfig",
    "RougeReference",
    "accuracy_reward",
    "box_iou",
    "clip",
    "clue_seek_reward",
    "delta_mask_reward",
    "dmgrpo_reward",
    "episode_components",
    "evidence_trace",
    "extract_choice",
    "find_times",
    "first_block",
    "format_reward",
    "get_component",
    "grounding_reward",
    "group_accuracy",
    "group_advantages",
    "group_stats",
    "intersection",
    "last_block",
    "lcs_length",
    "measure",
    "normalize_problem_type",
    "parse_citations",
    "parse_number",
    "parse_span",
    "parse_step_response",
    "parse_time",
    "prefix_success_rates",
    "prepare_reference",
    "prepare_steps",
    "preset_table",
    "process_cost_matrix",
    "process_reward",
    "ref_delta_checks",
    "ref_delta_format_reward",
    "register_component",
    "rollout_process_reward",
    "rouge_avg",
    "rouge_avg_matrix",
    "rouge_features",
    "rouge_scores",
    "rouge_tokenize",
    "score_episode",
    "score_group",
    "sfgrpo_bonus",
    "split_sentences",
    "split_steps",
    "step_bonus",
    "subsequence_dtw",
    "tag_blocks",
    "tgrpo_bonus",
    "thinking_text",
    "timestamp_checks",
    "timestamp_reward",
    "tiou",
    "union",
    "word_error_rate",
]
