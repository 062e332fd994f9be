"""`EvidenceState`: the accumulated clue-interval evidence of CS-GRPO (Open-o3-Video-v2, seed 003).

The state and its geometry (gain, near-duplicates, adjacent fragments, region looks) are
implemented once, in `videoseek.rewards.clue_seek` (rewards <- envs: the reward scores an episode
with the same rules the env records), and re-exported here for the env's users. The env builds
one per episode with `episode_evidence`, its thresholds the episode's `RewardConfig.clue_seek`, so
`Turn.call.duplicate_of` and `fragment` (and the viewer's marks, read from them) follow the reward
config the episode is scored with.

>>> ev = EvidenceState(clue_intervals=[(10, 12)], duration=60)
>>> round(ev.add(9, 13).gain, 3)
0.5
"""

from __future__ import annotations

from collections.abc import Sequence

from videoseek.rewards import RewardConfig
from videoseek.rewards.clue_seek import CallEvidence, EvidenceState

__all__ = ["CallEvidence", "EvidenceState", "episode_evidence"]


def episode_evidence(clue_intervals: Sequence[Sequence[float]], duration: float, reward: RewardConfig, key_frames: Sequence = ()) -> EvidenceState:
    """An empty evidence state with the thresholds of the episode's reward config (`reward.clue_seek`)."""
    return EvidenceState(clue_intervals, duration, key_frames=key_frames, params=reward.clue_seek)
