"""Rule-based triage measured on real crash logs of vLLM and SGLang servers.

Every file of `tests/tools/server/triage_corpus/` (the training corpus: the rules were
written looking at these) and of `tests/tools/server/triage_holdout/` (the holdout:
never used to write a rule) is a trimmed excerpt of a log posted in a public GitHub
issue, with a header naming its source, engine, version and the class a human assigns.
Each is classified by `tools.server.triage.classify` with the engine profile's own
rules (what `measure` does after a crash) and scored:

- right: the class the human assigned, decided by a rule;
- wrong: another class (worse than "unknown": it sends the reader the wrong way);
- unknown: no rule matched (`exited` with the last lines), whatever the human said.

The two sets are reported apart.  The holdout's first 20 logs were labelled and
committed before the rules for their families were written; scored then: right 1,
wrong 1, unknown 18; after the rules (written from the engines' source and the training
logs): right 20, wrong 0, unknown 0.  8 more, labelled and committed after those rules
and scored once as they were: right 8, wrong 0, unknown 0.

With `--planner-base-url` (an OpenAI-compatible endpoint; key from OPENAI_API_KEY) the
unknowns are also sent to the LLM triage that the loop uses after a rule miss, and its
answers are counted apart (llm right / llm wrong), never mixed into the rule figures.
Exit status 1 when any log is classified wrong.

    python bench/triage_corpus.py [--corpus DIR] [--holdout DIR] [--planner-base-url URL --planner-model M] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from campaign.domain.models import FailureClass
from tools.engines import engine_profile
from tools.server.triage import is_unmatched

CORPUS = ROOT / "tests" / "tools" / "server" / "triage_corpus"
HOLDOUT = ROOT / "tests" / "tools" / "server" / "triage_holdout"
HEADER_KEYS = ("source", "engine", "version", "class", "note")
#: the corpus logs carry no exit status; a crashed server exits non-zero.
EXIT_CODE = 1

Outcome = Literal["right", "wrong", "unknown"]
LlmTriage = Callable[[list[str]], FailureClass | None]


@dataclass(frozen=True)
class CorpusLog:
    """One real log: its header and its (verbatim, trimmed) lines."""

    name: str
    source: str
    engine: str
    expected: FailureClass
    lines: list[str]
    version: str = ""


@dataclass(frozen=True)
class Scored:
    name: str
    engine: str
    expected: str
    got: str
    outcome: Outcome
    llm: str | None = None  # the LLM's class for an unknown, when a planner was asked


class CorpusError(ValueError):
    """A corpus file without the header the scorer needs."""


def read_log(path: Path) -> CorpusLog:
    """Header lines `# key: value` (source, engine, class required), then the log."""
    header: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    body_start = 0
    for i, line in enumerate(lines):
        key, sep, value = line[2:].partition(": ") if line.startswith("# ") else ("", "", "")
        if not sep or key not in HEADER_KEYS:
            body_start = i
            break
        header[key] = value.strip()
    else:
        body_start = len(lines)
    missing = [k for k in ("source", "engine", "class") if k not in header]
    if missing:
        raise CorpusError(f"{path}: header lacks {', '.join(missing)} (fix: add '# {missing[0]}: ...' at the top)")
    try:
        expected = FailureClass(header["class"])
    except ValueError:
        raise CorpusError(
            f"{path}: class {header['class']!r} is not a FailureClass "
            f"(fix: one of {', '.join(c.value for c in FailureClass)})"
        ) from None
    return CorpusLog(
        name=path.name,
        source=header["source"],
        engine=header["engine"],
        expected=expected,
        lines=lines[body_start:],
        version=header.get("version", ""),
    )


def load_corpus(directory: Path = CORPUS) -> list[CorpusLog]:
    return [read_log(p) for p in sorted(directory.glob("*.log"))]


def score_log(log: CorpusLog, llm: LlmTriage | None = None) -> Scored:
    failure = engine_profile(log.engine).classify(EXIT_CODE, log.lines, phase="start")
    if is_unmatched(failure):
        guess = llm(log.lines) if llm else None
        return Scored(
            log.name,
            log.engine,
            log.expected.value,
            failure.failure_class.value,
            "unknown",
            llm=None if llm is None else (guess.value if guess else "none"),
        )
    outcome: Outcome = "right" if failure.failure_class == log.expected else "wrong"
    return Scored(log.name, log.engine, log.expected.value, failure.failure_class.value, outcome)


def score(logs: Iterable[CorpusLog], llm: LlmTriage | None = None) -> list[Scored]:
    return [score_log(log, llm) for log in logs]


def table(results: list[Scored]) -> str:
    """Per human-assigned class: logs, right, wrong, unknown (+ the LLM on unknowns)."""
    with_llm = any(r.llm is not None for r in results)
    head = "| class | logs | right | wrong | unknown |" + (" llm right | llm wrong |" if with_llm else "")
    rows = [head, "|" + " --- |" * (5 + 2 * with_llm)]

    def row(label: str, group: list[Scored]) -> str:
        counts = [sum(r.outcome == o for r in group) for o in ("right", "wrong", "unknown")]
        cells = [label, str(len(group)), *map(str, counts)]
        if with_llm:
            asked = [r for r in group if r.llm is not None]
            cells += [str(sum(r.llm == r.expected for r in asked)), str(sum(r.llm != r.expected for r in asked))]
        return "| " + " | ".join(cells) + " |"

    for cls in sorted({r.expected for r in results}):
        rows.append(row(cls, [r for r in results if r.expected == cls]))
    rows.append(row("**all**", results))
    n = len(results) or 1
    shares = {o: sum(r.outcome == o for r in results) / n for o in ("right", "wrong", "unknown")}
    rows.append("")
    rows.append(
        f"right {shares['right']:.1%}, wrong {shares['wrong']:.1%}, unknown {shares['unknown']:.1%} "
        f"of {len(results)} logs ({sum(r.engine == 'vllm' for r in results)} vLLM, "
        f"{sum(r.engine == 'sglang' for r in results)} SGLang)"
    )
    return "\n".join(rows)


def llm_triage(base_url: str, model: str) -> LlmTriage:
    """The loop's own LLM triage (campaign.planner), pointed at `base_url`."""
    from campaign.planner.llm import LlmPlanner
    from campaign.playbook.schema import KnobSpace, PlannerSpec

    planner = LlmPlanner(
        PlannerSpec(kind="llm", model=model, base_url=base_url, max_retries=1),
        KnobSpace(),
        api_key=os.environ.get("OPENAI_API_KEY"),
        base_url=base_url,
    )
    return lambda lines: planner.triage(lines).failure_class


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="the training corpus")
    parser.add_argument("--holdout", type=Path, default=HOLDOUT, help="logs never used to write a rule")
    parser.add_argument("--planner-base-url", help="OpenAI-compatible endpoint tried on the unknowns")
    parser.add_argument("--planner-model", default="gpt-4o-mini")
    parser.add_argument("--json", type=Path, help="write every log's outcome here")
    parser.add_argument("--list", action="store_true", help="print every log that is not right")
    args = parser.parse_args(argv)
    sets = {"training corpus": args.corpus, "holdout": args.holdout}
    try:
        logs = {title: load_corpus(path) for title, path in sets.items() if path.is_dir()}
    except CorpusError as err:
        print(err, file=sys.stderr)
        return 2
    llm = llm_triage(args.planner_base_url, args.planner_model) if args.planner_base_url else None
    every: dict[str, list[Scored]] = {}
    for title, group in logs.items():
        results = every[title] = score(group, llm)
        print(f"## {title} ({sets[title].relative_to(ROOT) if sets[title].is_relative_to(ROOT) else sets[title]})\n")
        print(table(results) + "\n")
        if args.list:
            for r in results:
                if r.outcome != "right":
                    print(
                        f"{r.outcome:7} {r.name}: expected {r.expected}, got {r.got}"
                        + (f", llm {r.llm}" if r.llm else "")
                    )
    if args.json:
        args.json.write_text(
            json.dumps({t: [asdict(r) for r in rs] for t, rs in every.items()}, indent=1) + "\n", encoding="utf-8"
        )
    return 1 if any(r.outcome == "wrong" for rs in every.values() for r in rs) else 0


if __name__ == "__main__":
    sys.exit(main())
