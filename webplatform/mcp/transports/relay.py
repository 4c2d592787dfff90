"""`aat mcp --url URL`: the stdio bridge as a thin client of a running `aat serve`'s `/mcp`.

Standard library only, like the local-socket relay (`transports.handoff`): the server does all
MCP work, this process moves JSON-RPC messages between stdio and the server's streamable HTTP
endpoint (`webplatform.mcp.transports.upstream`; the messages it makes itself are in
`webplatform.mcp.transports.relay_messages`), so it answers its first message in milliseconds and
holds a few MB. Each line the client writes is POSTed with the bearer token from
`AAT_AGENT_TOKEN`; each message of the answer (a JSON body, or an SSE stream whose progress
notifications and server requests, such as an elicitation, come before the response) is
written to stdout as it arrives, and the client's answers to server requests are POSTed
back. Requests travel concurrently, a thread each, so a call held for an operator does not
hold up a `job_status` sent meanwhile.

Both protocol eras pass through unchanged: a legacy session (`initialize`) keeps the
server's `Mcp-Session-Id`, opens its notification stream (GET) once the client says
`notifications/initialized`, is reopened with the client's own `initialize` when the
server lost it (a restart), and is ended with a DELETE when the relay exits; a sessionless
request (2026-07-28, the version in its `_meta`) goes with its version and method as
headers, and a client's cancel of one closes its POST, which is how that era cancels.

It opens no database, reads no registry and needs no `AAT_HOME`: it works for an OS user who
cannot read the server's files, which is the point (an agent with a shell cannot reach the
approvals). Failures to start (server down, a URL that is not aat, a missing or refused
token) exit 1 with one line on stderr and nothing on stdout, found by a `server/discover`
sent at start beside the client's first message: MCP clients show a server that failed to
start, with its stderr. Once serving, a lost server or a revoked token becomes a tool error
(`isError`) that names the cause, so the model can tell the user. At the end of its input
the relay still answers every request it read (up to the approval wait and 10 s).
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
import time
from typing import Any

from webplatform.mcp.transports.relay_messages import (
    INVALID_REQUEST,
    PARSE_ERROR,
    PROBE_ID,
    Gate,
    Output,
    dumps,
    error_message,
    failed_answer,
    is_answer_to,
    not_aat,
    probe_message,
    stdin_lines,
)
from webplatform.mcp.transports.upstream import (
    EXCHANGE_ERRORS,
    SESSION_HEADER,
    VERSION_HEADER,
    Endpoint,
    Exchange,
    Pool,
    RelayError,
    explain,
    messages,
    modern_version,
    read_message,
    request_headers,
    sse_data,
    unreachable,
)

# Requests answered by a stream that lasts as long as the client wants it: not waited for
# at the end of input.
STREAM_METHODS = ("subscriptions/listen",)
# A server that takes longer than this to say who it is is not one to forward to.
PROBE_TIMEOUT_S = 30.0
# A notification stream that breaks is reopened this many times in a row, this far apart.
LISTEN_ATTEMPTS, LISTEN_RETRY_S = 3, 1.0
DELETE_TIMEOUT_S = 2.0


class SessionLost(Exception):
    """The server answered 404 to the legacy session `args[0]`: it restarted, or let the
    session expire."""


class Call:
    """A request of the client's on its way to the server."""

    def __init__(self, message: dict[str, Any], pool: Pool) -> None:
        self.id: Any = message["id"]
        self.method: str = message["method"]
        self.modern = modern_version(message) is not None
        self.exchange = Exchange(pool)
        self.thread: threading.Thread | None = None
        self.cancelled = False


class Session:
    """The legacy era's session: the server's id for it and the version `initialize` agreed."""

    def __init__(self) -> None:
        self.id: str | None = None
        self.version: str | None = None
        self.listening = False
        self.lock = threading.Lock()
        # Cleared while an `initialize` is in flight: a client that writes its next messages
        # without waiting for the answer (`printf ... | aat mcp`) has them sent with the
        # session.
        self.settled = threading.Event()
        self.settled.set()
        # The client's `initialize` (message, line): a lost session is reopened with it.
        self.opening: tuple[dict[str, Any], bytes] | None = None
        self.reopening = threading.Lock()

    def current(self, message: dict[str, Any]) -> tuple[str | None, str | None]:
        """(session id, negotiated version) to send `message` with, once no `initialize` is
        in flight; `initialize` itself and a sessionless message do not wait."""
        if message.get("method") != "initialize" and modern_version(message) is None:
            self.settled.wait()
        with self.lock:
            return self.id, self.version


class Relay:
    """One stdio client forwarded to aat's `/mcp` until its input ends."""

    def __init__(self, endpoint: Endpoint, *, drain_s: float) -> None:
        self.endpoint = endpoint
        self.pool = Pool(endpoint)
        self.gate = Gate()
        self.finished = threading.Event()
        self.out = Output(self.gate, self.finished)
        self.session = Session()
        self.calls: dict[Any, Call] = {}
        self.lock = threading.Lock()
        self.drain_s = drain_s
        self.modern: str | None = None  # the sessionless version the client last used

    def run(self) -> int:
        """Relay until the client's input ends (and its requests are answered) or the server
        proves unusable; the exit code."""
        threading.Thread(target=self._probe, name="aat-relay-probe", daemon=True).start()
        threading.Thread(target=self._read, name="aat-relay-in", daemon=True).start()
        try:
            self.finished.wait()
        finally:
            self._end_session()
            self.pool.close()
        if self.gate.failure is not None:
            sys.stderr.write(f"aat mcp --url: {self.gate.failure}\n")
            return 1
        return 0

    # The server's identity, found beside the client's first message.

    def _probe(self) -> None:
        try:
            failure = self._check_server()
        except EXCHANGE_ERRORS as exc:
            failure = unreachable(self.endpoint.url, exc)
        if failure is None:
            self.gate.open()
            return
        self.gate.fail(failure)
        self.finished.set()

    def _check_server(self) -> str | None:
        """Why the URL is not a usable aat (a `server/discover` of its own), or None."""
        probe = probe_message()
        headers = self.endpoint.headers(request_headers(probe, session=None, version=None))
        url = self.endpoint.url
        with Exchange(self.pool).open(
            "POST", headers, dumps(probe), timeout=PROBE_TIMEOUT_S
        ) as response:
            for data in messages(response):
                answer = read_message(data)
                if answer is not None and is_answer_to(answer, PROBE_ID):
                    return not_aat(url, answer)
            return explain(url, self.endpoint.token, response, response.read())

    # The client's input.

    def _read(self) -> None:
        for line in stdin_lines():
            if self.finished.is_set():
                return
            self._dispatch(line)
        self._drain()
        self.gate.wait()  # a server that failed the check still says why, input or not
        self.finished.set()

    def _dispatch(self, line: bytes) -> None:
        """Forward one line of the client's according to what it is."""
        try:
            message = json.loads(line)
        except ValueError as exc:
            text = f"Parse error: {str(exc)[:200]}; send one JSON-RPC message per line"
            self.out.send(error_message(None, PARSE_ERROR, text))
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            text = "Invalid Request: not a JSON-RPC 2.0 request, notification or response"
            self.out.send(error_message(None, INVALID_REQUEST, text))
        elif isinstance(message.get("method"), str) and "id" in message:
            self._start(message, line)
        elif isinstance(message.get("method"), str):
            self._notify(message, line)
        else:
            self._post(message, line)  # the client's answer to a server request

    def _drain(self) -> None:
        """Wait for the requests read before the end of input, at most `drain_s`."""
        deadline = time.monotonic() + self.drain_s
        while (left := deadline - time.monotonic()) > 0:
            with self.lock:
                waited = [c for c in self.calls.values() if c.method not in STREAM_METHODS]
            if not waited:
                return
            thread = waited[0].thread
            if thread is not None:
                thread.join(left)

    # Requests: a thread each.

    def _start(self, message: dict[str, Any], line: bytes) -> None:
        if (version := modern_version(message)) is not None:
            self.modern = version
        if message["method"] == "initialize":
            self.session.settled.clear()
            self.session.opening = (message, line)
        call = Call(message, self.pool)
        call.thread = threading.Thread(
            target=self._serve, args=(call, message, line), name="aat-relay-call", daemon=True
        )
        with self.lock:
            self.calls[call.id] = call
        call.thread.start()

    def _serve(self, call: Call, message: dict[str, Any], line: bytes) -> None:
        try:
            failure = self._exchange(call, message, line)
        except EXCHANGE_ERRORS as exc:
            failure = None if call.cancelled else unreachable(self.endpoint.url, exc)
        finally:
            with self.lock:
                if self.calls.get(call.id) is call:
                    del self.calls[call.id]
            if call.method == "initialize":
                self.session.settled.set()
        if failure is not None and not call.cancelled:
            self.out.send(failed_answer(call.id, call.method, failure, modern=call.modern))

    def _exchange(self, call: Call, message: dict[str, Any], line: bytes) -> str | None:
        """`_forward`, sent once more in a new session when the server lost the first (it
        never saw the request, so it runs at most once)."""
        try:
            return self._forward(call, message, line)
        except SessionLost as lost:
            if self._reopen(lost.args[0]):
                with contextlib.suppress(SessionLost):
                    return self._forward(call, message, line)
        return (
            f"aat at {self.endpoint.url} no longer knows this session and did not open a new "
            "one: restart the MCP client"
        )

    def _forward(self, call: Call, message: dict[str, Any], line: bytes) -> str | None:
        """POST one request and write its answer's messages as they come; None once its
        answer is written, else why there is none."""
        session, version = self.session.current(message)
        headers = request_headers(message, session=session, version=version)
        with call.exchange.open("POST", self.endpoint.headers(headers), line) as response:
            if response.status == 404 and SESSION_HEADER in headers:
                response.read()
                raise SessionLost(session)
            offered = response.getheader(SESSION_HEADER) if call.method == "initialize" else None
            for data in messages(response):
                answer = read_message(data)
                if answer is None:
                    return explain(self.endpoint.url, self.endpoint.token, response, data)
                if not is_answer_to(answer, call.id):
                    self.out.write(data)
                    continue
                if answer.get("id") != call.id:
                    answer["id"] = call.id
                    data = dumps(answer)
                if offered is not None and isinstance(answer.get("result"), dict):
                    self._adopt_session(offered, answer["result"])
                if not call.cancelled:
                    self.out.write(data)
                return None
            if response.status < 300:
                return (
                    f"aat at {self.endpoint.url} ended its answer to {call.method} without a result"
                )
            return explain(self.endpoint.url, self.endpoint.token, response, response.read())

    def _adopt_session(self, session_id: str, result: dict[str, Any]) -> None:
        version = result.get("protocolVersion")
        with self.session.lock:
            self.session.id = session_id
            self.session.version = version if isinstance(version, str) else None

    def _reopen(self, stale: str) -> bool:
        """Open a new session in place of `stale`, with the client's own `initialize` and
        `initialized`; True when there is one (another thread may have opened it already)."""
        with self.session.reopening:
            with self.session.lock:
                if self.session.id != stale:
                    return self.session.id is not None
                opening = self.session.opening
            if opening is None or not self._open_session(*opening):
                return False
        initialized = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        self._post(initialized, dumps(initialized))
        self._listen_once()
        return True

    def _open_session(self, message: dict[str, Any], line: bytes) -> bool:
        headers = self.endpoint.headers(request_headers(message, session=None, version=None))
        try:
            with Exchange(self.pool).open("POST", headers, line) as response:
                offered = response.getheader(SESSION_HEADER)
                for data in messages(response):
                    answer = read_message(data)
                    if answer is not None and is_answer_to(answer, message.get("id")):
                        result = answer.get("result")
                        if offered is None or not isinstance(result, dict):
                            return False
                        self._adopt_session(offered, result)
                        return True
        except EXCHANGE_ERRORS:
            pass
        return False

    # Notifications and answers to server requests: in order, on the reading thread.

    def _notify(self, message: dict[str, Any], line: bytes) -> None:
        if message["method"] == "notifications/cancelled":
            params = message.get("params")
            target = params.get("requestId") if isinstance(params, dict) else None
            with self.lock:
                call = self.calls.get(target)
            if call is not None:
                call.cancelled = True
                if call.modern:  # the sessionless era cancels by closing the request's stream
                    call.exchange.abort()
                    return
        accepted = self._post(message, line)
        if accepted and message["method"] == "notifications/initialized":
            self._listen_once()

    def _post(self, message: dict[str, Any], line: bytes) -> bool:
        """POST a message that gets no answer of its own; True when the server took it."""
        session, version = self.session.current(message)
        if session is None and modern_version(message) is None:
            if self.modern is None:
                return False  # neither a session nor a sessionless version to send it with
            version = self.modern
        headers = request_headers(message, session=session, version=version)
        try:
            with Exchange(self.pool).open("POST", self.endpoint.headers(headers), line) as answer:
                answer.read()
                return answer.status < 300
        except EXCHANGE_ERRORS:
            return False

    # The legacy session's notification stream and its end.

    def _listen_once(self) -> None:
        with self.session.lock:
            if self.session.listening or self.session.id is None:
                return
            self.session.listening = True
        threading.Thread(target=self._listen, name="aat-relay-listen", daemon=True).start()

    def _listen(self) -> None:
        """Forward the server's messages outside any request (the GET stream) while the
        session lasts: a broken stream is reopened, a lost session too. After
        `LISTEN_ATTEMPTS` failures in a row (the server is down) it stops; the next request
        that reopens the session starts it again."""
        try:
            failures = 0
            while failures < LISTEN_ATTEMPTS and not self.finished.is_set():
                with self.session.lock:
                    session, version = self.session.id, self.session.version
                try:
                    refused = self._stream(session, version)
                except EXCHANGE_ERRORS:
                    failures += 1
                    self.finished.wait(LISTEN_RETRY_S)
                    continue
                failures = 0
                if refused is None:  # the server ended the stream: open it again, calmly
                    self.finished.wait(LISTEN_RETRY_S)
                elif not (refused == 404 and session and self._reopen(session)):
                    self._no_stream(f"HTTP {refused}")
                    return
        finally:
            with self.session.lock:
                self.session.listening = False

    def _stream(self, session: str | None, version: str | None) -> int | None:
        """Forward the session's GET stream until it ends; the HTTP status if the server
        offers none."""
        headers = {"Accept": "text/event-stream", SESSION_HEADER: session or ""}
        if version:
            headers[VERSION_HEADER] = version
        with Exchange(self.pool).open("GET", self.endpoint.headers(headers)) as stream:
            kind = stream.getheader("Content-Type") or ""
            if stream.status != 200 or not kind.startswith("text/event-stream"):
                stream.read()
                return stream.status
            for data in sse_data(stream):
                if read_message(data) is not None:
                    self.out.write(data)
        return None

    def _no_stream(self, why: str) -> None:
        if not self.finished.is_set():
            sys.stderr.write(
                f"aat mcp --url: no notification stream from {self.endpoint.url} ({why}); "
                "answers still arrive, but not resource updates outside a request\n"
            )

    def _end_session(self) -> None:
        """DELETE the legacy session, so the server frees it now rather than when it idles out."""
        with self.session.lock:
            session, version = self.session.id, self.session.version
        if session is None:
            return
        headers = {SESSION_HEADER: session, **({VERSION_HEADER: version} if version else {})}
        try:
            conn = self.endpoint.connect()
        except EXCHANGE_ERRORS:
            return
        try:
            assert conn.sock is not None
            conn.sock.settimeout(DELETE_TIMEOUT_S)
            conn.request("DELETE", self.endpoint.target, headers=self.endpoint.headers(headers))
            conn.getresponse().read()
        except EXCHANGE_ERRORS:
            pass
        finally:
            conn.close()


def _terminate(signum: int, frame: object) -> None:
    del frame
    raise SystemExit(128 + signum)


def run_relay(*, url: str, token: str, drain_s: float) -> int:
    """Run the relay (blocking), for `aat mcp --url`; returns the exit code."""
    try:
        endpoint = Endpoint(url, token)
    except RelayError as exc:
        sys.stderr.write(f"aat mcp --url: {exc}\n")
        return 1
    signal.signal(signal.SIGTERM, _terminate)  # still end the session on the way out
    try:
        return Relay(endpoint, drain_s=drain_s).run()
    except KeyboardInterrupt:
        return 130
