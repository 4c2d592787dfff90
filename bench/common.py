"""Shared pieces of the benchmarks: the machine, statistics, rows of the table, helpers.

Every figure is a median (or p95) over repeated runs; where a target is a ratio, both sides
are measured in the same run, alternating, so machine noise lands on both sides alike.
"""

from __future__ import annotations

import contextlib
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import webplatform

ROOT = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
EXAMPLES = Path(webplatform.__file__).parent / "examples"
HELLO = EXAMPLES / "tools" / "hello-world" / "main.py"
BENCH_REGISTRY = Path(__file__).resolve().parent / "registry"

# The lines of issue 35's table, in its order: a row naming one (`Report.add(issue=...)`) is
# listed again at the top of the results, beside its baseline measured in the same run.
ISSUE_35 = (
    "warm hello-world through `aat mcp`",
    "plain call, added over a direct spawn",
    "in-process `aat mcp` RSS after initialize",
    "first `capabilities {}` after start at 10,000 actions (B2 cold)",
    "B5 plain, 8 in flight",
    "`make fast` / `make test` on 2 cores",
    "tracing off (§23): B1 and B5 unchanged",
    "limits (§20): B1 and B5 unchanged",
    "upstream servers (§22): B1 and B5 unchanged",
)


@dataclass
class Row:
    """One line of the results table."""

    bench: str
    what: str
    measured: str
    baseline: str
    target: str
    met: bool | None  # None: reported, no target
    note: str = ""
    # The line of issue 35's table this row answers ("" for none); the results list these
    # rows first, in the issue's order, beside their same-run baselines.
    issue: str = ""


@dataclass
class Report:
    """What one benchmark found: table rows and free-text notes."""

    bench: str
    title: str
    rows: list[Row] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def add(
        self,
        what: str,
        measured: str,
        *,
        baseline: str = "",
        target: str = "",
        met: bool | None = None,
        note: str = "",
        issue: str = "",
    ) -> None:
        """Add a row (and print it at once, so a long run shows progress); `issue` names the
        line of issue 35's table it answers."""
        assert not issue or issue in ISSUE_35, issue
        row = Row(self.bench, what, measured, baseline, target, met, note, issue)
        self.rows.append(row)
        print(f"  {self.bench} {what}: {measured}  [{baseline}]  {target} {verdict(met)}")
        sys.stdout.flush()


def verdict(met: bool | None) -> str:
    """The table's word for a target."""
    return "—" if met is None else ("met" if met else "MISSED")


def machine() -> str:
    """Cores, CPU, Python and host, as the results file states them."""
    cpu = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{os.cpu_count()} cores ({cpu or platform.machine()}), "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}, "
        f"host {socket.gethostname()}, load avg {load}"
    )


def median_ms(values: list[float]) -> float:
    """Median of seconds, in milliseconds."""
    return statistics.median(values) * 1000


def p95_ms(values: list[float]) -> float:
    """95th percentile of seconds, in milliseconds (nearest rank)."""
    ordered = sorted(values)
    rank = max(0, int(round(0.95 * len(ordered))) - 1)
    return ordered[rank] * 1000


def ms(value: float) -> str:
    """Milliseconds for the table."""
    return f"{value:.1f} ms" if value < 100 else f"{value:.0f} ms"


def timed(fn: Callable[[], object]) -> float:
    """Seconds `fn()` took."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def alternate(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Run each side once per round, in rotating order; each side returns its own sample."""
    names = list(sides)
    out: dict[str, list[float]] = {n: [] for n in names}
    for i in range(rounds):
        shift = i % len(names)
        for name in names[shift:] + names[:shift]:
            out[name].append(sides[name]())
    return out


@contextlib.contextmanager
def temp_home(prefix: str) -> Iterator[Path]:
    """A fresh AAT_HOME for one benchmark, in a temporary folder of its own: what a bench
    puts beside it (`home.with_name(...)`: its caller's folder, a registry) goes with it."""
    with tempfile.TemporaryDirectory(prefix=f"aat-bench-{prefix}-") as tmp:
        home = Path(tmp) / prefix
        home.mkdir()
        yield home


def aat_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment for an `aat` process of a benchmark."""
    env = {**os.environ, "AAT_HOME": str(home), **extra}
    env.pop("AAT_DB_URL", None)
    return env


def aat_argv(*args: str) -> list[str]:
    """`aat ARGS` run with this interpreter (no reliance on PATH)."""
    return [PYTHON, "-m", "webplatform", *args]


def rss_mb(pid: int) -> float:
    """Resident set size of a process, in MB (from /proc)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    """CPU seconds (user and system, all threads) a process has used so far (from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_rss_mb(pid: int) -> float:
    """RSS of a process plus its children (for a launcher that execs a child)."""
    total = rss_mb(pid)
    with contextlib.suppress(OSError):
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            with contextlib.suppress(OSError, RuntimeError):
                total += tree_rss_mb(int(child))
    return total


def free_port() -> int:
    """A TCP port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def add_operator(home: Path, name: str, password: str) -> None:
    """`aat operator add NAME --password-stdin`, as a user would."""
    subprocess.run(
        aat_argv("operator", "add", name, "--password-stdin"),
        input=password + "\n",
        text=True,
        env=aat_env(home),
        check=True,
        capture_output=True,
    )


def wait_http(url: str, timeout_s: float = 60.0) -> None:
    """Wait until `url` answers 200."""
    import httpx

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError(f"{url} did not answer within {timeout_s} s")
        time.sleep(0.1)


@dataclass(frozen=True)
class Serving:
    """A running `aat serve` of a benchmark: its process id and its port."""

    pid: int
    port: int

    @property
    def mcp_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/mcp"


@contextlib.contextmanager
def aat_serve(home: Path) -> Iterator[Serving]:
    """`aat serve` on `home` and a free port, once it answers /healthz; stopped on exit."""
    port = free_port()
    proc = subprocess.Popen(
        aat_argv("serve", "--port", str(port)),
        env=aat_env(home),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_http(f"http://127.0.0.1:{port}/healthz")
        yield Serving(pid=proc.pid, port=port)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
