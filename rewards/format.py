"""Format rewards: the binary think/answer format and VideoMend's Ref-Delta format F1–F5.

`format_reward` is the R_fmt of MOSS-ChatV (seed 000, eq. 4) and Video-R1: 1 when the output
follows `<think>…</think><answer>…</answer>`, else 0. For a multi-turn VideoSeek episode the
rule applies to the final turn; earlier turns may be tool calls or thinking but never answer.

`ref_delta_format_reward` is VideoMend's `sf_format_reward` (seed 002, §6.3): F1 `<think>`
block present (0.15), F2 non-empty `<answer>` (0.15), F3 at least one reference `<time>` tag
(0.25), F4 at least one `<time_range>` followed by its `<delta>` (0.25), F5 a closing
"Reasoning Summary" paragraph (0.20). The seed lists the checks only; the exact patterns
here are the choices documented on each helper.

>>> format_reward("<think>look at 3 s</think><answer>B</answer>")
1.0
>>> format_reward(["<tool_call>{...}</tool_call>", "<think>ok</think> <answer>B</answer>"])
1.0
>>> format_reward("<answer>B</answer>")
0.0
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .tags import first_block, scan_end

# Chat-template tokens a decoded response may still carry at a turn's end.
_CHAT_TOKENS = re.compile(r"<\|(?:im_end|endoftext|im_start)\|>(?:assistant|user|tool)?")
# Where a tool exchange ends inside one decoded multi-turn string; the final turn follows it.
_TURN_BREAK = re.compile(r"</tool_call>|</tool_response>|<\|im_start\|>assistant")
_FINAL_TURN = re.compile(
    r"\s*<think>(?P<think>(?:(?!</?think>).)*)</think>\s*<answer>(?P<answer>(?:(?!</?answer>).)*)</answer>\s*",
    re.DOTALL,
)


def final_turn(text: str | Sequence[str]) -> tuple[str, str]:
    """(earlier turns, final turn) of a list of assistant turns or of one decoded string."""
    if not isinstance(text, str):
        turns = list(text)
        if not turns:
            return "", ""
        return "\n".join(turns[:-1]), turns[-1]
    breaks = list(_TURN_BREAK.finditer(text))
    cut = breaks[-1].end() if breaks else 0
    return text[:cut], text[cut:]


def format_reward(text: str | Sequence[str], require_content: bool = True) -> float:
    """1.0 if the final turn is `<think>…</think>` then exactly one `<answer>…</answer>`, else 0.0.

    `text` is one response string (tool calls and tool responses before the final turn are
    fine) or the list of an episode's assistant turns. No earlier turn may hold an `<answer>`.
    `require_content` (default True; Video-R1's regex allows empty tags) asks both tags to hold
    non-blank text, since an empty think or answer exposes nothing.

    >>> format_reward("<think></think><answer>B</answer>"), format_reward("<think></think><answer>B</answer>", False)
    (0.0, 1.0)
    >>> format_reward("<think>a</think><answer>B</answer><answer>C</answer>")
    0.0
    """
    earlier, last = final_turn(text)
    if "<answer>" in earlier:
        return 0.0
    last = _CHAT_TOKENS.sub("", last)
    m = _FINAL_TURN.fullmatch(last)
    if not m:
        return 0.0
    if require_content and not (m.group("think").strip() and m.group("answer").strip()):
        return 0.0
    return 1.0


REF_DELTA_WEIGHTS = {"F1": 0.15, "F2": 0.15, "F3": 0.25, "F4": 0.25, "F5": 0.20}
_TIME = re.compile(r"<time>\s*\S.*?</time>", re.DOTALL)
# A <time_range> whose <delta> follows with no other tag in between ("From <time_range>…</time_range>, <delta>…").
_RANGE_DELTA = re.compile(r"<time_range>\s*\S[^<]*</time_range>[^<]*<delta>\s*\S.*?</delta>", re.DOTALL)
_LAST_TAGS = ("</delta>", "</time>", "</time_range>")


def ref_delta_checks(text: str | Sequence[str], summary_marker: str = "Reasoning Summary") -> dict[str, float]:
    """The five VideoMend format checks as 0/1: F1 think block, F2 non-empty answer, F3 a
    reference `<time>`, F4 a `<time_range>`+`<delta>` pair, F5 a summary paragraph.

    F3–F5 look inside the (first) think block. F5 asks for `summary_marker` followed by text,
    after the last time/delta tag, since the seed's summary closes the change chain. Linear in
    the text's length (every search is bounded by the last closing tag it needs; see `scan_end`).

    >>> ref_delta_checks("<think>Reference frame at <time>00:00:01</time>: a door.</think><answer>A</answer>")
    {'F1': 1.0, 'F2': 1.0, 'F3': 1.0, 'F4': 0.0, 'F5': 0.0}
    """
    if not isinstance(text, str):
        text = "\n".join(text)
    think = first_block(text, "think")
    answer = first_block(text, "answer")
    body = think or ""
    # The text after the last closing time/delta tag (a greedy `.*(?:</delta>|…)` is quadratic).
    cut = max((i + len(t) for t in _LAST_TAGS if (i := body.rfind(t)) >= 0), default=0)
    tail = body[cut:]
    # `\s*(?:[:：]\s*)?` rather than `\s*[:：]?\s*`: two adjacent `\s*` backtrack quadratically.
    summary = re.search(re.escape(summary_marker) + r"\s*(?:[:：]\s*)?\S", tail, re.IGNORECASE)
    return {
        "F1": 1.0 if think is not None else 0.0,
        "F2": 1.0 if answer and answer.strip() else 0.0,
        "F3": 1.0 if _TIME.search(body, 0, scan_end(body, "</time>")) else 0.0,
        "F4": 1.0 if _RANGE_DELTA.search(body, 0, scan_end(body, "</delta>")) else 0.0,
        "F5": 1.0 if think is not None and summary else 0.0,
    }


def ref_delta_format_reward(
    text: str | Sequence[str],
    weights: dict[str, float] | None = None,
    return_breakdown: bool = False,
    summary_marker: str = "Reasoning Summary",
) -> float | tuple[float, dict[str, float]]:
    """VideoMend Ref-Delta format reward: Σ w_k·F_k with weights 0.15/0.15/0.25/0.25/0.20.

    With `return_breakdown=True` returns (reward, {"F1": …, …, "F5": …}).

    >>> cot = ("<think>Reference frame at <time>00:00:00.5</time>: a door is open. "
    ...        "From <time_range>00:00:00.5 - 00:00:03.0</time_range>, <delta>it swings shut</delta>. "
    ...        "Reasoning Summary: open then closed.</think><answer>B</answer>")
    >>> ref_delta_format_reward(cot)
    1.0
    >>> ref_delta_format_reward("<think>no structure</think><answer>B</answer>", return_breakdown=True)
    (0.3, {'F1': 1.0, 'F2': 1.0, 'F3': 0.0, 'F4': 0.0, 'F5': 0.0})
    """
    w = dict(REF_DELTA_WEIGHTS if weights is None else weights)
    checks = ref_delta_checks(text, summary_marker)
    reward = sum(w.get(k, 0.0) * v for k, v in checks.items())
    reward = round(reward, 12)  # 0.15 + 0.15 is 0.30000000000000004 in binary; keep sums exact-looking
    return (reward, checks) if return_breakdown else reward
