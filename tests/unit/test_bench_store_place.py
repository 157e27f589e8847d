"""bench/run_overhead.py says where a bench's store lives and what creating a file there costs now."""

from __future__ import annotations

from pathlib import Path

from bench.run_overhead import file_creation_us, fs_type, store_place


def test_the_creation_probe_times_new_files_in_a_folder_of_its_own(tmp_path: Path) -> None:
    (tmp_path / "run").mkdir()
    cost = file_creation_us(tmp_path, count=7)
    probes = [entry for entry in tmp_path.iterdir() if entry.name.startswith("creation-probe-")]
    assert len(probes) == 1 and (tmp_path / "run").is_dir()  # nothing else touched
    assert sorted(entry.name for entry in probes[0].iterdir()) == [f"f{index}" for index in range(7)]
    assert 0 < cost < 1e6  # microseconds: more than nothing, less than a second


def test_the_store_place_names_the_file_system_and_the_creation_cost(tmp_path: Path) -> None:
    shown = store_place(tmp_path)
    assert shown.startswith(fs_type(tmp_path) + "; an empty file created there in ")
    assert shown.endswith(" us (median of 50)")
    assert int(shown.split(" created there in ")[1].split()[0]) >= 0
