"""The verdict lab: the shipped verdict rule against synthetic engines whose truth is known.

Ground truth is the generator's true effect per level against `min_effect_pct`, never
`decide()` (`bench/lab_engine.py`): a WIN is wrong where the truth loses more than the
minimum effect somewhere or gains it nowhere; a DEAD END is wrong where the truth loses
nowhere; INCONCLUSIVE is a miss where some level moves by the minimum effect or more;
cases drawn in the gray zone (0.5..1.5x the minimum effect) are right whatever the
verdict.  Each lab campaign is one node with one noise structure and 25 cases; it runs
with the shipped playbook's workloads and verdict spec under three policies: the shipped
adaptive rule, fixed 3 rounds and fixed 6 rounds (same campaigns, same seeds); a fourth
row, `oracle-6`, is what a rule told the generator's true variances could decide in 6
rounds while keeping the per-level no-loss test (`bench/lab_oracle.py`; what it is a
floor for, and what not, is said there).

Drivers: `graph` runs the real campaign graph (`build_graph(deps)`, in-memory
checkpointer, a SQLite store in a temp dir, the in-process `LabNode`, no journal);
`direct` makes the same calls the graph's measure and verdict nodes make
(`round_decision`, `judge`, the noise model from every earlier launch) without the store
and the graph machinery.  `auto` (default): the shipped policy through the graph, the
fixed comparison policies directly.  `tests/bench/test_verdict_lab.py` checks that both
drivers give the same verdicts, launch by launch.

wrong: a decisive verdict the truth contradicts (above).  missed: inconclusive where a
verdict is owed.  rounds: interleaved rounds per experiment (node time is proportional).

    python bench/verdict_lab.py [--campaigns 80] [--cases 25] [--structures offset,...] [--driver auto|graph|direct]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Iterable
from multiprocessing import Pool
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lab_engine import (
    CASE_FLAG,
    STRUCTURES,
    Case,
    LabNode,
    Structure,
    draw_case,
    truth_label,
    verdict_is_owed,
    verdict_is_wrong,
)
from bench.lab_oracle import run_oracle
from campaign.domain.models import LevelResult, WorkloadSpec
from campaign.domain.records import LevelSamples
from campaign.loop.experiment import workloads_of
from campaign.playbook.load import load_playbook
from campaign.playbook.schema import Playbook, VerdictSpec
from campaign.verdict.baseline_level import RECENT, recent_level
from campaign.verdict.components import log_table
from campaign.verdict.judge import judge, round_decision
from campaign.verdict.noise import HISTORY, NodeNoise, baseline_launches, estimate

PLAYBOOK = ROOT / "playbooks" / "eagle_verify.yaml"
Result = tuple[int, str, int]  # case index, verdict kind, rounds


def policies(shipped: VerdictSpec) -> dict[str, VerdictSpec]:
    return {
        "adaptive": shipped,
        "fixed-3": shipped.model_copy(update={"policy": "fixed", "repeats": shipped.repeats.model_copy(
            update={"min": 3, "max": 3})}),
        "fixed-6": shipped.model_copy(update={"policy": "fixed", "repeats": shipped.repeats.model_copy(
            update={"min": 6, "max": 6})}),
    }


def campaign_setup(structure: str, index: int, n_cases: int, workloads: list[WorkloadSpec], m: float,
                   offset_pct: float | None = None) -> tuple[Structure, list[Case]]:
    rng = random.Random(f"lab:{structure}:{index}")
    levels = [(w.name, c) for w in workloads for c in w.concurrency]
    return Structure.draw(structure, rng, offset_pct), [draw_case(rng, levels, m) for _ in range(n_cases)]


def _tables(launches: list[dict[tuple[str, int], float]], workloads: list[WorkloadSpec]) -> dict[str, list[list[float]]]:
    out = {}
    for w in workloads:
        t = log_table([[f[(w.name, c)] for c in w.concurrency] for f in launches])
        if t is not None and len(t) >= 2:
            out[w.name] = t
    return out


def run_direct(node: LabNode, spec: VerdictSpec, workloads: list[WorkloadSpec], n_cases: int) -> list[Result]:
    """The graph's sequence of launches and rule calls, without the graph (module doc)."""
    start = baseline_launches(spec.repeats, NodeNoise())  # the start baseline: no launch on the node yet
    groups = [_tables([node.draw(None) for _ in range(start)], workloads)]
    out = []
    for i in range(n_cases):
        noise = estimate(groups[-HISTORY:])
        noise.level = recent_level(groups[-RECENT:], noise)
        samples = {(w.name, c): LevelSamples(workload=w.name, concurrency=c) for w in workloads for c in w.concurrency}
        base_launches, rounds = [], 0
        while True:
            cand, base = node.draw(i), node.draw(None)
            for lv, s in samples.items():
                s.candidate.append(LevelResult(concurrency=lv[1], requests=1, output_tokens_per_s=cand[lv]))
                s.baseline.append(LevelResult(concurrency=lv[1], requests=1, output_tokens_per_s=base[lv]))
            base_launches.append(base)
            rounds += 1
            if not round_decision(list(samples.values()), spec, rounds, confounded=False, noise=noise).more:
                break
            if rounds >= spec.repeats.max:
                break
        v = judge(list(samples.values()), spec, noise, primary_workload=workloads[0].name)
        out.append((i, v.kind, rounds))
        groups.append(_tables(base_launches, workloads))
    return out


def lab_playbook(pb: Playbook, spec: VerdictSpec, n_cases: int) -> Playbook:
    data = pb.model_dump(mode="json", exclude={"hypotheses", "planner", "nodes"})
    data.update(verdict=spec.model_dump(mode="json"), review={"after_no_win_streak": None, "before_patch": False},
                budget={"max_experiments": n_cases + 5, "max_hours": 1e9},
                hypotheses=[{"name": f"case-{i}", "flags": {CASE_FLAG: i}, "declares": [CASE_FLAG]}
                            for i in range(n_cases)])
    data["verdict"]["correctness"]["enabled"] = False
    return Playbook.model_validate(data)


def run_graph(node: LabNode, spec: VerdictSpec, pb: Playbook, n_cases: int,
              stopped: dict[int, str] | None = None) -> list[Result]:
    """The real campaign graph with the lab node (module doc); `stopped` collects each
    case's recorded rounds line (why its rounds stopped), as the journal shows it."""
    from langgraph.checkpoint.memory import InMemorySaver

    from campaign.loop.deps import Deps
    from campaign.loop.graph import build_graph
    from campaign.store import Store

    lab = lab_playbook(pb, spec, n_cases)
    with tempfile.TemporaryDirectory(prefix="verdict-lab-") as tmp:
        store = Store(Path(tmp) / "lab.db")
        cid = store.create_campaign(lab.name, playbook=lab, playbook_path=str(PLAYBOOK)).id
        for i, h in enumerate(lab.hypotheses):
            store.upsert_hypothesis(cid, h, position=i)
        deps = Deps(playbook=lab, store=store, nodes=[node], journal_path=None)
        graph = build_graph(deps).compile(checkpointer=InMemorySaver())
        graph.invoke({"campaign_id": cid}, {"configurable": {"thread_id": cid}, "recursion_limit": 100000})
        out = []
        for e in store.list_experiments(cid, role="candidate"):
            v = store.get_verdict(e.id)
            rounds = min(len(s.candidate) for s in store.level_samples(e.id))
            out.append((int(e.hypothesis.split("-")[1]), v.kind if v else "none", rounds))
            if stopped is not None and v is not None:
                stopped[out[-1][0]] = v.stopped
        store.close() if hasattr(store, "close") else None
    return out


def case_strength(c: Case) -> float:
    """The size of the effect that decides the truth: the largest |effect|, and for a
    regime split the smaller of its win and its loss (both must be shown)."""
    ups = [d for d in c.effects.values() if d > 0]
    downs = [-d for d in c.effects.values() if d < 0]
    if c.kind == "split" and ups and downs:
        return min(max(ups), max(downs))
    return max([abs(d) for d in c.effects.values()] or [0.0])


def _job(args: tuple[str, int, int, str, str, str, float | None]) -> dict:
    structure, index, n_cases, policy, driver, playbook, offset = args
    pb = load_playbook(playbook)
    spec = policies(pb.verdict).get(policy, pb.verdict)
    workloads = workloads_of(pb)
    st, cases = campaign_setup(structure, index, n_cases, workloads, spec.min_effect_pct, offset)
    node = LabNode(f"{structure}:{index}", st, cases, workloads)
    if policy == "oracle-6":
        driver, results = "oracle", run_oracle(node, cases, spec.confidence, spec.min_effect_pct)
    else:
        if driver == "auto":
            driver = "graph" if policy == "adaptive" else "direct"
        results = run_graph(node, spec, pb, n_cases) if driver == "graph" else run_direct(node, spec, workloads, n_cases)
    m = spec.min_effect_pct
    rows = []
    for i, kind, rounds in results:
        c = cases[i]
        rows.append({"structure": structure, "policy": policy, "driver": driver, "offset_pct": st.offset_pct,
                     "case": c.kind, "campaign": index, "index": i, "truth": truth_label(c, m), "kind": kind,
                     "wrong": verdict_is_wrong(c, kind, m), "owed": verdict_is_owed(c, m), "rounds": rounds,
                     "strength": case_strength(c) / m})
    return {"rows": rows}


def score(rows: Iterable[dict]) -> dict:
    rows = list(rows)
    wrong = [r for r in rows if r["wrong"]]
    decisive = [r for r in rows if r["owed"]]
    missed = [r for r in decisive if r["kind"] == "inconclusive"]
    strong = [r for r in decisive if r["strength"] >= 2 and r["offset_pct"] <= 1.5]
    return {"n": len(rows), "wrong": len(wrong), "wrong_le2": sum(1 for r in wrong if r["offset_pct"] <= 2.0),
            "missed": len(missed), "decisive": len(decisive),
            "missed_strong": sum(1 for r in strong if r["kind"] == "inconclusive"), "strong": len(strong),
            "rounds": sum(r["rounds"] for r in rows) / max(1, len(rows))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--playbook", default=str(PLAYBOOK))
    ap.add_argument("--campaigns", type=int, default=80, help="lab campaigns (nodes) per noise structure")
    ap.add_argument("--first-campaign", type=int, default=0,
                    help="index of the first lab campaign: another 80 draws the same structures anew")
    ap.add_argument("--cases", type=int, default=25, help="experiments per campaign")
    ap.add_argument("--structures", default=",".join(STRUCTURES))
    ap.add_argument("--policies", default="adaptive,fixed-3,fixed-6,oracle-6",
                    help="oracle-6: the floor for any rule keeping the per-level no-loss test (bench/lab_oracle.py)")
    ap.add_argument("--driver", choices=["auto", "direct", "graph"], default="auto")
    ap.add_argument("--offset-pct", type=float, help="fix the per-launch offset (default: 0.5-3%% per node)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", help="write every experiment's row here")
    ap.add_argument("--from-json", help="score the rows of an earlier run instead of running")
    args = ap.parse_args(argv)

    structures, pols = args.structures.split(","), args.policies.split(",")
    jobs = [(s, i, args.cases, p, args.driver, args.playbook, args.offset_pct)
            for s in structures for i in range(args.first_campaign, args.first_campaign + args.campaigns) for p in pols]
    t0 = time.time()
    if args.from_json:
        rows = json.loads(Path(args.from_json).read_text())["rows"]
    else:
        with Pool(args.workers) as pool:
            rows = [r for out in pool.imap_unordered(_job, jobs, chunksize=4) for r in out["rows"]]
    took = max(time.time() - t0, 1e-9)
    print(f"verdict lab: {len(rows)} experiments in {took:.0f} s ({len(rows) / took * 60:.0f}/min, driver {args.driver}, "
          f"{args.workers} workers); {args.campaigns} nodes x {args.cases} cases per structure and policy")
    print("| structure | policy | experiments | wrong | wrong at offset <= 2% | missed / decisive | "
          "missed, effect >= 2x at offset <= 1.5% | rounds | vs fixed-6 |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    ok = True
    for s in structures:
        fixed6 = score(r for r in rows if r["structure"] == s and r["policy"] == "fixed-6")["rounds"] or 6.0
        for p in pols:
            sc = score(r for r in rows if r["structure"] == s and r["policy"] == p)
            ms = f"{sc['missed']}/{sc['decisive']}"
            mst = f"{sc['missed_strong']}/{sc['strong']} ({sc['missed_strong'] / max(1, sc['strong']):.1%})"
            print(f"| {s} | {p} | {sc['n']} | {sc['wrong']} ({sc['wrong'] / max(1, sc['n']):.2%}) | {sc['wrong_le2']} "
                  f"| {ms} | {mst} | {sc['rounds']:.2f} | {sc['rounds'] / fixed6:.2f} |")
            if p == "adaptive":
                f3 = score(r for r in rows if r["structure"] == s and r["policy"] == "fixed-3")
                ok &= sc["wrong"] <= 0.005 * sc["n"] and sc["wrong_le2"] == 0
                ok &= sc["missed_strong"] <= 0.05 * max(1, sc["strong"])
                ok &= sc["rounds"] <= 0.6 * fixed6 and (not f3["n"] or sc["missed"] < f3["missed"])
    print(f"targets (adaptive: wrong <= 0.5% and 0 at offset <= 2%; missed <= 5% for effects >= 2x at offset "
          f"<= 1.5%; rounds <= 0.6x fixed-6 with fewer misses than fixed-3): {'met' if ok else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
