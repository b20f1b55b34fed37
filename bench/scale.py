"""A week-long campaign stays fast: time the journal, `show`, `status` at N experiments.

For each N a campaign is built through the Store API (`bench/scale_build.py`: 2
workloads x 8 levels x 2 sides x 3 rounds per experiment, a mix of verdicts), then
every figure is one fresh process, as a person or the loop would run it:

- render full: `publish_journal` into an empty directory (the previous run's journal is
  removed before the clock starts), read as `campaign journal` reads (the plain-sqlite3
  `campaign.store.reader`), with and without plots;
- update: the per-verdict update after one more experiment (imports warm, journal
  present, plot workers running, as in the loop's render node), until the Markdown is
  written and until its plots (the experiment's and the overview) are on disk; the
  median of 5 verdicts in a row;
- show: `campaign show ID --json` twice: the first builds and stores every piece (a
  campaign built outside the loop), the second reads them, as after the loop's
  per-verdict refresh (timed with the update); then `campaign show ID`, the table a
  person reads; status: `campaign status`;
- loop: the process CPU seconds of one more experiment through the loop's own nodes
  (propose .. record, `bench/scale_loop.py`), the median of 8: flat in N when nothing
  the loop does per experiment reads the whole campaign;
- DB size per experiment, journal size and file count, the peak memory of each
  command's whole process tree (plot workers included), sampled every 50 ms;
- a CPU reference (a fixed pure-Python loop), since the same bench on two machines of
  the same kind gave times 2x apart.

    PYTHONPATH=. python bench/scale.py [--n 100 1000 3000] [--dir /tmp/campaign-scale] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from campaign.store import Store

LOOP_EXPERIMENTS = 8  # hypotheses timed through the loop's nodes (`scale_loop`), after one that warms up
UPDATES = 5  # verdicts timed one after another (a single one is at the mercy of the machine)
ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *([env["PYTHONPATH"]] if env.get("PYTHONPATH") else [])])
    return env


CPU: dict[str, float] = {}  # the last child's CPU seconds (user + system, its own waited children too)


def _tree_rss_bytes(root: int) -> int:
    """Resident bytes of `root` and every process below it (plot workers, servers), now."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            parents[int(stat.parent.name)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, grew = {root}, True
    while grew:
        below = {pid for pid, ppid in parents.items() if ppid in tree} - tree
        tree |= below
        grew = bool(below)
    page = os.sysconf("SC_PAGE_SIZE")
    total = 0
    for pid in tree:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
    return total


class _TreePeak(threading.Thread):
    """The peak of the whole process tree's resident memory, sampled every 50 ms (the
    child's own peak RSS misses its plot workers and servers, which run beside it)."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):
            self.peak = max(self.peak, _tree_rss_bytes(self.pid))


def run_measured(cmd: list[str]) -> tuple[float, float, str]:
    """Wall seconds, peak memory of its process tree (MB) and stdout's last line of one
    child process; its CPU seconds in CPU["last"] (a shared machine's load inflates wall
    time, much less CPU time)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        t0 = time.perf_counter()
        p = subprocess.Popen(cmd, stdout=out, stderr=err, env=_env(), cwd=ROOT)
        sampler = _TreePeak(p.pid)
        sampler.start()
        _, status, usage = os.wait4(p.pid, 0)
        sampler.done.set()
        sampler.join()
        wall = time.perf_counter() - t0
        CPU["last"] = usage.ru_utime + usage.ru_stime
        p.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if p.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({p.returncode}): {err.read().decode()[-2000:]}")
        lines = out.read().decode().strip().splitlines()
    return wall, max(usage.ru_maxrss * 1024, sampler.peak) / 2**20, lines[-1] if lines else ""


def _dir_size(path: Path) -> tuple[int, int]:
    """Bytes and files under `path`, without what the bench moved aside (`TRASH`)."""
    files = (
        [p for p in path.rglob("*") if p.is_file() and TRASH not in p.relative_to(path).parts] if path.exists() else []
    )
    return sum(p.stat().st_size for p in files), len(files)


# ------------------------------------------------------------------ child operations
def op_build(db: str, n: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from scale_build import build

    print(build(Path(db), n))


def op_render(db: str, cid: str, journal: str, plots: bool) -> None:
    """As `campaign journal` reads: the plain-sqlite3 reader (no sqlmodel import)."""
    from campaign.journal.publish import publish_journal
    from campaign.store.reader import open_reader

    _clear(Path(journal))
    reader = open_reader(Path(db))
    assert reader is not None, f"{db}: not a current database"
    with reader:
        publish_journal(reader, cid, Path(journal), db_label="campaign.db", **({} if plots else {"plots": False}))
        _wait_plots()


TRASH = ".trash"  # beside a bench directory: what the bench removes, deleted when it ends


def _discard(path: Path) -> None:
    """Move `path` aside, to be deleted when the bench ends.  Why not delete now: ext4
    skips inodes freed in the last minutes when it allocates new ones, and each skip
    reads an inode table block (`recently_deleted` in perf: a full render right after
    deleting the last one's 2,000 files spent up to 0.8 s more creating its pages).
    A person renders into a directory that has not just lost thousands of files."""
    trash = path.parent / TRASH
    trash.mkdir(exist_ok=True)
    path.rename(trash / f"{path.name}.{time.time_ns()}")


def _clear(target: Path) -> None:
    """Move a journal, its pages and its plots aside (`_discard`)."""
    for p in target.parent.glob(f"{target.stem}*"):
        _discard(p)


def _empty_trash(*dirs: Path) -> None:
    for d in dirs:
        shutil.rmtree(d / TRASH, ignore_errors=True)


def _wait_plots() -> float:
    """Seconds until the plot worker is idle (0 when the renderer draws inline)."""
    t0 = time.perf_counter()
    try:
        from campaign.journal.plot_worker import wait_idle
    except ImportError:
        return 0.0
    wait_idle()
    return time.perf_counter() - t0


def _warm_plot_workers(store: Store, cid: str, where: Path) -> None:
    """Draw plots on every worker into scratch files, so the timed update does not pay for
    starting the pool and importing matplotlib (a campaign pays that once)."""
    from campaign.journal import plot_worker
    from campaign.journal.format import plot_workloads

    view = store.view(cid)
    exp = next(e for e in reversed(view.experiments) if plot_workloads(e))
    count = 4 * plot_worker._workers()  # the pool hands them out as workers free up: every one draws some
    for i in range(count):
        plot_worker.submit("experiment", (exp, plot_workloads(exp)), where / f"warm-{i}.png")
    plot_worker.wait_idle()
    for i in range(count):
        (where / f"warm-{i}.png").unlink(missing_ok=True)


def op_update(db: str, cid: str, journal: str, n: int, plots: bool = True) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    import random

    from scale_build import add_experiment

    import campaign.verdict.rule  # noqa: F401 - the loop has decided verdicts: imported already
    from campaign.journal.publish import publish_journal
    from campaign.journal.render import _template
    from campaign.store import Store

    _template("experiment.md.j2")  # ...and rendered sections before
    with Store(db) as store:
        publish_journal(store, cid, Path(journal), db_label="campaign.db", plots=plots)  # the previous verdict's update
        _wait_plots()
        if plots:  # the loop's plot workers are running (started by its first verdict): start them here too
            _warm_plot_workers(store, cid, Path(journal).parent)
        camp = store.get_campaign(cid)
        fp = store.snapshot(cid).latest_fingerprint_id if n <= 1000 else None
        if fp is None:
            from scale_build import FP

            from campaign.store.convert import fingerprint_id

            fp = fingerprint_id(FP)
        samples: dict[str, list[float]] = {
            k: [] for k in ("update_s", "update_cpu_s", "update_with_plot_s", "show_refresh_s", "show_refresh_cpu_s")
        }
        for k in range(UPDATES):  # one verdict after another; the median of each figure
            add_experiment(store, cid, random.Random(n + k), n + 1 + k, fp, camp.baseline_experiment_id or "")
            t0, c0 = time.perf_counter(), time.process_time()
            publish_journal(
                store, cid, Path(journal), db_label="campaign.db", plots=plots, verify=False
            )  # as the loop does
            written, cpu = time.perf_counter() - t0, time.process_time() - c0
            samples["update_with_plot_s"].append(written + _wait_plots())
            samples["update_s"].append(written)
            samples["update_cpu_s"].append(cpu)
            t0, c0 = time.perf_counter(), time.process_time()
            store.refresh_show_cache(cid)  # the loop's render node stores the new `show --json` pieces
            samples["show_refresh_s"].append(time.perf_counter() - t0)
            samples["show_refresh_cpu_s"].append(time.process_time() - c0)
    print(json.dumps({k: round(statistics.median(v), 3) for k, v in samples.items()}))


def op_loop(db: str, cid: str, k: int) -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    from scale_loop import loop_cpu

    print(json.dumps(loop_cpu(Path(db), cid, k)))


# ------------------------------------------------------------------ the table
def cpu_reference() -> float:
    """Seconds for 10 million additions in a pure-Python loop, the best of 3: how fast this
    machine runs the interpreter, so tables from different machines can be compared (two
    2-core machines of the same kind differed by 2x)."""
    best = float("inf")
    for _ in range(3):
        t0, total = time.perf_counter(), 0
        for i in range(10_000_000):
            total += i
        best = min(best, time.perf_counter() - t0)
    return round(best, 2)


def measure(n: int, base: Path, plots: bool = True, prebuilt: Path | None = None) -> dict[str, float | int]:
    work = base / f"n{n}"
    if work.exists():
        _discard(work)
    work.mkdir(parents=True)
    db, journal = work / "campaign.db", work / "journal" / "scale.md"
    py = [sys.executable, str(Path(__file__).resolve())]
    cli = [sys.executable, "-m", "campaign.cli.entry"]  # the console script's path
    row: dict[str, float | int] = {"n": n}
    row["load_avg"] = round(os.getloadavg()[0], 1)
    row["cpu_ref_s"] = cpu_reference()
    rss_all: list[float] = []
    if prebuilt is not None and (prebuilt / f"n{n}.db").is_file():  # the same build, made before (deterministic)
        shutil.copyfile(prebuilt / f"n{n}.db", db)
        cid = f"scale-{n}"
        subprocess.run([*py, "_migrate", str(db)], check=True)  # an older build's schema, as `campaign` would
    else:
        wall, rss, cid = run_measured([*py, "_build", str(db), str(n)])
        row["build_s"] = round(wall, 1)
        rss_all.append(rss)
    row["db_mb"] = round(db.stat().st_size / 1e6, 2)
    row["db_kb_per_exp"] = round(db.stat().st_size / 1e3 / n, 1)
    _clear(journal)  # not timed: a render into a new directory deletes nothing
    wall, rss, _ = run_measured([*py, "_render", str(db), cid, str(journal), "0"])
    row["render_noplots_s"], row["render_noplots_rss_mb"] = round(wall, 2), round(rss)
    row["render_noplots_cpu_s"] = round(CPU["last"], 2)
    rss_all.append(rss)
    if plots:
        _clear(journal)
        wall, rss, _ = run_measured([*py, "_render", str(db), cid, str(journal), "1"])
        row["render_plots_s"], row["render_plots_rss_mb"] = round(wall, 2), round(rss)
        row["render_plots_cpu_s"] = round(CPU["last"], 2)
        rss_all.append(rss)
    size, files = _dir_size(journal.parent)
    row["journal_mb"], row["journal_files"] = round(size / 1e6, 2), files
    row["main_kb"] = round(journal.stat().st_size / 1e3, 1)
    wall, rss, _ = run_measured([*cli, "show", cid, "--json", "--db", str(db)])  # builds and stores every piece
    row["show_first_s"], row["show_first_cpu_s"] = round(wall, 2), round(CPU["last"], 2)
    rss_all.append(rss)
    wall, rss, _ = run_measured([*cli, "show", cid, "--json", "--db", str(db)])  # as after the loop's refresh
    row["show_json_s"], row["show_rss_mb"] = round(wall, 2), round(rss)
    row["show_json_cpu_s"] = round(CPU["last"], 2)
    rss_all.append(rss)
    wall, rss, _ = run_measured([*cli, "show", cid, "--db", str(db)])  # the table a person reads
    row["show_s"], row["show_cpu_s"] = round(wall, 2), round(CPU["last"], 2)
    rss_all.append(rss)
    wall, rss, _ = run_measured([*cli, "status", "--db", str(db)])
    row["status_s"], row["status_rss_mb"] = round(wall, 2), round(rss)
    row["status_cpu_s"] = round(CPU["last"], 2)
    rss_all.append(rss)
    wall, rss, last = run_measured([*py, "_update", str(db), cid, str(journal), str(n), "1" if plots else "0"])
    row.update(json.loads(last))
    rss_all.append(rss)
    wall, rss, last = run_measured([*py, "_loop", str(db), cid, str(LOOP_EXPERIMENTS)])
    row.update(json.loads(last))
    rss_all.append(rss)
    row["peak_rss_mb"] = round(max(rss_all))
    return row


COLUMNS = [
    ("n", "N"),
    ("loop_cpu_s", "loop CPU s per experiment"),
    ("loop_cpu_max_s", "its max"),
    ("show_s", "show (s)"),
    ("show_cpu_s", "its CPU s"),
    ("render_plots_s", "full render, plots (s)"),
    ("render_plots_cpu_s", "its CPU s"),
    ("render_noplots_s", "full render, no plots (s)"),
    ("render_noplots_cpu_s", "its CPU s"),
    ("update_s", "per-verdict update (s)"),
    ("update_cpu_s", "its CPU s"),
    ("update_with_plot_s", "update + its plot (s)"),
    ("show_refresh_s", "+ show pieces (s)"),
    ("show_first_s", "first show --json (s)"),
    ("show_json_s", "show --json (s)"),
    ("show_json_cpu_s", "its CPU s"),
    ("status_s", "status (s)"),
    ("status_cpu_s", "its CPU s"),
    ("db_kb_per_exp", "DB KB/exp"),
    ("db_mb", "DB MB"),
    ("journal_mb", "journal MB"),
    ("journal_files", "journal files"),
    ("main_kb", "main file KB"),
    ("peak_rss_mb", "peak MB, process tree"),
    ("load_avg", "load avg"),
    ("cpu_ref_s", "CPU reference (s)"),
]


def table(rows: list[dict[str, float | int]]) -> str:
    lines = ["| " + " | ".join(h for _, h in COLUMNS) + " |", "|" + "|".join("---:" for _ in COLUMNS) + "|"]
    lines += [
        "| "
        + " | ".join(f"{r.get(k, '-'):,}" if isinstance(r.get(k), int) else str(r.get(k, "-")) for k, _ in COLUMNS)
        + " |"
        for r in rows
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] == "_build":
        op_build(args[1], int(args[2]))
        return 0
    if args and args[0] == "_migrate":  # opening a Store brings an older build to the current schema
        from campaign.store import Store

        Store(Path(args[1])).close()
        return 0
    if args and args[0] == "_render":
        op_render(args[1], args[2], args[3], args[4] == "1")
        return 0
    if args and args[0] == "_loop":
        op_loop(args[1], args[2], int(args[3]))
        return 0
    if args and args[0] == "_update":
        op_update(args[1], args[2], args[3], int(args[4]), plots=len(args) < 6 or args[5] == "1")
        return 0
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, nargs="+", default=[100, 1000, 3000])
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "campaign-scale"))
    ap.add_argument("--json", help="also write the rows here")
    ap.add_argument("--skip-plots", action="store_true", help="no full render with plots (about 0.03 CPU s a figure)")
    ap.add_argument("--prebuilt", type=Path, help="copy DIR/n<N>.db (an earlier `_build` of N) instead of building")
    ns = ap.parse_args(args)
    rows = []
    try:
        for n in ns.n:
            rows.append(measure(n, Path(ns.dir), plots=not ns.skip_plots, prebuilt=ns.prebuilt))
            print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    finally:
        _empty_trash(Path(ns.dir), *(Path(ns.dir) / f"n{n}" / "journal" for n in ns.n))
    print(table(rows))
    if ns.json:
        Path(ns.json).write_text(json.dumps(rows, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
