"""Kill a campaign anywhere, resume it, and prove nothing was lost or left running.

Each trial runs a small campaign in its own directory (simulated node, four ideas: a
crash at start, one incompatible with CUDA graphs, two ordinary ones measured in
interleaved adaptive rounds, repeats min 2 max 3; a review gate after 2 ideas without
a win, so two gates), `campaign run` then `campaign resume ID --approve` until it
finishes, and stops one controller process of it once:
- external moments, timed by watching the process tree, the database and the journal
  directory: a random delay, while a server starts, mid-sweep, right after an
  experiment is recorded, while the journal is written, SIGTERM and SIGINT (a clean
  stop: exit 130, a resume hint, no server left), a random moment of a resume after a
  review gate;
- exact windows through the kill-point hook (`campaign.domain.killpoint`), picked from
  the points an uninterrupted calibration campaign passed: after any node's store
  writes (`<node>:after`), after its saved writes before the step's checkpoint
  (`<node>:writes`), between a server's spawn and its pid in the ledger
  (`launch:spawned`), between "finished" in the record and the journal render
  (`finish:*`), and in the review gate's resume (`review:*`).
A kill counts as landed only when the process died of it (SIGKILL status, or 130 for
TERM/INT) before it ended by itself.

Checks per trial: the campaign finished; every hypothesis has exactly one finished
experiment with a verdict; no run recorded twice; the review gates the verdicts call
for all happened (the no-win streak replayed from the record); no finished round was
marked stale and measured again; the journal names every hypothesis, says finished,
and its notes blocks parse; no temp file is left; after each kill no server runs that
the ledger knows neither by pid nor by launch token; at the end the ledger is empty
and no process of the trial is alive.

    python bench/kill_anywhere.py --trials 48 --workers 4 [--seed 1] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kill_watch import (
    REVIEW_AFTER,
    TAG_ENV,
    Watch,
    finished_experiments,
    ledger_live,
    record_facts,
    tagged_processes,
    unledgered_servers,
    wait_gone,
)
from campaign.domain.killpoint import KILL_ENV, TRACE_ENV

ROOT = Path(__file__).resolve().parents[1]
MOMENTS = (
    "random",
    "server_start",
    "mid_sweep",
    "after_record",
    "journal_write",
    "sigterm",
    "sigint",
    "launch",
    "window",
    "finish",
    "review_gate",
    "resume_random",
)
HYPOTHESES = [
    {
        "name": "smaller-cuda-graph",
        "rationale": "may win: adopted if it does",
        "flags": {"cuda-graph-max-bs": 128},
        "adopt_if_win": True,
    },
    {"name": "torch-symm-mem", "rationale": "crashes at start on SM120", "flags": {"enable-torch-symm-mem": True}},
    {"name": "nccl-tree", "rationale": "ordinary", "env": {"NCCL_ALGO": "Tree"}},
    {"name": "custom-allreduce", "rationale": "ordinary", "flags": {"enable-custom-all-reduce": True}},
]


def write_playbook(
    trial_dir: Path,
    hypotheses: list[dict] | None = None,
    time_scale: float = 400,
    review_after: int | None = REVIEW_AFTER,
) -> Path:
    import yaml

    data = {
        "name": "kill-anywhere",
        "journal": str(trial_dir / "journal" / "kill.md"),
        "database": str(trial_dir / "state" / "campaign.db"),
        "node": {
            "kind": "simulated",
            "profile": "rtx6000bw-pcie-8x",
            "cuda": "12.8",
            "seed": 5,
            "time_scale": time_scale,
            "noise_pct": 1.0,
        },
        "server": {
            "engine": "simulated",
            "model": "sim-model",
            "startup_timeout_s": 120,
            "command": "{python} -m tools.simnode --host {host} --port {port} --profile {profile} "
            "--cuda {cuda} --seed {seed} --time-scale {time_scale} --noise-pct {noise_pct} "
            "--model-path {model} --tp 8 --stream-interval 8 {flags}",
        },
        "baseline": {"flags": {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}},
        "workloads": {
            "single_stream": {
                "concurrency": [1],
                "prompts": "fixed",
                "output_tokens": 16,
                "requests_per_level": 2,
                "warmup_requests": 0,
            },
            "parallel": {
                "concurrency": [4],
                "prompts": "diverse",
                "output_tokens": 16,
                "requests_per_level": "C",
                "warmup_requests": 0,
            },
        },
        # interleaved adaptive rounds (C B C B, a third round while a level straddles a band
        # edge) and a review gate after every 2 ideas without a win: two gates in a run
        "verdict": {
            "min_effect_pct": 3,
            "repeats": {"min": 2, "max": 3},
            "interleave": True,
            "correctness": {"prompts": 2, "max_tokens": 8},
        },
        "review": {"after_no_win_streak": review_after, "before_patch": False},
        "hypotheses": hypotheses or HYPOTHESES,
    }
    path = trial_dir / "playbook.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Trial:
    index: int
    moment: str
    target: str = ""  # what the kill aimed at: the k-th server/record/journal write, a kill point, a delay
    process: int = 0  # which controller process of the trial (0 = run, 1.. = resumes) was killed
    hit: bool = False  # the kill landed: the process was stopped by it before it ended by itself
    killed_at_s: float = 0.0
    orphans: int = 0  # servers alive right after the kill (the resume must reap them)
    unledgered: int = 0  # of those, servers the ledger knows neither by pid nor by launch token
    resumes: int = 0
    reviews: int = 0  # review gates the record holds at the end
    stale: int = 0  # attempts marked stale by a resume
    redone_rounds: int = 0  # stale attempts that held a complete round (finished work measured again)
    temp_files: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def trial_env(trial_dir: Path) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), TAG_ENV: str(trial_dir), "NO_COLOR": "1", "COLUMNS": "160"}
    for name in (KILL_ENV, TRACE_ENV):
        env.pop(name, None)
    return env


def plan_kill(t: Trial, rng: random.Random, calib: dict) -> None:
    """Pick the process and the point (kill-point moments) or the delay of the kill."""
    points: list[tuple[int, str]] = calib["points"]  # (process, "name#k") of the calibration run
    if t.moment in ("window", "launch", "finish", "review_gate"):
        want = {
            "launch": ("launch:spawned",),
            "finish": ("finish:marked", "finish:after", "finish:writes"),
            "review_gate": ("review:after", "review:writes"),
        }.get(t.moment)
        names = sorted({pt.split("#")[0] for _p, pt in points if not pt.startswith("__")})
        names = [n for n in names if want is None or n in want] or names
        name = rng.choice(names)
        t.process, t.target = rng.choice([(p, pt) for p, pt in points if pt.split("#")[0] == name])
    elif t.moment == "resume_random":  # a random moment of a resume after a review gate
        t.process = rng.randint(1, max(1, calib["processes"] - 1))
        t.target = f"{rng.uniform(0.5, max(1.0, calib['process_seconds'][t.process] * 0.9)):.2f}s"


def run_trial(index: int, moment: str, seed: int, base: Path, calib: dict, timeout_s: float = 2400) -> Trial:
    rng = random.Random(seed)
    t = Trial(index, moment)
    trial_dir = base / f"t{index:03d}-{moment}"
    trial_dir.mkdir(parents=True)
    pb = write_playbook(trial_dir)
    db = trial_dir / "state" / "campaign.db"
    env = trial_env(trial_dir)
    plan_kill(t, rng, calib)
    t0 = time.monotonic()
    for proc_index in range(12):
        cid = _campaign_id(db)
        args = ["resume", cid, "--db", str(db), "--approve", "-q"] if cid else ["run", str(pb), "--db", str(db), "-q"]
        aimed = not t.hit and proc_index == t.process
        penv = {**env, KILL_ENV: t.target} if aimed and ":" in t.target else env
        # output to a file, not a pipe: a process that outlives the controller must not hang the trial
        log = open(trial_dir / f"process-{proc_index}.out", "w+", encoding="utf-8")  # noqa: SIM115
        proc = subprocess.Popen(
            [sys.executable, "-m", "campaign.cli.main", *args],
            cwd=trial_dir,
            env=penv,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if proc_index:
            t.resumes += 1
        sig = {"sigterm": signal.SIGTERM, "sigint": signal.SIGINT}.get(moment, signal.SIGKILL)
        try:
            if aimed and ":" not in t.target:  # an external kill, timed by watching the process
                sent, target = _wait_for_moment(
                    Watch(proc.pid, db, trial_dir / "journal"), proc, moment, rng, calib, t.target
                )
                t.target = t.target or target
                if sent:
                    t.killed_at_s = round(time.monotonic() - t0, 2)
                    proc.send_signal(sig)
            proc.wait(timeout=max(5.0, t0 + timeout_s - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            t.problems.append(f"process {proc_index} ({args[0]}) did not end in time")
            break
        finally:
            log.seek(0)
            out = log.read()
            log.close()
        rc = proc.returncode
        if aimed and rc == (-signal.SIGKILL if sig == signal.SIGKILL else 130):
            t.hit = True  # stopped by our signal, not ended by itself first
            t.killed_at_s = t.killed_at_s or round(time.monotonic() - t0, 2)
            if sig != signal.SIGKILL:
                _check_clean_stop(t, rc, out or "", trial_dir)
            stray = wait_gone(trial_dir, timeout_s=10, no_servers=True)  # servers wait for the reaper
            if stray:
                t.problems.append(f"{len(stray)} non-server process(es) outlived the killed controller: {stray[:2]}")
            t.orphans = len(tagged_processes(trial_dir, servers_only=True))
            t.unledgered = len(unledgered_servers(trial_dir, trial_dir / "state" / "ledger.jsonl"))
            if t.unledgered:
                t.problems.append(f"{t.unledgered} server(s) running that the ledger does not know")
            continue
        if "Traceback" in (out or ""):
            t.problems.append(f"process {proc_index}: traceback: {out[-400:]!r}")
            break
        if rc == 0 or (rc == 2 and "is finished" in out):
            break
        if rc not in (3, -signal.SIGKILL, 130):
            t.problems.append(f"process {proc_index}: exit {rc}: {out.strip()[-300:]!r}")
            break
    else:
        t.problems.append("still not finished after 12 processes")
    _check_final(t, trial_dir, db, calib)
    t.seconds = round(time.monotonic() - t0, 1)
    return t


def _wait_for_moment(
    watch: Watch, proc: subprocess.Popen, moment: str, rng: random.Random, calib: dict, planned: str
) -> tuple[bool, str]:
    if moment in ("random", "resume_random"):
        delay = float(planned[:-1]) if planned else rng.uniform(0.5, max(1.0, calib["process_seconds"][0] * 0.9))
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False, f"{delay:.2f}s"
            time.sleep(0.01)
        return proc.poll() is None, f"{delay:.2f}s"
    if moment in ("server_start", "mid_sweep", "sigterm", "sigint"):
        k = rng.randint(1, max(1, calib["servers"]))
        if not watch.until(lambda: watch.server_count() >= k, proc):
            return False, f"server {k}"
        if moment == "server_start":
            return True, f"server {k}"
        if not watch.until(lambda: watch.newest_server_serving(), proc):
            return False, f"server {k}"
        time.sleep(rng.uniform(0.02, 0.25))
        return proc.poll() is None, f"server {k}"
    if moment == "after_record":
        k = rng.randint(1, max(1, calib["records"]))
        return watch.until(lambda: watch.records() >= k, proc, interval=0.003), f"record {k}"
    if moment == "journal_write":
        k = rng.randint(1, max(1, calib["journal_writes"]))
        return watch.until(lambda: watch.journal_writes() >= k, proc, interval=0.002), f"journal write {k}"
    raise ValueError(moment)


def _check_clean_stop(t: Trial, rc: int | None, out: str, trial_dir: Path) -> None:
    if rc != 130:
        t.problems.append(f"{t.moment}: exit status {rc}, expected 130")
    if "campaign resume" not in out:
        t.problems.append(f"{t.moment}: no resume hint in the output: {out[-200:]!r}")
    if "Traceback" in out:
        t.problems.append(f"{t.moment}: traceback in the output")
    left = wait_gone(trial_dir, timeout_s=5)
    if left:
        t.problems.append(f"{t.moment}: {len(left)} server process(es) still alive after the clean stop")


def _campaign_id(db: Path) -> str | None:
    import sqlite3

    if not db.exists():
        return None
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10)
    try:
        row = con.execute("SELECT id FROM campaigns ORDER BY created_at LIMIT 1").fetchone()
    except sqlite3.Error:
        return None
    finally:
        con.close()
    return row[0] if row else None


def _check_final(t: Trial, trial_dir: Path, db: Path, calib: dict) -> None:
    from campaign.journal.render import parse_notes

    names = [h["name"] for h in HYPOTHESES]
    for problem in finished_experiments(db, names):
        t.problems.append(problem)
    facts = (
        record_facts(db) if db.exists() else {"reviews": -1, "expected_reviews": -2, "stale": -1, "redone_rounds": -1}
    )
    t.reviews, t.stale, t.redone_rounds = facts["reviews"], facts["stale"], facts["redone_rounds"]
    if t.reviews != facts["expected_reviews"]:
        t.problems.append(
            f"{t.reviews} review gates where the verdicts call for {facts['expected_reviews']} "
            "(the no-win streak drifted)"
        )
    if t.redone_rounds:
        t.problems.append(f"{t.redone_rounds} finished round(s) marked stale and measured again")
    journal = trial_dir / "journal" / "kill.md"
    if not journal.exists():
        t.problems.append("journal missing")
    else:
        text = journal.read_text(encoding="utf-8")
        parse_notes(text, None)
        missing = [n for n in names if n not in text]
        if missing:
            t.problems.append(f"journal lacks {missing}")
        if "| status | finished" not in text:
            t.problems.append(
                "journal header does not say finished: "
                + next((ln for ln in text.splitlines() if ln.startswith("| status |")), "no status row")[:120]
            )
    leftovers = [str(p.relative_to(trial_dir)) for p in trial_dir.rglob("*.tmp")]
    t.temp_files = len(leftovers)
    if leftovers:
        t.problems.append(f"temporary files left behind: {leftovers[:3]}")
    live = ledger_live(trial_dir / "state" / "ledger.jsonl")
    if live:
        t.problems.append(f"ledger still lists {live} live server(s)")
    left = wait_gone(trial_dir, timeout_s=3)
    if left:
        t.problems.append(f"{len(left)} process(es) of the trial still alive: {left[:3]}")


def calibrate(base: Path) -> dict:
    """One uninterrupted campaign (run, then a resume --approve per review gate): the
    servers, records and journal writes of the first process to aim at, and every kill
    point each process passes (traced by the kill-point hook)."""
    trial_dir = base / "calibration"
    trial_dir.mkdir(parents=True)
    pb = write_playbook(trial_dir)
    db = trial_dir / "state" / "campaign.db"
    trace = trial_dir / "trace.txt"
    counts: dict = {}
    points: list[tuple[int, str]] = []
    seconds: list[float] = []
    t0 = time.monotonic()
    for index in range(12):
        cid = _campaign_id(db)
        args = ["resume", cid, "--db", str(db), "--approve", "-q"] if cid else ["run", str(pb), "--db", str(db), "-q"]
        trace.unlink(missing_ok=True)
        start = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "campaign.cli.main", *args],
            cwd=trial_dir,
            env={**trial_env(trial_dir), TRACE_ENV: str(trace)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        if index == 0:
            watch = Watch(proc.pid, db, trial_dir / "journal")
            watch.until(
                lambda w=watch: bool(w.server_count() + w.records() + w.journal_writes()) and False,
                proc,
                interval=0.003,
            )
            counts = {
                "servers": watch.server_count(),
                "records": watch.records(),
                "journal_writes": watch.journal_writes(),
            }
        out, _ = proc.communicate()
        seconds.append(round(time.monotonic() - start, 1))
        points += [(index, ln) for ln in (trace.read_text().split() if trace.exists() else [])]
        if proc.returncode == 0:
            break
        if proc.returncode != 3:
            raise SystemExit(f"calibration process {index} failed (exit {proc.returncode}):\n{out[-2000:]}")
    problems = finished_experiments(db, [h["name"] for h in HYPOTHESES])
    if problems:
        raise SystemExit(f"calibration run is already wrong: {problems}")
    facts = record_facts(db)
    return {
        "seconds": time.monotonic() - t0,
        **counts,
        "points": points,
        "processes": len(seconds),
        "process_seconds": seconds,
        "reviews": facts["reviews"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=len(MOMENTS) * 4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2, help="trials run side by side")
    ap.add_argument("--moments", default=",".join(MOMENTS), help="comma-separated subset of " + ", ".join(MOMENTS))
    ap.add_argument("--json", type=Path, help="write the trials as JSON (rewritten after every trial)")
    ap.add_argument("--keep", action="store_true", help="keep the trial directories")
    args = ap.parse_args(argv)
    moments = [m for m in args.moments.split(",") if m]
    bad = [m for m in moments if m not in MOMENTS]
    if bad:
        ap.error(f"--moments: unknown {bad} (choose from {', '.join(MOMENTS)})")
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="kill-anywhere-"))
    calib = calibrate(base)
    print(
        f"calibration: {calib['seconds']:.1f}s in {calib['processes']} processes, {calib['reviews']} review gates, "
        f"{calib['servers']} servers, {calib['records']} records, {calib['journal_writes']} journal writes "
        f"in the first; {len(calib['points'])} kill points",
        flush=True,
    )
    print(
        f"{'#':>3} {'moment':<14} {'target':<22} {'p':>2} {'landed':<6} {'kill@s':>7} {'orphans':>7} "
        f"{'unledg':>6} {'resumes':>7} {'secs':>6}  result",
        flush=True,
    )
    plan = [(i, moments[i % len(moments)], rng.randrange(2**32)) for i in range(args.trials)]
    trials: list[Trial] = []

    def done(t: Trial) -> None:
        trials.append(t)
        trials.sort(key=lambda x: x.index)
        print(
            f"{t.index:>3} {t.moment:<14} {t.target[:22]:<22} {t.process:>2} {'yes' if t.hit else 'no':<6} "
            f"{t.killed_at_s:>7} {t.orphans:>7} {t.unledgered:>6} {t.resumes:>7} {t.seconds:>6}  "
            f"{'ok' if t.ok else 'FAIL: ' + '; '.join(t.problems)}",
            flush=True,
        )
        if args.json:
            args.json.write_text(
                json.dumps(
                    {
                        "calibration": calib,
                        "summary": summarize(trials),
                        "trials": [asdict(x) | {"ok": x.ok} for x in trials],
                    },
                    indent=2,
                )
            )

    with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
        for fut in as_completed([pool.submit(run_trial, i, m, seed, base, calib) for i, m, seed in plan]):
            done(fut.result())
    summary = summarize(trials)
    print("summary: " + ", ".join(f"{k} {v}" for k, v in summary.items()), flush=True)
    passed = sum(t.ok for t in trials)
    if not args.keep and passed == len(trials):
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    elif not args.keep:
        print(f"trial directories kept for inspection: {base}")
    return 0 if passed == len(trials) else 1


def summarize(trials: list[Trial]) -> dict[str, object]:
    """The figures docs/benchmarks/kill-anywhere.md shows: landed kills are the ones counted."""
    landed = [t for t in trials if t.hit]
    return {
        "trials": len(trials),
        "landed": len(landed),
        "landed_ok": sum(t.ok for t in landed),
        "failures": sum(not t.ok for t in trials),
        "orphans_reaped": sum(t.orphans for t in trials),
        "unledgered_servers": sum(t.unledgered for t in trials),
        "temp_files_left": sum(t.temp_files for t in trials),
        "redone_finished_rounds": sum(t.redone_rounds for t in trials),
        "landed_by_moment": {
            m: f"{sum(t.hit for t in trials if t.moment == m)}/{sum(t.moment == m for t in trials)}"
            for m in dict.fromkeys(t.moment for t in sorted(trials, key=lambda x: x.index))
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
