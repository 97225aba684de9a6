"""minigrad's CPU threading defaults, idle and beside a busy process.

    python -m benchmarks.threads [--workload demo|tiny|small|medium] [--steps 200]
                                 [--repeats 2] [--only idle,busy] [--json results.json]
                                 [--settings "old default,new default,single thread"]

Times a whole run, each in a fresh process (the threads of NumPy's BLAS are set per
process, on import), under three settings:

- ``old default``: BLAS on its own default threads, one per core (MINIGRAD_ONE_BLAS_THREAD=0);
- ``new default``: no variable set (minigrad puts BLAS on one thread and shares large work
  among the cores itself, see minigrad/backend/threads.py);
- ``single thread``: OPENBLAS_NUM_THREADS=1 (no thread of minigrad's either).

``--workload demo`` (the default) runs the quick start, ``python -m minigrad.demos.seq2seq
--task reverse --steps N``; tiny, small and medium run N training steps of the benchmarks'
transformer (benchmarks/workloads.py) and time the steps alone. Each setting runs idle and
beside a busy process: a CPU-bound loop in a subprocess that this program starts before
the run and kills after it (it also stops by itself after ``--busy-limit`` seconds). The
settings run in turn, ``--repeats`` rounds, so that all see the same machine; the table
gives the median and the spread of the wall seconds, and the ratio of the median to the
single thread's in the same condition. Speed is reported here, never asserted anywhere.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from minigrad.backend.threads import THREAD_VARIABLES
from benchmarks.timing import ROOT, machine_line


SETTINGS = {  # name: the variables set on top of an environment without thread settings
    "old default": {"MINIGRAD_ONE_BLAS_THREAD": "0"},
    "new default": {},
    "single thread": {"OPENBLAS_NUM_THREADS": "1"},
}
BASELINE = "single thread"

# a training step timed in the child: prints the seconds of the steps alone
_STEPS = """
import sys, time
from benchmarks import workloads
step = workloads.minigrad_step(workloads.SIZES[sys.argv[1]])
step()
start = time.perf_counter()
for _ in range(int(sys.argv[2])):
    step()
print("seconds", time.perf_counter() - start)
"""

# the busy neighbour: one core's worth of arithmetic, for at most argv[1] seconds
_BUSY = """
import sys, time
end = time.monotonic() + float(sys.argv[1])
x = 0
while time.monotonic() < end:
    for i in range(100000):
        x += i
"""


def environment(setting):
    """This process's environment without the thread variables (other OpenBLAS variables,
    such as OPENBLAS_CORETYPE, stay), plus ``setting``'s."""
    env = {k: v for k, v in os.environ.items()
           if k not in THREAD_VARIABLES and k != "MINIGRAD_ONE_BLAS_THREAD"}
    env.update(SETTINGS[setting])
    return env


def command(workload, steps, out):
    if workload == "demo":
        return [sys.executable, "-m", "minigrad.demos.seq2seq", "--task", "reverse",
                "--steps", str(steps), "--no-progress", "--out", out]
    return [sys.executable, "-c", _STEPS, workload, str(steps)]


def run_once(setting, workload, steps, busy, busy_limit):
    """(seconds, the demo's last line on its accuracy or None) of one run in a new process:
    the wall time of the demo, or the steps' own time."""
    neighbour = None
    if busy:
        neighbour = subprocess.Popen([sys.executable, "-c", _BUSY, str(busy_limit)])
        time.sleep(0.2)  # running before the measured process starts
    try:
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            done = subprocess.run(command(workload, steps, out), env=environment(setting),
                                  cwd=ROOT, capture_output=True, text=True, check=True)
            wall = time.perf_counter() - start
    finally:
        if neighbour is not None:
            neighbour.kill()
            neighbour.wait()
    lines = done.stdout.splitlines()
    seconds = [float(line.split()[1]) for line in lines if line.startswith("seconds ")]
    accuracy = [line.strip() for line in lines  # the demo's summary
                if re.search(r"exact match [0-9.]+%", line) and not line.startswith("step ")]
    return (seconds[-1] if seconds else wall), (accuracy[-1] if accuracy else None)


def measure(workload, steps, repeats, conditions, busy_limit, settings=tuple(SETTINGS)):
    """{(condition, setting): [seconds of each round]}, the settings in turn each round."""
    times, notes = {}, {}
    for round_ in range(repeats):
        for condition in conditions:
            for setting in settings:
                load = os.getloadavg()[0]  # others' work on the machine shows here
                seconds, accuracy = run_once(setting, workload, steps, condition == "busy",
                                             busy_limit)
                times.setdefault((condition, setting), []).append(seconds)
                notes[condition, setting] = accuracy
                print(f"  round {round_ + 1}: {condition:4} {setting:13} {seconds:8.2f} s "
                      f"(load average before: {load:.2f})", flush=True)
    return times, notes


def table(times, conditions, settings=tuple(SETTINGS)):
    rows = []
    for condition in conditions:
        base = statistics.median(times[condition, BASELINE])
        for setting in settings:
            runs = times[condition, setting]
            median = statistics.median(runs)
            rows.append(dict(condition=condition, setting=setting, median_s=median,
                             min_s=min(runs), max_s=max(runs), ratio=median / base))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workload", default="demo", choices=["demo", "tiny", "small",
                                                               "medium"])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--only", default="idle,busy")
    parser.add_argument("--busy-limit", type=float, default=900.0,
                        help="seconds after which the busy neighbour stops by itself")
    parser.add_argument("--json", default=None)
    parser.add_argument("--settings", default=",".join(SETTINGS),
                        help=f"which settings to run (the ratio needs {BASELINE!r})")
    args = parser.parse_args(argv)
    conditions = [c for c in args.only.split(",") if c]
    settings = [s.strip() for s in args.settings.split(",") if s.strip()]
    if BASELINE not in settings or any(s not in SETTINGS for s in settings):
        parser.error(f"--settings: choose among {', '.join(SETTINGS)}, {BASELINE!r} included")
    what = ("python -m minigrad.demos.seq2seq --task reverse --steps " + str(args.steps)
            if args.workload == "demo" else f"{args.steps} {args.workload} training steps")
    print(machine_line())
    print(f"workload: {what}; {args.repeats} rounds; load average before: "
          f"{', '.join(f'{x:.2f}' for x in os.getloadavg())}")
    times, notes = measure(args.workload, args.steps, args.repeats, conditions,
                           args.busy_limit, settings)
    rows = table(times, conditions, settings)
    print(f"\n{'condition':9}  {'setting':13}  {'median s':>9}  {'min..max s':>15}  "
          f"{'/ single':>8}")
    for r in rows:
        spread = f"{r['min_s']:.1f}..{r['max_s']:.1f}"
        print(f"{r['condition']:9}  {r['setting']:13}  {r['median_s']:9.2f}  {spread:>15}  "
              f"{r['ratio']:8.2f}")
    for (condition, setting), accuracy in notes.items():
        if accuracy:
            print(f"{condition} {setting}: {accuracy}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(workload=what, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
