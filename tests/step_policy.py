"""A scripted policy for ProcessThinker's continuations (seed 004, eq. 2), shared by the tests that
drive them: it answers at once with three `<step>`s, and a continuation answers right only from a
prefix of at least two steps, so each prefix's success rate is known exactly ([0, 1, 1])."""

from __future__ import annotations

from videoseek.agents.policy import PolicyInput, PolicyOutput

STEPS = ["The sparse frames miss the event.", "I look at the clue.", "It shows the answer."]


class StepPolicy:
    name = "steps"

    def __init__(self):
        self.prefixes: list[str] = []

    def act(self, batch: list[PolicyInput]) -> list[PolicyOutput]:
        outs = []
        for inp in batch:
            if inp.prefix:
                self.prefixes.append(inp.prefix)
                good = inp.prefix.count("</step>") >= 2
                letter = inp.sample.answer if good else next(o[0] for o in inp.sample.options if o[0] != inp.sample.answer)
                outs.append(PolicyOutput(f"</think><answer>{letter}</answer>"))
            else:
                body = "".join(f"<step>{s}</step>" for s in STEPS)
                outs.append(PolicyOutput(f"<think>{body}</think><answer>{inp.sample.answer}</answer>"))
        return outs
