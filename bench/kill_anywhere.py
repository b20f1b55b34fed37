"""Kill a campaign anywhere, resume it, and prove nothing was lost or left running.

Each trial starts `campaign run` on a tiny playbook (simulated node, time scale 100,
four hypotheses: a win, a crash, two ordinary ideas) in its own directory, stops the
controller at one moment, then runs `campaign resume ID --approve` until the campaign
finishes.  Moments: a random delay, or targeted by watching the process tree, the
database and the journal directory: while a server starts, mid-sweep, right after an
experiment is recorded (before the journal is rendered), while the journal is written;
plus SIGTERM and SIGINT (clean stop: exit 130, a resume hint, no server left).

Checks per trial: the campaign finished; every hypothesis has exactly one finished
experiment with a verdict (other attempts stale); no run recorded twice; the journal
names every hypothesis and its notes blocks parse; the ledger holds no live server;
no simulated-node process tagged with the trial is alive.

    python bench/kill_anywhere.py --trials 30 [--seed 1] [--json out.json]
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
from dataclasses import asdict, dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.kill_watch import (  # noqa: E402
    TAG_ENV,
    Watch,
    finished_experiments,
    ledger_live,
    tagged_processes,
    wait_gone,
)

ROOT = Path(__file__).resolve().parents[1]
MOMENTS = ("random", "server_start", "mid_sweep", "after_record", "journal_write", "sigterm", "sigint")
HYPOTHESES = [
    {"name": "smaller-cuda-graph", "rationale": "may win: adopted if it does", "flags": {"cuda-graph-max-bs": 128},
     "adopt_if_win": True},
    {"name": "torch-symm-mem", "rationale": "crashes at start on SM120", "flags": {"enable-torch-symm-mem": True}},
    {"name": "nccl-tree", "rationale": "ordinary", "env": {"NCCL_ALGO": "Tree"}},
    {"name": "custom-allreduce", "rationale": "ordinary", "flags": {"enable-custom-all-reduce": True}},
]


def write_playbook(trial_dir: Path, hypotheses: list[dict] | None = None, time_scale: float = 400) -> Path:
    import yaml

    data = {
        "name": "kill-anywhere",
        "journal": str(trial_dir / "journal" / "kill.md"),
        "database": str(trial_dir / "state" / "campaign.db"),
        "node": {"kind": "simulated", "profile": "rtx6000bw-pcie-8x", "cuda": "12.8", "seed": 5,
                 "time_scale": time_scale, "noise_pct": 1.0},
        "server": {"engine": "simulated", "model": "sim-model", "startup_timeout_s": 120,
                   "command": "{python} -m tools.simnode --host {host} --port {port} --profile {profile} "
                              "--cuda {cuda} --seed {seed} --time-scale {time_scale} --noise-pct {noise_pct} "
                              "--model-path {model} --tp 8 --stream-interval 8 {flags}"},
        "baseline": {"flags": {"cuda-graph-max-bs": 512, "mem-fraction-static": 0.88}},
        "workloads": {
            "single_stream": {"concurrency": [1], "prompts": "fixed", "output_tokens": 16,
                              "requests_per_level": 2, "warmup_requests": 0},
            "parallel": {"concurrency": [4], "prompts": "diverse", "output_tokens": 16,
                         "requests_per_level": "C", "warmup_requests": 0},
        },
        "verdict": {"min_effect_pct": 3, "repeats": {"min": 1, "max": 1}, "interleave": False,
                    "correctness": {"prompts": 2, "max_tokens": 8}},
        "review": {"after_no_win_streak": 50, "before_patch": False},
        "hypotheses": hypotheses or HYPOTHESES,
    }
    path = trial_dir / "playbook.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@dataclass
class Trial:
    index: int
    moment: str
    target: int = 0  # which occurrence of the moment (k-th server, k-th record...)
    hit: bool = False  # the moment was reached (else the run ended first)
    killed_at_s: float = 0.0
    orphans: int = 0  # servers alive right after the kill (the resume must reap them)
    resumes: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def cli(args: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "campaign.cli.main", *args], cwd=cwd, env=env, text=True,
                          capture_output=True, timeout=timeout)


def trial_env(trial_dir: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), TAG_ENV: str(trial_dir), "NO_COLOR": "1", "COLUMNS": "160"}


def run_trial(index: int, moment: str, rng: random.Random, base: Path, calib: dict, timeout_s: float = 240) -> Trial:
    t = Trial(index, moment)
    trial_dir = base / f"t{index:03d}-{moment}"
    trial_dir.mkdir(parents=True)
    pb = write_playbook(trial_dir)
    db = trial_dir / "state" / "campaign.db"
    env = trial_env(trial_dir)
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "campaign.cli.main", "run", str(pb), "--db", str(db), "-q"],
                            cwd=trial_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    watch = Watch(proc.pid, db, trial_dir / "journal")
    sig = {"sigterm": signal.SIGTERM, "sigint": signal.SIGINT}.get(moment, signal.SIGKILL)
    try:
        t.hit, t.target = _wait_for_moment(watch, proc, moment, rng, calib)
        if t.hit:
            t.killed_at_s = round(time.monotonic() - t0, 2)
            proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        t.problems.append("controller did not exit within 60 s of the signal")
    if t.hit and sig != signal.SIGKILL:
        _check_clean_stop(t, proc.returncode, out or "", trial_dir)
    t.orphans = len(tagged_processes(trial_dir, servers_only=True))
    _resume_until_done(t, trial_dir, pb, db, env, deadline=t0 + timeout_s)
    _check_final(t, trial_dir, db)
    t.seconds = round(time.monotonic() - t0, 1)
    return t


def _wait_for_moment(watch: Watch, proc: subprocess.Popen, moment: str, rng: random.Random,
                     calib: dict) -> tuple[bool, int]:
    if moment == "random":
        delay = rng.uniform(0.3, max(0.5, calib["seconds"] * 0.8))
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                return False, int(delay * 1000)
            time.sleep(0.01)
        return proc.poll() is None, int(delay * 1000)
    if moment in ("server_start", "mid_sweep", "sigterm", "sigint"):
        k = rng.randint(1, max(1, calib["servers"]))
        if not watch.until(lambda: watch.server_count() >= k, proc):
            return False, k
        if moment == "server_start":
            return True, k
        if not watch.until(lambda: watch.newest_server_serving(), proc):
            return False, k
        time.sleep(rng.uniform(0.02, 0.25))
        return proc.poll() is None, k
    if moment == "after_record":
        k = rng.randint(1, max(1, calib["records"]))
        return watch.until(lambda: watch.records() >= k, proc, interval=0.003), k
    if moment == "journal_write":
        k = rng.randint(1, max(1, calib["journal_writes"]))
        return watch.until(lambda: watch.journal_writes() >= k, proc, interval=0.002), k
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


def _resume_until_done(t: Trial, trial_dir: Path, pb: Path, db: Path, env: dict[str, str], deadline: float) -> None:
    for _ in range(8):
        cid = _campaign_id(db)
        args = ["resume", cid, "--db", str(db), "--approve", "-q"] if cid else ["run", str(pb), "--db", str(db), "-q"]
        remaining = deadline - time.monotonic()
        if remaining <= 5:
            t.problems.append("resume: out of time")
            return
        try:
            res = cli(args, trial_dir, env, timeout=remaining)
        except subprocess.TimeoutExpired:
            t.problems.append("resume: timed out")
            return
        t.resumes += 1
        text = res.stdout + res.stderr
        if "Traceback" in text:
            t.problems.append(f"resume: traceback: {text[-400:]!r}")
            return
        if res.returncode == 0 or (res.returncode == 2 and "is finished" in text):
            return
        if res.returncode != 3:
            t.problems.append(f"resume: exit {res.returncode}: {text.strip()[-300:]!r}")
            return
    t.problems.append("resume: still not finished after 8 resumes")


def _check_final(t: Trial, trial_dir: Path, db: Path) -> None:
    from campaign.journal.render import parse_notes

    names = [h["name"] for h in HYPOTHESES]
    for problem in finished_experiments(db, names):
        t.problems.append(problem)
    journal = trial_dir / "journal" / "kill.md"
    if not journal.exists():
        t.problems.append("journal missing")
    else:
        text = journal.read_text(encoding="utf-8")
        parse_notes(text)
        missing = [n for n in names if n not in text]
        if missing:
            t.problems.append(f"journal lacks {missing}")
    leftovers = [str(p.relative_to(trial_dir)) for p in trial_dir.rglob("*.tmp")]
    if leftovers:
        t.problems.append(f"temporary files left behind: {leftovers[:3]}")
    live = ledger_live(trial_dir / "state" / "ledger.jsonl")
    if live:
        t.problems.append(f"ledger still lists {live} live server(s)")
    left = wait_gone(trial_dir, timeout_s=3)
    if left:
        t.problems.append(f"{len(left)} process(es) of the trial still alive: {left[:3]}")


def calibrate(base: Path) -> dict:
    """One uninterrupted run: how many servers, records and journal writes to aim at."""
    trial_dir = base / "calibration"
    trial_dir.mkdir(parents=True)
    pb = write_playbook(trial_dir)
    db = trial_dir / "state" / "campaign.db"
    t0 = time.monotonic()
    proc = subprocess.Popen([sys.executable, "-m", "campaign.cli.main", "run", str(pb), "--db", str(db), "-q"],
                            cwd=trial_dir, env=trial_env(trial_dir), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    watch = Watch(proc.pid, db, trial_dir / "journal")
    watch.until(lambda: bool(watch.server_count() + watch.records() + watch.journal_writes()) and False, proc,
                interval=0.003)
    out, _ = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"calibration run failed (exit {proc.returncode}):\n{out[-2000:]}")
    problems = finished_experiments(db, [h["name"] for h in HYPOTHESES])
    if problems:
        raise SystemExit(f"calibration run is already wrong: {problems}")
    return {"seconds": time.monotonic() - t0, "servers": watch.server_count(), "records": watch.records(),
            "journal_writes": watch.journal_writes()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=len(MOMENTS) * 3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--moments", default=",".join(MOMENTS), help="comma-separated subset of " + ", ".join(MOMENTS))
    ap.add_argument("--json", type=Path, help="write the trials as JSON")
    ap.add_argument("--keep", action="store_true", help="keep the trial directories")
    args = ap.parse_args(argv)
    moments = [m for m in args.moments.split(",") if m]
    bad = [m for m in moments if m not in MOMENTS]
    if bad:
        ap.error(f"--moments: unknown {bad} (choose from {', '.join(MOMENTS)})")
    rng = random.Random(args.seed)
    base = Path(tempfile.mkdtemp(prefix="kill-anywhere-"))
    calib = calibrate(base)
    print(f"calibration: {calib['seconds']:.1f}s, {calib['servers']} servers, {calib['records']} records, "
          f"{calib['journal_writes']} journal writes", flush=True)
    print(f"{'#':>3} {'moment':<14} {'k':>5} {'hit':<4} {'kill@s':>7} {'orphans':>7} {'resumes':>7} {'secs':>6}  result")
    trials: list[Trial] = []
    for i in range(args.trials):
        t = run_trial(i, moments[i % len(moments)], rng, base, calib)
        trials.append(t)
        print(f"{i:>3} {t.moment:<14} {t.target:>5} {'yes' if t.hit else 'no':<4} {t.killed_at_s:>7} {t.orphans:>7} "
              f"{t.resumes:>7} {t.seconds:>6}  {'ok' if t.ok else 'FAIL: ' + '; '.join(t.problems)}", flush=True)
    passed = sum(t.ok for t in trials)
    hit = sum(t.hit for t in trials)
    print(f"summary: {passed}/{len(trials)} trials passed ({hit} interrupted at their moment, "
          f"{sum(t.orphans for t in trials)} orphaned servers reaped on resume)")
    if args.json:
        args.json.write_text(json.dumps({"calibration": calib, "trials": [asdict(t) | {"ok": t.ok} for t in trials]},
                                        indent=2))
    if not args.keep and passed == len(trials):
        import shutil

        shutil.rmtree(base, ignore_errors=True)
    elif not args.keep:
        print(f"trial directories kept for inspection: {base}")
    return 0 if passed == len(trials) else 1


if __name__ == "__main__":
    raise SystemExit(main())
