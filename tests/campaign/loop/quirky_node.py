"""The simulated node behind a launcher that misbehaves the way real servers do: it
silently drops a flag it was given, or quietly changes a setting nobody asked for.
The campaign only sees the command it launched and what the server reports.

    python -m tests.campaign.loop.quirky_node [--ignore FLAG]... [--also-when FLAG:OTHER=VALUE]... \
        -- <tools.simnode arguments>
"""

from __future__ import annotations

import sys


def rewrite(argv: list[str]) -> list[str]:
    split = argv.index("--")
    quirks, rest = argv[:split], argv[split + 1 :]
    ignore, also = [], []
    for opt, value in zip(quirks[::2], quirks[1::2]):
        if opt == "--ignore":
            ignore.append("--" + value)
        elif opt == "--also-when":
            when, _, setting = value.partition(":")
            key, _, val = setting.partition("=")
            also.append(("--" + when, ["--" + key, val]))
        else:
            raise SystemExit(f"quirky_node: unknown option {opt}")
    out: list[str] = []
    skip = False
    for i, token in enumerate(rest):
        if skip:
            skip = False
            continue
        if token in ignore:  # drop the flag and its value, if it has one
            skip = i + 1 < len(rest) and not rest[i + 1].startswith("--")
            continue
        out.append(token)
    for when, extra in also:
        if when in rest:
            out += extra
    return out


def main() -> int:
    from tools.simnode.__main__ import main as simnode

    return simnode(rewrite(sys.argv[1:]))


if __name__ == "__main__":
    sys.exit(main())
