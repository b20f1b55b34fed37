"""The journal's cache of rendered parts is redrawn when the code that draws them
changes.  Its version was a number bumped by hand; a change to what a level table shows
(the figures its comparison used) left it alone, and `campaign journal` on an upgraded
install served every cached experiment's old table."""

from __future__ import annotations

import shutil
from pathlib import Path

from campaign.journal import index
from campaign.journal.index import JournalIndex, code_version, drawing_code


def test_the_version_follows_the_text_of_the_drawing_code(tmp_path: Path) -> None:
    files = drawing_code()
    names = {f"{f.parent.name}/{f.name}" for f in files}
    # the modules and templates that draw, the view they draw from, the records they read
    assert {
        "journal/experiment_section.py",
        "journal/plots.py",
        "templates/experiment.md.j2",
        "store/view.py",
        "domain/records.py",
    } <= names
    assert code_version(files) == index.VERSION
    copy = tmp_path / "journal"
    (copy / "templates").mkdir(parents=True)
    copied = [
        shutil.copy(f, copy / "templates" if f.suffix == ".j2" else copy)
        for f in files
        if f.parent.name in ("journal", "templates")
    ]
    same = code_version(Path(p) for p in copied)
    assert same == code_version(f for f in files if f.parent.name in ("journal", "templates"))  # not where it lies
    target = copy / "experiment_section.py"
    target.write_text(target.read_text().replace("Stalls the screen left out", "Stalls left out"))
    assert code_version(Path(p) for p in copied) != same
    (copy / "plots.py").unlink()
    assert code_version(Path(p) for p in copied).startswith("unreadable-")


def test_an_index_of_another_version_starts_over(tmp_path: Path, monkeypatch) -> None:
    path = tmp_path / "index.sqlite"
    ix = JournalIndex(path)
    ix.db.execute("INSERT INTO entries (id, key, number, row) VALUES ('e1', 'k', 1, '| row |')")
    ix.db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES ('version', ?)", (f'"{index.VERSION}"',))
    ix.db.execute("COMMIT")
    ix.db.close()
    same = JournalIndex(path)
    assert same.count() == 1  # the same code: the cache is used
    same.close(commit=False)
    monkeypatch.setattr(index, "VERSION", "another-release")
    other = JournalIndex(path)
    assert other.count() == 0  # other code: drawn anew
    other.close(commit=False)
