"""The Trainer's input cache: in memory only while the train files are small (memory bounded by design)."""

from __future__ import annotations

from tfxd.trainer_module import data


def test_auto_caches_small_files_only(tmp_path, monkeypatch):
    for index in range(3):
        (tmp_path / f"part-{index}.gz").write_bytes(b"x" * 1000)
    pattern = [str(tmp_path / "part-*.gz")]
    assert data._cache("auto", pattern) is True
    monkeypatch.setattr(data, "MEMORY_CACHE_LIMIT_BYTES", 2500)  # three files of 1000 bytes: over the limit
    assert data._cache("auto", pattern) is False
    assert data._cache(True, pattern) is True and data._cache(False, pattern) is False


def test_the_spec_default_is_auto():
    from tfxd.pipeline.spec.training import Input

    assert Input().cache == "auto" and Input(cache=False).cache is False
