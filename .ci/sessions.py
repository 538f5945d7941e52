"""Run every session plain `nox` runs, those tagged `parallel` two at a time.

The backends' conformance sessions wait on their engines (a Postgres, a Chroma
server, an emulator) more than on the CPU, so two at once take about half
their time on 2 cores. The others run one by one, as nox orders them: the
ones defined before the first `parallel` session first (the unit tests use
both cores themselves), the rest after. A `parallel` session's output is
printed whole when it ends. Exits 1 when any session fails.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

NOX = [sys.executable, "-m", "nox"]
LANES = 2


def run_alone(names: list[str]) -> bool:
    return not names or subprocess.run([*NOX, "-s", *names]).returncode == 0


def run_in_lanes(names: list[str]) -> bool:
    printing = threading.Lock()

    def run(name: str) -> bool:
        done = subprocess.run(
            [*NOX, "-s", name], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        with printing:
            print(done.stdout, end="", flush=True)
        return done.returncode == 0

    with ThreadPoolExecutor(LANES) as lanes:
        return all(list(lanes.map(run, names)))


def main() -> int:
    listed = subprocess.run([*NOX, "--list", "--json"], capture_output=True, text=True, check=True)
    sessions = json.loads(listed.stdout)  # the default sessions, in the noxfile's order
    names = [s["session"] for s in sessions]
    parallel = [s["session"] for s in sessions if "parallel" in s["tags"]]
    first = names.index(parallel[0]) if parallel else len(names)
    before = names[:first]
    after = [n for n in names[first:] if n not in parallel]
    ok = [run_alone(before), run_in_lanes(parallel), run_alone(after)]
    print(f"{len(names)} nox sessions, {len(parallel)} of them {LANES} at a time", flush=True)
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
