"""Atomic writes: the target holds the old content or the new one, never a part, and no temporary is left."""

import json

import pandas as pd
import pytest

from qscaling.atomic import atomic_path, write_json, write_table


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temporary(tmp_path):
    target = tmp_path / "out" / "table.json"
    write_json(target, {"a": 1})
    with pytest.raises(RuntimeError, match="mid-write"), atomic_path(target) as tmp:
        tmp.write_text('{"a": ')
        raise RuntimeError("mid-write")
    assert json.loads(target.read_text()) == {"a": 1}
    assert [p.name for p in target.parent.iterdir()] == ["table.json"]


def test_a_directory_is_replaced_whole_and_a_stale_temporary_is_cleared(tmp_path):
    target = tmp_path / "checkpoint"
    stale = tmp_path / ".checkpoint.tmp"
    stale.mkdir()
    (stale / "left-by-a-killed-writer").write_text("x")
    target.mkdir()
    (target / "old").write_text("old")
    with atomic_path(target) as tmp:
        tmp.mkdir()
        (tmp / "new").write_text("new")
    assert sorted(p.name for p in target.iterdir()) == ["new"]
    assert not stale.exists()


def test_json_and_tables_are_written_the_same_way_every_time(tmp_path):
    write_json(tmp_path / "a.json", {"b": 2, "a": 1})
    assert (tmp_path / "a.json").read_text() == '{\n  "a": 1,\n  "b": 2\n}\n'
    frame = pd.DataFrame({"x": [3, 1]}, index=[5, 6])
    write_table(frame, tmp_path / "t.parquet")
    first = (tmp_path / "t.parquet").read_bytes()
    write_table(frame, tmp_path / "t.parquet")
    assert (tmp_path / "t.parquet").read_bytes() == first
    assert pd.read_parquet(tmp_path / "t.parquet").index.tolist() == [0, 1]
