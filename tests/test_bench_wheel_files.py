"""bench/wheel_files.py: the one unzip of the bench scripts (wanted members only, never outside the
target, atomic replacement, the marker written last)."""
import json
import pathlib
import sys
import zipfile

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
import wheel_files  # noqa: E402


def _wheel(tmp_path, members):
    whl = tmp_path / "pkg-1.0-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w") as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return whl


def test_unpacks_wanted_members_inside_the_target_only(tmp_path):
    whl = _wheel(tmp_path, {"pkg/a.py": "A = 1\n", "pkg/data.txt": "x", "../evil.py": "bad",
                            "/abs.py": "bad", "pkg/../../up.py": "bad"})
    target = tmp_path / "out" / "tree"
    files, marker = wheel_files.unpack(whl, target, lambda n: n.endswith(".py"),
                                       ("M.json", lambda fs: {"n": len(fs)}))
    assert [f["path_in_wheel"] for f in files] == ["pkg/a.py"]
    assert files[0]["sha256"] == wheel_files.sha256_bytes(b"A = 1\n")
    assert sorted(p.relative_to(target).as_posix() for p in target.rglob("*") if p.is_file()) == ["M.json", "pkg/a.py"]
    assert marker == {"n": 1} and json.loads((target / "M.json").read_text()) == {"n": 1}
    assert not (tmp_path / "evil.py").exists() and not (tmp_path / "out" / "up.py").exists()
    assert wheel_files.sha256_file(whl) == wheel_files.sha256_bytes(whl.read_bytes())


def test_a_failed_unpack_leaves_the_old_tree_and_no_temporary_folder(tmp_path):
    whl = _wheel(tmp_path, {"pkg/a.py": "A = 2\n"})
    target = tmp_path / "tree"
    wheel_files.unpack(whl, target, lambda n: True)
    (target / "keep").write_text("old")

    def refuse(files):
        raise SystemExit("no kernel")

    with pytest.raises(SystemExit):
        wheel_files.unpack(whl, target, lambda n: True, ("M.json", refuse))
    assert (target / "keep").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == [whl.name, "tree"]
    wheel_files.unpack(whl, target, lambda n: True)
    assert not (target / "keep").exists() and (target / "pkg" / "a.py").read_text() == "A = 2\n"
