"""B12: B1's and B5's plain calls with tracing off and on, side by side (SPEC §23).

Two `aat mcp` on the same `warm: false` hello-world, one with no `OTEL_*` variable (the
default) and one exporting its spans over OTLP/HTTP to a local receiver that drops them;
B1's and B5's shapes, alternating (bench/hotpath.py). The ratio is the cost of tracing on,
and bounds what tracing off can cost: off makes no span and imports no OpenTelemetry.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio

from bench import hotpath
from bench.b1_overhead import plain_registry
from bench.clients import aat_mcp
from bench.common import ISSUE_35, Report, temp_home

TITLE = "B1 and B5 (plain tool), tracing off vs on, side by side"


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
    with temp_home("b12-off") as off_home, temp_home("b12-on") as on_home, sink() as url:
        async with (
            aat_mcp(off_home, AAT_REGISTRY=str(plain_registry(off_home))) as off,
            aat_mcp(on_home, AAT_REGISTRY=str(plain_registry(on_home)), **tracing_env(url)) as on,
        ):
            single, many, cpu = await hotpath.compare_cpu(
                {"tracing off": (off, off_home), "tracing on": (on, on_home)}
            )
    b1, b5 = hotpath.ratio_rows(
        report,
        ("tracing on", "tracing off"),
        (single, many),
        label="plain aat mcp, tracing on / off",
        judged=False,
    )
    within = max(b1, b5) <= hotpath.TARGET
    report.add(
        "tracing off costs the hot path nothing: on / off, B1 and B5 sides",
        f"{b1:.3f}, {b5:.3f}",
        baseline="tracing off, the default (no span made, OpenTelemetry not imported)",
        target=f"on / off <= {hotpath.TARGET} on both (then off, cheaper than on, is too)",
        met=True if within else None,
        issue=ISSUE_35[6],
    )
    report.add(
        "plain: server CPU per call, tracing off / on",
        f"{cpu['tracing off']:.1f} / {cpu['tracing on']:.1f} ms",
    )
    report.notes.append(
        hotpath.note("B12", single, many)
        + " The `on` side exports every span over OTLP/HTTP to a local endpoint that drops "
        "them. A comparison of off against a build without the hooks is not made: with "
        "tracing off a call's hooks are a few tests of one flag (bench/NOTES.md), below what "
        "two processes side by side can resolve; on bounds off from above."
    )


def run(report: Report) -> None:
    """Entry point used by `python -m bench`."""
    anyio.run(measure, report)
