"""The table of README.md from run.sh's output files: ``python summary.py DIR``."""

from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path


def parse(path: Path) -> dict[str, tuple[float, int]]:
    """Per data set: the process's CPU µs per row and the number of segments cut."""
    out, name, cpu = {}, "", 0.0
    for line in path.read_text().splitlines():
        if line.startswith("## "):
            name = line.split()[1]
        elif line.strip().startswith("process"):
            cpu = float(line.split()[-1])
        elif "segments of" in line:
            found = re.search(r"; (\d+) segments of", line)
            assert found is not None, line
            out[name] = (cpu, int(found.group(1)))
    return out


def main() -> None:
    folder = Path(sys.argv[1])
    rounds = sorted({int(p.name.split("-")[0]) for p in folder.glob("*-old.txt")})
    runs = {(r, arm): parse(folder / f"{r}-{arm}.txt") for r in rounds for arm in ("old", "new")}
    print("| data set | segments, before | segments, after | CPU µs/row after / before (per round) | median |")
    print("|---|---|---|---|---|")
    for name in runs[(rounds[0], "old")]:
        ratios = [runs[(r, "new")][name][0] / runs[(r, "old")][name][0] for r in rounds]
        before = ", ".join(str(runs[(r, "old")][name][1]) for r in rounds)
        after = ", ".join(str(runs[(r, "new")][name][1]) for r in rounds)
        each = ", ".join(f"{x:.2f}" for x in ratios)
        print(f"| {name} | {before} | {after} | {each} | {statistics.median(ratios):.2f} |")


if __name__ == "__main__":
    main()
