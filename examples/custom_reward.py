"""A reward component in one file: `brevity`, which pays for a short final answer turn.

Use it by its path wherever a reward config is written; no registration step is needed elsewhere:

    RewardConfig(preset="csgrpo", components=["examples/custom_reward.py:Brevity"],
                 weights={"brevity": 0.2}, brevity={"max_words": 40})

`components` imports the file (which registers the class) before `weights` is read, and a dumped
config keeps the path, so `videoseek view`, `videoseek eval` and verl's Ray workers load it as
well. A file path is relative to the current directory (here the repository root); a module on
the Python path is named "package.module:Class". docs/extending.md, "Add a reward component",
explains each part.

>>> from videoseek.rewards import EpisodeSummary, RewardConfig, score_episode
>>> class Sample:
...     problem_type, answer, options, duration = "multiple_choice", "B", ["A. red", "B. blue"], 10.0
>>> config = RewardConfig(preset="default", components=["examples/custom_reward.py:Brevity"], weights={"brevity": 0.5}, brevity={"max_words": 4})
>>> turn = "<think>the flash is blue and round</think><answer>B</answer>"   # 6 words of thinking: 4 / 6
>>> score_episode(Sample, EpisodeSummary("B", [turn], [], 0, 10.0), config)
(2.3333333333333335, {'accuracy': 1.0, 'format': 1.0, 'brevity': 0.6666666666666666})
"""

from __future__ import annotations

from pydantic import Field

from videoseek.rewards import ComponentParams, EpisodeContext, RewardComponent, register_component
from videoseek.rewards.tags import first_block


class BrevityParams(ComponentParams):
    max_words: int = Field(60, ge=1)  # thinking up to this many words earns the whole reward


@register_component
class Brevity(RewardComponent):
    name = "brevity"
    Params = BrevityParams
    summary = "1 for final-turn thinking of at most max_words words, max_words / words above"
    source = "an example (examples/custom_reward.py)"

    def score(self, ctx: EpisodeContext) -> float:
        turns = ctx.episode.assistant_turns
        thinking = first_block(turns[-1], "think") if turns else None
        if thinking is None:
            return 0.0
        words = len(thinking.split())
        return 1.0 if words <= ctx.params.max_words else ctx.params.max_words / words
