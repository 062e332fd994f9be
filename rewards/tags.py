"""Tagged blocks of a model's text: `<think>…</think>`, `<answer>…</answer>`, any `<tag>…</tag>`.

The one place VideoSeek reads tagged blocks (issue 36, item 6: the think/answer regexes were
written in eight modules). Every function is linear in the text's length: `str.find`, never a
lazy regex retried at each of many unclosed opens (`tests/envs/test_linear_time_parsing_and_scoring.py`).

- `iter_blocks(text, tag)`: each closed block in text order, with its positions; the same blocks
  as `re.finditer(r"<tag>(.*?)</tag>", text, re.DOTALL)` (non-overlapping, the first close after
  an open ends it).
- `iter_blocks(text, tag, unclosed=True)`: a final open tag without its close is a block that runs
  to the end of the text (`Block.closed` False), as `<tag>(.*?)(?:</tag>|$)` reads it. Two readers
  want that: the action parser (`envs/actions.py`), which accepts a turn cut off by the token
  limit and records the repair, and verl's reward function for rows it did not play
  (`training/verl_plugin/reward_fn.py`), which takes the last answer even when unclosed.
- `tag_blocks`, `first_block`, `last_block`: the contents only; `remove_blocks`: the text without
  its closed blocks of a tag.
- `thinking_text(turns)`: all `<think>` contents of an episode's turns (grounding, PRR).
- `tag_contents(text, *pairs)`: several kinds of block at once, in text order (timestamps).
- `scan_end(text, close)`: where a search for `open(.*?)close` may stop (for regexes that must stay).

>>> tag_blocks("<think>a</think> <answer>B</answer><think>b</think>", "think")
['a', 'b']
>>> first_block("<answer>B</answer><answer>C</answer>", "answer"), last_block("<answer>B</answer><answer>C", "answer", unclosed=True)
('B', 'C')
>>> remove_blocks("x <answer>B</answer> y", "answer")
'x  y'
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Block:
    """One `<tag>…</tag>` of a text: `text[start:end]` is the whole block, `content` what lies between
    the tags (starting at `content_start`); an unclosed block (`closed` False) ends at the text's end."""

    start: int
    end: int
    content_start: int
    content: str
    closed: bool


def iter_blocks(text: str, tag: str, unclosed: bool = False) -> Iterator[Block]:
    """The blocks of `<tag>…</tag>` in `text`, in order (see the module docstring for `unclosed`).

    >>> [(b.content, b.closed) for b in iter_blocks("<answer>A</answer> <answer>B", "answer", unclosed=True)]
    [('A', True), ('B', False)]
    >>> [b.content for b in iter_blocks("<answer>A</answer> <answer>B", "answer")]
    ['A']
    """
    opening, closing = f"<{tag}>", f"</{tag}>"
    pos = 0
    while (i := text.find(opening, pos)) >= 0:
        start = i + len(opening)
        j = text.find(closing, start)
        if j < 0:  # no close after this open, so none after any later open either
            if unclosed:
                yield Block(i, len(text), start, text[start:], False)
            return
        yield Block(i, j + len(closing), start, text[start:j], True)
        pos = j + len(closing)


def tag_blocks(text: str, tag: str) -> list[str]:
    """The contents of every closed `<tag>…</tag>`, in order."""
    return [b.content for b in iter_blocks(text, tag)]


def first_block(text: str, tag: str, unclosed: bool = False) -> str | None:
    """The content of the first `<tag>…</tag>` (None if there is none)."""
    block = next(iter_blocks(text, tag, unclosed), None)
    return None if block is None else block.content


def last_block(text: str, tag: str, unclosed: bool = False) -> str | None:
    """The content of the last `<tag>…</tag>` (None if there is none)."""
    block = None
    for block in iter_blocks(text, tag, unclosed):  # noqa: B007 - the last one is wanted
        pass
    return None if block is None else block.content


def thinking_text(turns: Sequence[str]) -> str:
    """All `<think>` contents of an episode's assistant turns, in order, stripped, one paragraph each.

    >>> thinking_text(["<think> look at 3 s </think><tool_call>{}</tool_call>", "<think>blue</think><answer>B</answer>"])
    'look at 3 s\\nblue'
    """
    return "\n".join(b.strip() for t in turns for b in tag_blocks(t, "think"))


def remove_blocks(text: str, tag: str) -> str:
    """`text` without its closed `<tag>…</tag>` blocks (tags included)."""
    pieces, pos = [], 0
    for b in iter_blocks(text, tag):
        pieces.append(text[pos : b.start])
        pos = b.end
    pieces.append(text[pos:])
    return "".join(pieces)


def scan_end(text: str, close: str) -> int:
    """End of the last `close` in `text` (0 if there is none): where to stop searching for `open(.*?)close`.

    Why: a lazy `open(.*?)close` retried at each of k unclosed opens scans to the end of the
    text every time (k·n). No match can end after the last `close`, and every attempt that starts
    before it finds a `close`, so `pattern.finditer(text, 0, scan_end(text, close))` returns
    exactly the matches of the unbounded search, in linear time.

    >>> import re
    >>> text = "<step>a</step>" + "<step>" * 3
    >>> re.findall(r"<step>(.*?)</step>", text[: scan_end(text, "</step>")])
    ['a']
    """
    i = text.rfind(close)
    return 0 if i < 0 else i + len(close)


def tag_contents(text: str, *pairs: tuple[str, str]) -> list[tuple[int, str]]:
    """(pair index, content) of each `open(.*?)close` of `pairs`, in text order, non-overlapping.

    The same matches as `re.finditer` of the alternation `o1(.*?)c1|o2(.*?)c2|…` (DOTALL; at any
    position the first pair whose open is there and whose close follows wins), found with
    `str.find` in linear time: an open can match only if a close of its pair starts after it.

    >>> tag_contents("<time>1</time><time_range>2 - 3</time_range><time>", ("<time>", "</time>"), ("<time_range>", "</time_range>"))
    [(0, '1'), (1, '2 - 3')]
    """
    last = [text.rfind(c) for _, c in pairs]
    nxt = [-1] * len(pairs)  # cached next open of each pair at or after pos (-2: none that can match)
    out: list[tuple[int, str]] = []
    pos = 0
    while True:
        best = -1
        for k, (o, _) in enumerate(pairs):
            if nxt[k] == -2:
                continue
            if nxt[k] < pos:
                i = text.find(o, pos)
                nxt[k] = i if 0 <= i and i + len(o) <= last[k] else -2
            i = nxt[k]
            if i >= 0 and (best < 0 or i < nxt[best] or (i == nxt[best] and k < best)):
                best = k
        if best < 0:
            return out
        o, c = pairs[best]
        start = nxt[best] + len(o)
        end = text.find(c, start)
        out.append((best, text[start:end]))
        pos = end + len(c)
