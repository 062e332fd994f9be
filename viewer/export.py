"""`videoseek view RUN --export out.html`: one self-contained HTML file for sharing.

The page's own HTML, CSS and JS are inlined, the episodes' view models and list rows are
embedded as JSON, and every frame becomes a small JPEG thumbnail in a `data:` URI, so the file
opens from disk with no server and no network. The page filters, sorts and pages the embedded
rows itself, the same way the server does.
"""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PIL import Image, UnidentifiedImageError
from videoseek.viewer.episode import episode_view
from videoseek.viewer.rewardinfo import explain_reward, find_reward_config
from videoseek.viewer.paths import resolve_inside
from videoseek.viewer.runindex import RunIndex
from videoseek.viewer.server import STATIC_DIR, clean_json

CSS_TAG = '<link rel="stylesheet" href="/static/style.css">'
JS_TAG = '<script src="/static/app.js"></script>'
DATA_MARK = "<!--VIEWER-DATA-->"


@dataclass
class ExportReport:
    path: Path
    episodes: dict[str, int]  # per run: episodes written
    skipped: dict[str, int]  # per run: episodes left out by the limit
    frames: int
    bytes: int


def thumbnail_uri(file: Path, size: int, quality: int) -> str | None:
    """A `data:image/jpeg;base64,...` thumbnail of an image file (longest side `size` px); None if unreadable."""
    try:
        with Image.open(file) as img:
            img = img.convert("RGB")
            img.thumbnail((size, size))
            buf = io.BytesIO()
            img.save(buf, format="JPEG", quality=quality)
    except (OSError, UnidentifiedImageError):
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def embed_json(payload: Any) -> str:
    """JSON that is safe inside a <script> element: every "<" escaped (no `</script>`, no `<!--`)."""
    return json.dumps(clean_json(payload), ensure_ascii=False, allow_nan=False).replace("<", "\\u003c")


def build_page(data: dict[str, Any]) -> str:
    """The static page: index.html with style.css, app.js and `data` inlined."""
    html = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    css = (STATIC_DIR / "style.css").read_text(encoding="utf-8")
    js = (STATIC_DIR / "app.js").read_text(encoding="utf-8")
    for mark in (CSS_TAG, JS_TAG, DATA_MARK):
        if mark not in html:  # the template and this exporter must change together
            raise RuntimeError(f"viewer/static/index.html lost the marker {mark!r}")
    if "</script" in js.lower():
        raise RuntimeError("app.js contains '</script' and cannot be inlined")
    return (
        html.replace(CSS_TAG, f"<style>\n{css}</style>")
        .replace(DATA_MARK, f'<script id="viewer-data" type="application/json">{embed_json(data)}</script>')
        .replace(JS_TAG, f"<script>\n{js}</script>")
    )


def _frame_uri_maker(root: Path, size: int, quality: int, counter: list[int]) -> Callable[[str], str]:
    cache: dict[str, str] = {}

    def url_for(rel: str) -> str:
        if rel not in cache:
            uri = thumbnail_uri(resolve_inside(root, rel), size, quality)
            cache[rel] = uri or ""
            counter[0] += uri is not None
        return cache[rel] or None  # type: ignore[return-value]

    return url_for


def export_runs(run_dirs: list[Path], out: Path, limit: int = 500, thumb: int = 160, quality: int = 70, progress: bool = True) -> ExportReport:
    """Write the static viewer of `run_dirs` (A, and B to compare) to `out`; at most `limit` episodes per run."""
    keys = ["A", "B"][: len(run_dirs)]
    rows_out: dict[str, list[dict[str, Any]]] = {}
    episodes_out: dict[str, dict[int, Any]] = {}
    runs_info, written, skipped = [], {}, {}
    counter = [0]
    todo = []
    for key, run_dir in zip(keys, run_dirs):
        index = RunIndex(run_dir, key)
        index.refresh()
        rows = index.rows()
        runs_info.append({"key": key, "path": str(index.root), "status": index.status, "episodes": len(rows)})
        kept = rows[:limit]
        written[key], skipped[key] = len(kept), len(rows) - len(kept)
        rows_out[key] = [r.public() for r in kept]
        episodes_out[key] = {}
        todo.append((key, index, kept))
    with _progress(sum(len(k) for _, _, k in todo), enabled=progress) as advance:
        for key, index, kept in todo:
            url_for = _frame_uri_maker(index.root, thumb, quality, counter)
            reward_config = find_reward_config(index.root)
            for row in kept:
                raw, problem = index.read(row)
                meta = {"run": key, "index": row.index, "line": row.line}
                if raw is None:
                    episodes_out[key][row.index] = {**meta, "episode_id": row.episode_id, "issues": [problem], "turns": [], "calls": []}
                else:
                    view = episode_view(raw, index.root, url_for, meta)
                    view["reward_explained"] = explain_reward(view.get("reward_components") or {}, view.get("reward"), *reward_config)
                    episodes_out[key][row.index] = view
                advance()
    data = {"runs": runs_info, "compare": len(keys) > 1, "rows": rows_out, "episodes": episodes_out}
    page = build_page(data)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return ExportReport(out, written, skipped, counter[0], len(page.encode("utf-8")))


class _progress:
    """A rich progress bar over episodes, used as a context manager that yields `advance()`."""

    def __init__(self, total: int, enabled: bool) -> None:
        self.total, self.enabled, self._p = total, enabled and total > 0, None

    def __enter__(self) -> Callable[[], None]:
        if not self.enabled:
            return lambda: None
        from rich.progress import Progress

        self._p = Progress(transient=True)
        self._p.start()
        task = self._p.add_task("export", total=self.total)
        return lambda: self._p.update(task, advance=1)

    def __exit__(self, *exc: object) -> None:
        if self._p is not None:
            self._p.stop()
