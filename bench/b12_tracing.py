"""B12: B5's plain side with tracing off and on, side by side (SPEC §23: off costs nothing).

Two `aat mcp` on the same `warm: false` hello-world, one with no `OTEL_*` variable (the
default) and one exporting its spans over OTLP/HTTP to a local receiver that drops them;
B5's 400 calls, 8 in flight, rotating between the sides and direct spawns. The ratio of the
two bridges is the cost of tracing on; each bridge against direct spawns is B5's plain row.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import anyio.to_thread
from mcp import Client

from bench.b1_overhead import direct_command, plain_registry, spawn_direct
from bench.b5_concurrency import CALLS, CONCURRENCY, in_parallel
from bench.clients import aat_mcp, body, server_pid
from bench.common import Report, cpu_s, temp_home

TITLE = "B5 plain (400 calls, 8 concurrent), tracing off vs on, side by side"
ROUNDS = 3


@contextmanager
def sink() -> Iterator[str]:
    """An OTLP/HTTP endpoint on a free loopback port that accepts and drops what it is sent."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *_: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def tracing_env(url: str) -> dict[str, str]:
    """The standard variables that send an `aat` process's spans to `url`."""
    return {
        "OTEL_EXPORTER_OTLP_ENDPOINT": url,
        "OTEL_TRACES_EXPORTER": "otlp",
        "OTEL_METRICS_EXPORTER": "none",
        "OTEL_SERVICE_NAME": "aat-bench",
    }


async def measure(report: Report) -> None:
    """Run B12 and add its rows to `report`."""
    errors: list[object] = []
    with temp_home("b12-off") as off_home, temp_home("b12-on") as on_home, sink() as url:
        argv, env, cwd = direct_command(str(off_home))
        limiter = anyio.CapacityLimiter(CONCURRENCY)

        async def direct() -> None:
            await anyio.to_thread.run_sync(lambda: spawn_direct(argv, env, cwd), limiter=limiter)

        async with (
            aat_mcp(off_home, AAT_REGISTRY=str(plain_registry(off_home))) as off,
            aat_mcp(on_home, AAT_REGISTRY=str(plain_registry(on_home)), **tracing_env(url)) as on,
        ):

            async def call(client: Client) -> None:
                result = await client.call_tool(
                    "run_tool", {"tool": "hello-world", "args": {"name": "bench"}}
                )
                if body(result).get("status") != "succeeded":
                    errors.append(body(result))

            sides: dict[str, Callable[[], Awaitable[None]]] = {
                "direct": direct,
                "off": lambda: call(off),
                "on": lambda: call(on),
            }
            for side in ("off", "on"):
                await sides[side]()
            servers = {
                "off": server_pid("webplatform mcp", off_home),
                "on": server_pid("webplatform mcp", on_home),
            }
            times, cpu = await _rotate(sides, servers)
    _rows(report, errors, times, cpu)


async def _rotate(
    sides: Mapping[str, Callable[[], Awaitable[None]]], servers: dict[str, int]
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """ROUNDS rounds of every side, the order rotated each round; wall s and server CPU ms."""
    times: dict[str, list[float]] = {name: [] for name in sides}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    names = list(sides)
    for i in range(ROUNDS):
        for side in names[i % 3 :] + names[: i % 3]:
            before = cpu_s(servers[side]) if side in servers else 0.0
            times[side].append(await in_parallel(sides[side]))
            if side in servers:
                cpu[side].append((cpu_s(servers[side]) - before) / CALLS * 1000)
    return times, cpu


def _rows(
    report: Report,
    errors: list[object],
    times: dict[str, list[float]],
    cpu: dict[str, list[float]],
) -> None:
    """The table rows: errors, each side against direct, on against off."""
    dm, off, on = (sorted(times[n])[ROUNDS // 2] for n in ("direct", "off", "on"))
    report.add("errors through the bridges", str(len(errors)), target="0", met=not errors)
    for name, value in (("off", off), ("on", on)):
        report.add(
            f"plain, tracing {name} / direct wall time",
            f"{value / dm:.3f} (bridge {value:.2f} s)",
            baseline=f"direct {dm:.2f} s",
        )
    report.add(
        "plain: tracing on / tracing off wall time",
        f"{on / off:.3f}",
        baseline=f"off {off:.2f} s, on {on:.2f} s",
    )
    report.add(
        "plain: server CPU per call, tracing off / on",
        f"{sorted(cpu['off'])[ROUNDS // 2]:.1f} / {sorted(cpu['on'])[ROUNDS // 2]:.1f} ms",
    )
    report.notes.append(
        f"B12: {ROUNDS} rounds per side, rotating; wall times (s): "
        + ", ".join(f"{n} {[round(x, 2) for x in times[n]]}" for n in times)
        + "."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
