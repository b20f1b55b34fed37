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
A case is reported in its stratum: near-margin (`lab_engine.near_margin_case`), null,
gray, or by the distance of the test that decides its truth to that test's margin
(`lab_engine.deciding`); "missed strong" counts the cases whose deciding test is >= 1x
the minimum effect from its margin at a noisier-side per-launch noise <= 1.5% there.
`--draws 0,1000` runs two independent draws (the campaigns the constants were tuned on,
0-79, and fresh ones) and prints them side by side; `--ablate` runs the shipped rule
(direct driver) with each statistical component left out in turn
(`campaign.verdict.settings.RuleSettings`).

    python bench/verdict_lab.py [--campaigns 80] [--draws 0,1000] [--cases 25] [--structures offset,...]
                                [--driver auto|graph|direct] [--ablate] [--repeats-max N]
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

import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.lab_engine import (
    CASE_FLAG,
    NEAR_MARGIN_SHARE,
    STRUCTURES,
    Case,
    LabNode,
    Structure,
    deciding,
    draw_cases,
    stratum,
    truth_label,
    verdict_is_owed,
    verdict_is_wrong,
)
from bench.lab_oracle import run_oracle
from campaign.domain.errors import UserError
from campaign.domain.models import LevelResult, WorkloadSpec
from campaign.domain.records import LevelSamples
from campaign.loop.experiment import workloads_of
from campaign.playbook.load import load_playbook
from campaign.playbook.schema import Playbook, VerdictSpec
from campaign.verdict.baseline_level import RECENT, recent_level
from campaign.verdict.components import log_table
from campaign.verdict.judge import judge, round_decision
from campaign.verdict.noise import HISTORY, NodeNoise, baseline_launches, estimate
from campaign.verdict.settings import COMPONENTS, SHIPPED, RuleSettings

PLAYBOOK = ROOT / "playbooks" / "eagle_verify.yaml"
Result = tuple[int, str, int]  # case index, verdict kind, rounds


def policies(shipped: VerdictSpec) -> dict[str, VerdictSpec]:
    return {
        "adaptive": shipped,
        "fixed-3": shipped.model_copy(
            update={"policy": "fixed", "repeats": shipped.repeats.model_copy(update={"min": 3, "max": 3})}
        ),
        "fixed-6": shipped.model_copy(
            update={"policy": "fixed", "repeats": shipped.repeats.model_copy(update={"min": 6, "max": 6})}
        ),
    }


def campaign_setup(
    structure: str,
    index: int,
    n_cases: int,
    workloads: list[WorkloadSpec],
    m: float,
    offset_pct: float | None = None,
    near_share: float = NEAR_MARGIN_SHARE,
) -> tuple[Structure, list[Case]]:
    """One lab campaign's node and cases (`near_share` 0: the cases as drawn before the
    near-margin stratum, to replay a case found then)."""
    rng = random.Random(f"lab:{structure}:{index}")
    levels = [(w.name, c) for w in workloads for c in w.concurrency]
    st = Structure.draw(structure, rng, offset_pct)
    return st, draw_cases(rng, levels, m, n_cases, f"lab:{structure}:{index}", near_share)


def _tables(
    launches: list[dict[tuple[str, int], float]], workloads: list[WorkloadSpec]
) -> dict[str, list[list[float]]]:
    out = {}
    for w in workloads:
        t = log_table([[f[(w.name, c)] for c in w.concurrency] for f in launches])
        if t is not None and len(t) >= 2:
            out[w.name] = t
    return out


def run_direct(
    node: LabNode, spec: VerdictSpec, workloads: list[WorkloadSpec], n_cases: int, settings: RuleSettings = SHIPPED
) -> list[Result]:
    """The graph's sequence of launches and rule calls, without the graph (module doc);
    `settings`: the rule's components (`--ablate` leaves one out)."""
    start = baseline_launches(spec.repeats, NodeNoise())  # the start baseline: no launch on the node yet
    groups = [_tables([node.draw(None) for _ in range(start)], workloads)]
    out = []
    for i in range(n_cases):
        noise = estimate(groups[-HISTORY:], settings=settings)
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
            if not round_decision(
                list(samples.values()), spec, rounds, confounded=False, noise=noise, settings=settings
            ).more:
                break
            if rounds >= spec.repeats.max:
                break
        v = judge(list(samples.values()), spec, noise, primary_workload=workloads[0].name, settings=settings)
        out.append((i, v.kind, rounds))
        groups.append(_tables(base_launches, workloads))
    return out


def lab_playbook(pb: Playbook, spec: VerdictSpec, n_cases: int) -> Playbook:
    data = pb.model_dump(mode="json", exclude={"hypotheses", "planner", "nodes"})
    data.update(
        verdict=spec.model_dump(mode="json"),
        review={"after_no_win_streak": None, "before_patch": False},
        budget={"max_experiments": n_cases + 5, "max_hours": 1e9},
        hypotheses=[{"name": f"case-{i}", "flags": {CASE_FLAG: i}, "declares": [CASE_FLAG]} for i in range(n_cases)],
    )
    data["verdict"]["correctness"]["enabled"] = False
    return Playbook.model_validate(data)


def run_graph(
    node: LabNode, spec: VerdictSpec, pb: Playbook, n_cases: int, stopped: dict[int, str] | None = None
) -> list[Result]:
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


def case_row(node: LabNode, c: Case, m: float, index: int | None = None) -> dict:
    """What a case is scored by: its truth, its stratum, the deciding test's distance to its
    margin (x m) and the noisier side's per-launch SD at that test's level (`deciding`) in
    case `index`'s experiment."""
    got = deciding(c, m)
    return {
        "case": c.kind,
        "truth": truth_label(c, m),
        "stratum": stratum(c, m),
        "owed": verdict_is_owed(c, m),
        "distance": got[0] if got else None,
        "noise_pct": node.noise_pct(got[1], index) if got else None,
    }


Job = tuple[str, int, int, str, str, str, float | None, int, str]


def _job(args: Job) -> dict:
    structure, index, n_cases, policy, driver, playbook, offset, draw, left_out = args
    pb = load_playbook(playbook)
    spec = policies(pb.verdict).get(policy, pb.verdict)
    workloads = workloads_of(pb)
    st, cases = campaign_setup(structure, index, n_cases, workloads, spec.min_effect_pct, offset)
    node = LabNode(f"{structure}:{index}", st, cases, workloads)
    if policy == "oracle-6":
        driver, results = "oracle", run_oracle(node, cases, spec.confidence, spec.min_effect_pct)
    elif left_out:
        driver, results = (
            "direct",
            run_direct(node, spec, workloads, n_cases, RuleSettings.model_validate({left_out: False})),
        )
    else:
        if driver == "auto":
            driver = "graph" if policy == "adaptive" else "direct"
        results = (
            run_graph(node, spec, pb, n_cases) if driver == "graph" else run_direct(node, spec, workloads, n_cases)
        )
    m = spec.min_effect_pct
    rows = []
    for i, kind, rounds in results:
        c = cases[i]
        rows.append(
            {
                "structure": structure,
                "policy": policy,
                "driver": driver,
                "offset_pct": st.offset_pct,
                "campaign": index,
                "draw": draw,
                "left_out": left_out,
                "index": i,
                "kind": kind,
                "wrong": verdict_is_wrong(c, kind, m),
                "rounds": rounds,
                **case_row(node, c, m, i),
            }
        )
    return {"rows": rows}


def _strong(r: dict) -> bool:
    """Owed, its deciding test >= 1x m from its margin, the noisier side's SD <= 1.5% there."""
    return bool(r["owed"]) and r["distance"] is not None and r["distance"] >= 1.0 and r["noise_pct"] <= 1.5


def score(rows: Iterable[dict]) -> dict:
    rows = list(rows)
    wrong = [r for r in rows if r["wrong"]]
    decisive = [r for r in rows if r["owed"]]
    missed = [r for r in decisive if r["kind"] == "inconclusive"]
    strong = [r for r in decisive if _strong(r)]
    near = [r for r in rows if r.get("stratum") == "near_margin"]
    return {
        "n": len(rows),
        "wrong": len(wrong),
        "missed": len(missed),
        "decisive": len(decisive),
        "missed_strong": sum(1 for r in strong if r["kind"] == "inconclusive"),
        "strong": len(strong),
        "near": len(near),
        "wrong_near": sum(1 for r in near if r["wrong"]),
        "rounds": sum(r["rounds"] for r in rows) / max(1, len(rows)),
    }


def _pct(a: int, b: int) -> str:
    return f"{a}/{b} ({a / max(1, b):.1%})"


def _draw_name(draw: int, campaigns: int) -> str:
    return f"campaigns {draw}-{draw + campaigns - 1}"


def print_table(rows: list[dict], structures: list[str], pols: list[str], draws: list[int], campaigns: int) -> bool:
    """The two-draw table (one column group per draw) and whether the adaptive row meets
    the issue's targets on every draw."""
    print(
        "| structure | policy | "
        + " | ".join(
            f"wrong [{d}] | near-margin wrong [{d}] | missed strong [{d}] | rounds (x fixed-6) [{d}]" for d in draws
        )
        + " |"
    )
    print("|---|---|" + "---:|---:|---:|---:|" * len(draws))
    ok = True
    for s in structures:
        for p in pols:
            cells = []
            for d in draws:
                mine = [r for r in rows if r["structure"] == s and r["draw"] == d]
                sc = score(r for r in mine if r["policy"] == p)
                f6 = score(r for r in mine if r["policy"] == "fixed-6")
                oracle = score(r for r in mine if r["policy"] == "oracle-6")
                ratio = f" ({sc['rounds'] / f6['rounds']:.2f})" if f6["n"] else ""
                cells.append(
                    f"{_pct(sc['wrong'], sc['n'])} | {_pct(sc['wrong_near'], sc['near'])} | "
                    f"{_pct(sc['missed_strong'], sc['strong'])} | {sc['rounds']:.2f}{ratio}"
                )
                if p == "adaptive":
                    ok &= sc["wrong"] <= 0.005 * sc["n"]
                    ok &= not f6["n"] or sc["rounds"] <= 0.6 * f6["rounds"]
                    if oracle["n"]:
                        ok &= sc["wrong_near"] <= oracle["wrong_near"]
                        ok &= (
                            sc["missed_strong"] / max(1, sc["strong"])
                            <= oracle["missed_strong"] / max(1, oracle["strong"]) + 0.03
                        )
            print(f"| {s} | {p} | " + " | ".join(cells) + " |")
    print(
        "draws: "
        + "; ".join(f"[{d}] = {_draw_name(d, campaigns)}" for d in draws)
        + ".  missed strong: inconclusive where the deciding test is >= 1x the minimum effect from its margin "
        "at noisier-side noise <= 1.5%"
    )
    return ok


STRATA = ("near_margin", "< 0.5x m", "0.5-1x m", ">= 1x m", "null", "gray")


def print_strata(rows: list[dict], pols: list[str], draws: list[int]) -> None:
    """Wrong and missed per stratum and policy, over every structure, one column group per draw."""
    print(
        "| stratum | policy | "
        + " | ".join(f"experiments [{d}] | wrong [{d}] | missed / owed [{d}]" for d in draws)
        + " |"
    )
    print("|---|---|" + "---:|---:|---:|" * len(draws))
    for st in STRATA:
        if not any(r["stratum"] == st for r in rows):
            continue  # e.g. < 0.5x m: only near-margin cases are drawn there
        for p in pols:
            cells = []
            for d in draws:
                sc = score(r for r in rows if r["stratum"] == st and r["policy"] == p and r["draw"] == d)
                cells.append(f"{sc['n']} | {_pct(sc['wrong'], sc['n'])} | {_pct(sc['missed'], sc['decisive'])}")
            print(f"| {st} | {p} | " + " | ".join(cells) + " |")


def print_ablation(rows: list[dict], draws: list[int], left_out: list[str]) -> None:
    """The adaptive rule with each component left out in turn, over every structure."""
    print(
        "| left out | "
        + " | ".join(
            f"wrong [{d}] | near-margin wrong [{d}] | missed / owed [{d}] | missed strong [{d}] | rounds [{d}]"
            for d in draws
        )
        + " |"
    )
    print("|---|" + "---:|---:|---:|---:|---:|" * len(draws))
    for left in ("", *left_out):
        cells = []
        for d in draws:
            sc = score(r for r in rows if r["left_out"] == left and r["draw"] == d)
            cells.append(
                f"{_pct(sc['wrong'], sc['n'])} | {_pct(sc['wrong_near'], sc['near'])} | "
                f"{_pct(sc['missed'], sc['decisive'])} | {_pct(sc['missed_strong'], sc['strong'])} | "
                f"{sc['rounds']:.2f}"
            )
        print(f"| {left or 'nothing (shipped)'} | " + " | ".join(cells) + " |")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--playbook", default=str(PLAYBOOK))
    ap.add_argument(
        "--repeats-max",
        type=int,
        help="the playbook's verdict.repeats.max replaced (e.g. 6, the schema's default; the demo playbook ships 12)",
    )
    ap.add_argument("--campaigns", type=int, default=80, help="lab campaigns (nodes) per noise structure and draw")
    ap.add_argument(
        "--first-campaign",
        type=int,
        default=0,
        help="index of the first lab campaign: another index draws the same structures anew",
    )
    ap.add_argument(
        "--draws",
        help="first campaigns of independent draws, reported side by side (e.g. 0,1000: "
        "the draw the constants were tuned on and a fresh one); default --first-campaign",
    )
    ap.add_argument("--cases", type=int, default=25, help="experiments per campaign")
    ap.add_argument("--structures", default=",".join(STRUCTURES))
    ap.add_argument(
        "--policies",
        default="adaptive,fixed-3,fixed-6,oracle-6",
        help="oracle-6: the floor for any rule keeping the per-level no-loss test (bench/lab_oracle.py)",
    )
    ap.add_argument(
        "--ablate",
        nargs="?",
        const=",".join(COMPONENTS),
        metavar="COMPONENTS",
        help="the adaptive rule (direct driver) with each statistical component left out in turn "
        f"(default all: {', '.join(COMPONENTS)})",
    )
    ap.add_argument("--driver", choices=["auto", "direct", "graph"], default="auto")
    ap.add_argument("--offset-pct", type=float, help="fix the per-launch offset (default: 0.5-3%% per node)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", help="write every experiment's row here")
    ap.add_argument("--from-json", help="score the rows of an earlier run instead of running")
    args = ap.parse_args(argv)

    structures, pols = args.structures.split(","), args.policies.split(",")
    draws = [int(d) for d in args.draws.split(",")] if args.draws else [args.first_campaign]
    left_out = args.ablate.split(",") if args.ablate else []
    if unknown := set(left_out) - set(COMPONENTS):
        ap.error(f"--ablate: unknown component(s) {', '.join(sorted(unknown))} (choose from {', '.join(COMPONENTS)})")
    variants = ("", *left_out)
    tmp = tempfile.TemporaryDirectory(prefix="verdict-lab-pb-") if args.repeats_max else None
    if tmp is not None:  # the playbook with only verdict.repeats.max changed
        data = yaml.safe_load(Path(args.playbook).read_text())
        data["verdict"].setdefault("repeats", {})["max"] = args.repeats_max
        args.playbook = str(Path(tmp.name) / Path(args.playbook).name)
        Path(args.playbook).write_text(yaml.safe_dump(data, sort_keys=False))
    try:  # bad input: one line here, not a traceback from a worker
        load_playbook(args.playbook)
    except UserError as e:
        print(f"--repeats-max {args.repeats_max}: {e}" if tmp else str(e), file=sys.stderr)
        return 2
    if args.ablate:
        pols = ["adaptive"]
    jobs: list[Job] = [
        (s, i, args.cases, p, "direct" if args.ablate else args.driver, args.playbook, args.offset_pct, d, v)
        for d in draws
        for s in structures
        for i in range(d, d + args.campaigns)
        for p in pols
        for v in variants
    ]
    t0 = time.time()
    if args.from_json:
        rows = json.loads(Path(args.from_json).read_text())["rows"]
    else:
        with Pool(args.workers) as pool:
            rows = [r for out in pool.imap_unordered(_job, jobs, chunksize=1) for r in out["rows"]]
    took = max(time.time() - t0, 1e-9)
    print(
        f"verdict lab: {len(rows)} experiments in {took:.0f} s ({len(rows) / took * 60:.0f}/min, driver "
        f"{'direct' if args.ablate else args.driver}, {args.workers} workers); {len(draws)} draw(s) x "
        f"{args.campaigns} nodes x {args.cases} cases per structure and policy"
    )
    if args.ablate:
        print_ablation(rows, draws, left_out)
        ok = True
    else:
        ok = print_table(rows, structures, pols, draws, args.campaigns)
        print()
        print_strata(rows, pols, draws)
        unchecked = [p for p in ("fixed-6", "oracle-6") if p not in pols]
        print(
            f"targets (adaptive, every structure and draw: wrong <= 0.5%; near-margin wrong <= the oracle's; "
            f"missed strong <= the oracle's + 3 points; rounds <= 0.6x fixed-6): {'met' if ok else 'NOT met'}"
            + (
                f" (the bars that need {' and '.join(unchecked)} not checked: add {','.join(unchecked)} to --policies)"
                if unchecked and "adaptive" in pols
                else ""
            )
        )
    if args.json:
        Path(args.json).write_text(json.dumps({"args": vars(args), "rows": rows}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
