"""`python -m bench [B1 ...]`: run the benchmarks, print the table, write bench/RESULTS.md."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import time
import traceback

from bench.common import Report, machine
from bench.results import write_results

BENCHES = {
    "B1": "bench.b1_overhead",
    "B2": "bench.b2_discovery",
    "B3": "bench.b3_approval",
    "B4": "bench.b4_dashboard",
    "B5": "bench.b5_concurrency",
    "B6": "bench.b6_memory",
    "B7": "bench.b7_idle",
    "B9": "bench.b9_bridge_start",
    "B10": "bench.b10_namespaces",
    "B11": "bench.b11_rules",
    "B12": "bench.b12_tracing",
    "B13": "bench.b13_servers",
    "B14": "bench.b14_test_loop",
    "B15": "bench.b15_limits",
}


def main(argv: list[str] | None = None) -> int:
    """Run the chosen benchmarks (all by default); exit 1 if one crashed."""
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("ids", nargs="*", metavar="ID", help="B1 ... B7 (default: all)")
    parser.add_argument(
        "--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone"
    )
    ns = parser.parse_args(argv)
    ids = [i.upper() for i in ns.ids] or list(BENCHES)
    unknown = [i for i in ids if i not in BENCHES]
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; choose from {', '.join(BENCHES)}")
    for noisy in ("httpx", "alembic"):  # request and migration logs would bury the table
        logging.getLogger(noisy).setLevel(logging.WARNING)
    print(f"machine: {machine()}")
    reports: list[Report] = []
    crashed = False
    started = time.monotonic()
    for bench_id in ids:
        module = importlib.import_module(BENCHES[bench_id])
        report = Report(bench_id, module.TITLE)
        print(f"{bench_id}: {module.TITLE}")
        sys.stdout.flush()
        t0 = time.monotonic()
        try:
            module.run(report)
        except Exception:
            crashed = True
            report.notes.append(f"{bench_id} crashed:\n\n```\n{traceback.format_exc()}```")
            traceback.print_exc()
        report.notes.append(f"{bench_id} took {time.monotonic() - t0:.0f} s.")
        reports.append(report)
    text = write_results(reports, full=set(ids) == set(BENCHES), write=not ns.no_write)
    print()
    print(text)
    print(f"total {time.monotonic() - started:.0f} s")
    return 1 if crashed else 0


if __name__ == "__main__":
    sys.exit(main())
