"""Interactive replay viewer for VideoSeek trajectory files (`videoseek view`).

`runindex` indexes `trajectories.jsonl` by byte offset, `episode` turns one trajectory into what
the page draws, `server` serves the page and its JSON endpoints, `export` writes a self-contained
HTML file, `play` lets a person act as the agent through `VideoSeekEnv`. See docs/viewer.md.
"""
