"""VideoMMMU as users download it: `videoseek convert --from videommmu VideoMMMU/` on the folder
that ``huggingface-cli download lmms-lab/VideoMMMU --repo-type dataset --local-dir VideoMMMU``
writes, and ids that carry their track.

The fixture folder is laid out as the dataset repository is (huggingface.co/datasets/lmms-lab/VideoMMMU):
one folder per track with its ``test-00000-of-00001.parquet`` (columns ``id``, ``question``,
``options`` (a list of strings), ``answer``, ``question_type``, as its README's dataset_info lists
them), the ``Comprehension_Engineering/`` subset some revisions carry, the README, the
``.cache/huggingface/`` folder ``--local-dir`` leaves, and the discipline folders the video zips
unpack to (``Art/``, ``Science/``), here with tiny synthetic videos. The three tracks ask about the
same videos with the same ids, as the real ones do.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from videos import write_index_video

from videoseek.cli import main
from videoseek.envs.benchmarks import benchmark_module
from videoseek.envs.check_data import check_dataset
from videoseek.envs.convert import ConvertOptions, convert_files
from videoseek.envs.errors import DataError
from videoseek.envs.sample import VideoSample
from videoseek.envs.trajectory import GroupInfo, Observation, Trajectory, Turn

SCHEMA = pa.schema([("id", pa.string()), ("question", pa.string()), ("options", pa.list_(pa.string())),
                    ("answer", pa.string()), ("question_type", pa.string())])  # fmt: skip
ROWS = {
    "Perception": [
        {"id": "validation_Art_1", "question": "Which colour is the sky?", "options": ["red", "blue"], "answer": "B", "question_type": "multiple-choice"},
        {"id": "validation_Math_2", "question": "Which formula is shown?", "options": ["x + y", "x - y"], "answer": "A", "question_type": "multiple-choice"},
    ],
    "Comprehension": [
        {"id": "validation_Art_1", "question": "Why is the sky blue here?", "options": ["dusk", "noon"], "answer": "B", "question_type": "multiple-choice"},
        {"id": "validation_Math_2", "question": "What does the formula give for x=1, y=2?", "options": [], "answer": "3", "question_type": "open"},
    ],
    "Adaptation": [
        {"id": "validation_Art_1", "question": "Paint a sky at noon: which colour?", "options": ["red", "blue"], "answer": "B", "question_type": "multiple-choice"},
        {"id": "validation_Math_2", "question": "Apply the formula to x=2, y=2.", "options": [], "answer": "4", "question_type": "open"},
    ],
}  # fmt: skip
REPLIES = {  # a correct reply to every question but Adaptation's open one
    "validation_Art_1": "<answer>B</answer>",
    "validation_Math_2@perception": "<answer>A</answer>",
    "validation_Math_2@comprehension": "<answer>So the result is 3.</answer>",
    "validation_Math_2@adaptation": "<answer>The result is 5.</answer>",
}


def _parquet(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, schema=SCHEMA), path)


@pytest.fixture(scope="module")
def download(tmp_path_factory) -> Path:
    """A VideoMMMU/ folder as `huggingface-cli download lmms-lab/VideoMMMU --local-dir VideoMMMU` leaves it
    (the discipline zips unpacked in place)."""
    root = tmp_path_factory.mktemp("hf") / "VideoMMMU"
    for track, rows in ROWS.items():
        _parquet(root / track / "test-00000-of-00001.parquet", rows)
    _parquet(root / "Comprehension_Engineering" / "test-00000-of-00001.parquet", ROWS["Comprehension"][:1])  # not a track
    (root / "README.md").write_text("---\ndataset_info:\n- config_name: Adaptation\n---\n")
    (root / ".gitattributes").write_text("*.parquet filter=lfs diff=lfs merge=lfs -text\n")
    cache = root / ".cache" / "huggingface" / "download" / "Perception"
    cache.mkdir(parents=True)
    (cache / "test-00000-of-00001.parquet.metadata").write_text("0f20417\n")
    write_index_video(root / "Art" / "validation_Art_1.mp4", num_frames=20, fps=10, width=64, height=32)
    write_index_video(root / "Science" / "validation_Math_2.MP4", num_frames=20, fps=10, width=64, height=32)  # utils.py's .MP4 fallback
    return root


def _episode(sample: VideoSample, text: str) -> Trajectory:
    answer = text.removeprefix("<answer>").removesuffix("</answer>")
    return Trajectory(
        episode_id=f"{sample.id}/g0", sample_id=sample.id, group=GroupInfo(id=sample.id, index=0, role="origin"),
        question=sample.question, options=sample.options, answer=sample.answer, problem_type=sample.problem_type.value,
        duration=2.0, video=sample.video, initial=Observation(text=""),
        turns=[Turn(index=0, assistant=text, action={"type": "answer", "text": answer}, observation=Observation(text=""), evidence={})],
        prediction=answer, terminated=True,
    )  # fmt: skip


def _reply(sample: VideoSample) -> str:
    bench = sample.metadata["benchmark"]
    return REPLIES.get(f"{bench['id']}@{bench['track']}") or REPLIES[bench["id"]]


def test_the_downloaded_folder_converts_with_every_track(download, tmp_path, capsys):
    out = tmp_path / "videommmu.jsonl"
    assert main(["convert", "--from", "videommmu", str(download), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "wrote 6 samples" in printed and "renamed duplicate ids: 0" in printed
    samples = VideoSample.from_jsonl(out)
    assert [s.id for s in samples] == [f"{qid}@{track}" for track in ("perception", "comprehension", "adaptation")
                                       for qid in ("validation_Art_1", "validation_Math_2")]  # fmt: skip
    by_id = {s.id: s for s in samples}
    # the videos are found under the dataset folder by default, the .MP4 one included
    assert Path(by_id["validation_Art_1@adaptation"].video) == download / "Art" / "validation_Art_1.mp4"
    assert Path(by_id["validation_Math_2@perception"].video) == download / "Science" / "validation_Math_2.MP4"
    assert {s.metadata["benchmark"]["id"] for s in samples} == {"validation_Art_1", "validation_Math_2"}  # lmms-eval's ids
    assert by_id["validation_Math_2@comprehension"].problem_type.value == "free_form"
    assert by_id["validation_Art_1@adaptation"].question.startswith("You should watch and learn the video content.")
    result = check_dataset(out)  # every video opens
    assert result.errors == [] and len(result.samples) == 6


def test_tracks_converted_one_by_one_join_without_duplicate_ids(download, tmp_path):
    joined = tmp_path / "joined.jsonl"
    parts = []
    for track in ROWS:  # a track folder, and a track's parquet file, are inputs too
        for source in (download / track, download / track / "test-00000-of-00001.parquet"):
            result = convert_files([source], "videommmu", ConvertOptions(), strict=True)
            assert result.renamed_ids == 0 and len(result.samples) == 2
        parts.append("".join(s.model_dump_json() + "\n" for s in result.samples))
    joined.write_text("".join(parts))
    samples = VideoSample.from_jsonl(joined)  # raises on a repeated id
    assert len({s.id for s in samples}) == 6
    assert Path(samples[0].video).parent.parent == download  # a track file's videos: under the dataset folder too
    assert check_dataset(joined).errors == []


def test_the_scorer_groups_by_track_and_reads_ids_without_a_track(download):
    vm = benchmark_module("videommmu")
    samples = convert_files([download], "videommmu", ConvertOptions(), strict=True).samples
    metrics = vm.benchmark_metrics([_episode(s, _reply(s)) for s in samples], {s.id: s for s in samples})
    assert list(metrics["tracks"]) == ["perception", "comprehension", "adaptation"]
    overall = {t: r["results"]["Overall"] for t, r in metrics["tracks"].items()}
    assert overall == {"perception": {"num": 2, "acc": 100.0}, "comprehension": {"num": 2, "acc": 100.0}, "adaptation": {"num": 2, "acc": 50.0}}
    # samples converted before the track was in the id: the scorer reads metadata.benchmark, so the same numbers
    # (one track at a time, as those files were: their ids repeat across tracks)
    for track in vm.TRACKS:
        old = [s.model_copy(update={"id": vm.split_sample_id(s.id)[0]}) for s in samples if s.metadata["benchmark"]["track"] == track]
        assert [vm.split_sample_id(s.id) for s in old] == [(s.id, None) for s in old]
        old_metrics = vm.benchmark_metrics([_episode(s, _reply(s)) for s in old], {s.id: s for s in old})
        assert old_metrics["tracks"] == {track: metrics["tracks"][track]}
    assert vm.split_sample_id("validation_Art_1@adaptation") == ("validation_Art_1", "adaptation")


def test_a_folder_without_tracks_is_one_line(tmp_path, capsys):
    (tmp_path / "Art").mkdir()
    assert main(["convert", "--from", "videommmu", str(tmp_path), "--out", str(tmp_path / "o.jsonl")]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bar: one line
    assert error.startswith(f"videoseek convert: error: {tmp_path}: no VideoMMMU track files")
    assert error.endswith("as `huggingface-cli download lmms-lab/VideoMMMU` lays them out")
    with pytest.raises(DataError, match="cannot tell the VideoMMMU track"):
        convert_files([_write_jsonl(tmp_path / "rows.jsonl")], "videommmu", ConvertOptions())


def _write_jsonl(path: Path) -> Path:
    path.write_text(json.dumps(ROWS["Perception"][0]) + "\n")
    return path
