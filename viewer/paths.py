"""Resolve a URL path to a file inside one root folder, refusing anything that could escape it.

The viewer serves frames of a run and its own static files; DESIGN.md requires that it never
serves a path outside the run. The check is done twice, on the text and on the file system:

1. the URL path is percent-decoded exactly once (a double-encoded `%252e%252e` stays a literal
   file name and simply does not exist), then rejected if it holds a NUL, a backslash, a drive
   or absolute prefix, or a `.` / `..` segment;
2. the joined path is resolved (symlinks followed) and must still lie under the resolved root.

Written by hand because the standard library has no such helper: `http.server.SimpleHTTPRequestHandler`
drops `..` segments silently instead of refusing them, and follows symlinks out of its folder.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import unquote


class UnsafePath(ValueError):
    """A requested path that is malformed or would leave the served folder."""


def decode_relative(url_path: str) -> list[str]:
    """Percent-decode `url_path` once and split it into checked segments.

    Raises `UnsafePath` naming the problem for NUL bytes, backslashes, absolute paths, drive
    letters and `.` / `..` segments. Empty segments (`a//b`) are dropped.
    """
    try:
        text = unquote(url_path, errors="strict")
    except UnicodeDecodeError:
        raise UnsafePath("path is not valid UTF-8 after percent-decoding") from None
    if "\x00" in text:
        raise UnsafePath("path contains a NUL byte")
    if "\\" in text:
        raise UnsafePath("path contains a backslash")
    if text.startswith("/") or (len(text) > 1 and text[1] == ":"):
        raise UnsafePath("path is absolute")
    parts = [p for p in text.split("/") if p]
    for part in parts:
        if part in (".", ".."):
            raise UnsafePath(f"path segment {part!r} is not allowed")
    if not parts:
        raise UnsafePath("empty path")
    return parts


def resolve_inside(root: Path, url_path: str) -> Path:
    """The resolved file for `url_path` under `root`; `UnsafePath` if it would leave `root`.

    Existence is not checked here: the caller answers 404 for a missing file and 403 for an
    unsafe one, so the two cases stay distinguishable in tests and logs.
    """
    parts = decode_relative(url_path)
    base = root.resolve()
    target = base.joinpath(*parts).resolve()
    if not target.is_relative_to(base):
        raise UnsafePath("path resolves outside the served folder")
    return target
