"""One reader of tagged blocks (`rewards/tags.py`, issue 36 item 6): it finds what the regexes it
replaced found, closed and unclosed, in linear time."""

from __future__ import annotations

import random
import re
import time

from videoseek.rewards.tags import first_block, iter_blocks, last_block, remove_blocks, tag_blocks, thinking_text

PIECES = ["<think>", "</think>", "<answer>", "</answer>", "<think", "answer>", "a", "B", " ", "\n", "<step>", "</step>"]


def texts(n=3000, seed=0):
    rng = random.Random(seed)
    for _ in range(n):
        yield "".join(rng.choice(PIECES) for _ in range(rng.randint(0, 14)))


def test_closed_blocks_are_the_regex_matches():
    for text in texts():
        for tag in ("think", "answer", "step"):
            want = [(m.start(), m.end(), m.start(1), m.group(1)) for m in re.finditer(rf"<{tag}>(.*?)</{tag}>", text, re.S)]
            got = [(b.start, b.end, b.content_start, b.content) for b in iter_blocks(text, tag)]
            assert got == want, (text, tag)
            assert tag_blocks(text, tag) == [w[3] for w in want]
            assert first_block(text, tag) == (want[0][3] if want else None)
            assert remove_blocks(text, tag) == re.sub(rf"<{tag}>.*?</{tag}>", "", text, flags=re.S)


def test_unclosed_blocks_are_the_regex_matches_that_run_to_the_end():
    # `<tag>(.*?)(</tag>|\Z)`: the parser's and verl's reward function's reading (`$` also matched
    # before a final newline, which every reader strips).
    for text in texts(seed=1):
        for tag in ("think", "answer"):
            want = [(m.start(), m.group(1), bool(m.group(2))) for m in re.finditer(rf"<{tag}>(.*?)(</{tag}>|\Z)", text, re.S)]
            got = [(b.start, b.content, b.closed) for b in iter_blocks(text, tag, unclosed=True)]
            assert got == want, (text, tag)
            assert last_block(text, tag, unclosed=True) == (want[-1][1] if want else None)


def test_thinking_text_joins_every_think_of_every_turn():
    assert thinking_text(["<think> a </think><tool_call>{}</tool_call>", "no thinking", "<think>b</think><think>c"]) == "a\nb"


def test_linear_in_the_length_of_adversarial_text():
    def cost(k):
        text = "<think>" * k + "x" + "<answer>" * k
        t0 = time.perf_counter()
        for _ in range(5):
            tag_blocks(text, "think"), last_block(text, "answer", unclosed=True), thinking_text([text])
        return time.perf_counter() - t0

    cost(1000)
    small, large = min(cost(20_000) for _ in range(3)), min(cost(200_000) for _ in range(3))
    assert large < 40 * small  # 10x the text: linear is ~10x, the lazy regexes were ~100x
