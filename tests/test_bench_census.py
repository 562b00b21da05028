"""bench/codebases.py census: one verdict per finding from every reading given, an adjudication
deciding a finding two readers judged both ways, and the precision over the whole population."""
import json
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "bench"))
codebases = pytest.importorskip("codebases")

NAME = "toy-census-codebase"  # no sample of this name in git history: only the files written here count


def _finding(param, level="medium", verdict=None, reason=""):
    row = {"code": "JG001", "level": level, "path": "pkg/k.py", "line": 3, "kernel": "k", "param": param,
           "arg": param, "at": "pkg/launch.py:9"}
    return dict(row, verdict=verdict, reason=reason) if verdict else row


def _write(path, doc):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))


@pytest.fixture
def results(tmp_path, monkeypatch):
    monkeypatch.setattr(codebases, "RESULTS", tmp_path)
    _write(tmp_path / f"{NAME}.json", {"unannotated_findings": [
        _finding("n"), _finding("m"), _finding("rows", level="high"), _finding("b", level="low")]})
    _write(tmp_path / f"{NAME}_sample.json", {"codebase": NAME, "seed": 7, "commit": "c1", "findings": [
        _finding("n", verdict="false", reason="padded upstream"), _finding("m", verdict="true")]})
    _write(tmp_path / "census" / "census_a.json", {"codebase": NAME, "source": "census", "commit": "c2", "findings": [
        _finding("n", verdict="true", reason="tokens of the step"), _finding("rows", level="high", verdict="true")]})
    _write(tmp_path / "census" / "census_other.json", {"codebase": "another", "source": "census", "commit": "c2",
                                                       "findings": [_finding("m", verdict="false")]})
    return tmp_path


def test_a_finding_judged_both_ways_is_listed_and_takes_the_latest_reading(results):
    store = codebases.collect_verdicts(NAME)
    got = {v["param"]: (v["verdict"], v["source"], v["readers"]) for v in store["verdicts"]}
    assert got == {"n": ("true", "census", 2), "m": ("true", "sample seed 7", 1), "rows": ("true", "census", 1)}
    assert [d["key"][2] for d in store["disagreements"]] == ["n"]
    assert json.loads(codebases.verdicts_path(NAME).read_text()) == store


def test_an_adjudication_decides_a_finding_judged_both_ways(results):
    # named to sort before the census file: the adjudication wins by its source, not by coming last
    _write(results / "census" / "adjudication_n.json", {
        "codebase": NAME, "source": "adjudication", "commit": "c3",
        "findings": [_finding("n", verdict="false", reason="third reading: padded to 16 upstream")]})
    store = codebases.collect_verdicts(NAME)
    n = next(v for v in store["verdicts"] if v["param"] == "n")
    assert (n["verdict"], n["source"], n["readers"]) == ("false", "adjudication", 3)
    assert [d["key"][2] for d in store["disagreements"]] == ["n"]  # still listed: two readers differed
    got = codebases.census_precision(NAME)
    # the population is the default levels only: the low finding "b" is not counted
    assert got["population"] == 3
    assert (got["all"]["judged"], got["all"]["true"], got["all"]["precision"]) == (3, 2, 0.667)
    assert (got["high"]["judged"], got["high"]["true"]) == (1, 1)
    assert (got["medium"]["judged"], got["medium"]["true"]) == (2, 1)


def test_the_findings_no_one_judged_are_left_to_judge(results, capsys):
    _write(results / "summary.json", {"versions": {"jitguard_commit": "c9"}})
    (results / f"{NAME}_sample.json").unlink()
    codebases.census([NAME], [])
    todo = json.loads((results / f"{NAME}_census_todo.json").read_text())
    assert [f["param"] for f in todo["findings"]] == ["m"]  # "n" and "rows" are judged, "b" is low
    assert todo["commit"] == "c9" and todo["findings"][0]["verdict"] is None
    assert "2 of 3 default-level findings judged" in capsys.readouterr().out


def test_a_sample_committed_again_is_one_reading_with_its_latest_verdict(results, monkeypatch):
    first = {"codebase": NAME, "seed": 5, "commit": "c0", "findings": [_finding("m", verdict="true", reason="v1")]}
    other = {"codebase": NAME, "seed": 6, "commit": "c1", "findings": [_finding("m", verdict="false", reason="s6")]}
    again = dict(first, commit="c2", findings=[_finding("m", verdict="false", reason="v2, corrected")])
    monkeypatch.setattr(codebases, "_committed_samples", lambda name: [first, other, again])
    (results / f"{NAME}_sample.json").unlink()
    store = codebases.collect_verdicts(NAME)
    m = next(v for v in store["verdicts"] if v["param"] == "m")
    # seed 5 read once, corrected to false: the two readers agree; the reading kept is the later draw's
    assert (m["verdict"], m["readers"], m["source"]) == ("false", 2, "sample seed 6")
    assert "m" not in [d["key"][2] for d in store["disagreements"]]


def test_a_sample_and_a_census_todo_cite_the_commit_their_findings_came_from(results, capsys):
    # the summary is of another run: the findings file says which code it came from
    _write(results / "summary.json", {"versions": {"jitguard_commit": "c9"}})
    details = json.loads((results / f"{NAME}.json").read_text())
    _write(results / f"{NAME}.json", dict(details, jitguard_commit="c5", jitguard_source_modified=False))
    (results / f"{NAME}_sample.json").unlink()
    codebases.census([NAME], [])
    assert json.loads((results / f"{NAME}_census_todo.json").read_text())["commit"] == "c5"
    codebases.draw_samples([NAME], n=2, seed=11, force=True)
    assert json.loads((results / f"{NAME}_sample.json").read_text())["commit"] == "c5"
    # findings of uncommitted code: no sample is drawn from them
    (results / f"{NAME}_sample.json").unlink()
    _write(results / f"{NAME}.json", dict(details, jitguard_commit="c5", jitguard_source_modified=True))
    codebases.draw_samples([NAME], n=2, seed=11, force=True)
    assert not (results / f"{NAME}_sample.json").exists()
    assert "uncommitted" in capsys.readouterr().err
