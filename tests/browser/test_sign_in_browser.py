"""An agent signs in through the browser, end to end (SPEC §18): the SDK's own OAuth client
(`mcp.client.auth`) gets 401 from a real `aat serve`, reads the metadata, sends Chromium to the
authorization page where the logged-in operator names the agent and allows it with her
password, gets its token, and asks for an irreversible call that queues under the agent's
name; once the agent is revoked, its token gets 401 and its refresh token nothing.

Both ways a client says who it is: dynamic registration, and a Client ID Metadata Document
served over https by a site whose CA aat trusts through SSL_CERT_FILE.
"""

from __future__ import annotations

import asyncio
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import anyio.to_thread
import httpx
import httpx2
import pytest
from browser_helpers import MESSAGE, OPERATOR, PASSWORD, Server, add_to_store, new_card, serve_env
from client_documents import DocumentServer, document_server
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from playwright.sync_api import Page, expect
from serving import aat_serve, free_port

pytestmark = pytest.mark.browser
AGENT = "sdk-laptop"


class Memory:
    """The SDK client's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Callback:
    """The client's loopback redirect URI: records the code the browser brings back."""

    def __init__(self) -> None:
        self.results: queue.Queue[dict[str, list[str]]] = queue.Queue()
        results = self.results

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                results.put(parse_qs(urlsplit(self.path).query))
                body = b"signed in: you can close this window"
                self.send_response(200)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/callback"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


class SignedInCall(threading.Thread):
    """The SDK's OAuth client asking for `run_tool_confirmed` of outbox send-message, in the
    background (sync Playwright holds this thread's event loop). `authorize_urls` receives
    the URL the client wants the browser to open."""

    def __init__(self, mcp_url: str, callback: Callback, document_url: str | None) -> None:
        super().__init__(daemon=True)
        self.mcp_url = mcp_url
        self.callback = callback
        self.storage = Memory()
        self.authorize_urls: queue.Queue[str] = queue.Queue()
        self.metadata = OAuthClientMetadata(
            client_name="SDK test client",
            redirect_uris=[callback.url],  # type: ignore[list-item]
            token_endpoint_auth_method="none" if document_url else None,
        )
        self.document_url = document_url
        self.result: dict[str, Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = asyncio.run(self._call())
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error = exc

    async def _redirect(self, url: str) -> None:
        self.authorize_urls.put(url)

    async def _code(self) -> AuthorizationCodeResult:
        query = await anyio.to_thread.run_sync(lambda: self.callback.results.get(timeout=60))
        # The SDK's client checks `iss` (RFC 9207) against the issuer it discovered.
        issuer = query.get("iss", [None])[0]
        return AuthorizationCodeResult(code=query["code"][0], state=query["state"][0], iss=issuer)

    async def _call(self) -> dict[str, Any]:
        auth = OAuthClientProvider(
            server_url=self.mcp_url,
            client_metadata=self.metadata,
            storage=self.storage,
            redirect_handler=self._redirect,
            callback_handler=self._code,
            client_metadata_url=self.document_url,
        )
        http = httpx2.AsyncClient(auth=auth, timeout=60)
        async with http, Client(streamable_http_client(self.mcp_url, http_client=http)) as client:
            arguments = {"tool": "outbox", "action": "send-message", "args": MESSAGE}
            result = await client.call_tool("run_tool_confirmed", arguments)
            assert result.structured_content is not None
            return dict(result.structured_content)

    def answer(self, timeout: float = 60) -> dict[str, Any]:
        self.join(timeout)
        if self.error is not None:
            raise self.error
        assert self.result is not None, "the MCP call did not return"
        return self.result


@pytest.fixture
def docs(tmp_path: Path) -> Iterator[DocumentServer]:
    """An https site for client metadata documents."""
    with document_server(tmp_path) as served:
        yield served


@pytest.fixture
def server(tmp_path: Path, docs: DocumentServer) -> Iterator[Server]:
    """`aat serve` with operator alice and one minted agent token (so `/mcp` answers 401),
    trusting the documents site's CA and allowing client documents on loopback."""
    home, port = tmp_path / "aat-home", free_port()
    env = serve_env(home, port)
    env.update({"SSL_CERT_FILE": str(docs.ca_file), "AAT_OAUTH_LOOPBACK_CLIENTS": "1"})
    add_to_store(home, [(OPERATOR, None)], agents={"ci-bot": OPERATOR})
    log = tmp_path / "serve.log"
    with aat_serve(env=env, port=port, log=log) as url:
        yield Server(url=url, port=port, home=home, log=log, env=env)


@pytest.mark.parametrize("style", ["registration", "document"])
def test_the_sdk_client_signs_in_through_the_browser(
    page: Page, server: Server, docs: DocumentServer, style: str
) -> None:
    callback = Callback()
    document_url = None
    if style == "document":
        document_url = docs.client_id()
        docs.documents["/client.json"] = {
            "client_id": document_url,
            "client_name": "SDK test client",
            "redirect_uris": [callback.url],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        }
    call = SignedInCall(f"{server.url}/mcp", callback, document_url)
    call.start()
    try:
        _allow_in_the_browser(page, server, call.authorize_urls.get(timeout=30), callback)
        card, job_id = new_card(_approvals(page, server))
        expect(card).to_contain_text(AGENT)
        expect(card).to_contain_text("outbox send-message")
        card.locator(".approve-form input[name=password]").fill(PASSWORD)
        card.get_by_role("button", name="Approve", exact=True).click()
        answer = call.answer()
        assert answer["status"] == "succeeded", answer
        assert answer["job"] == job_id
        page.goto(f"{server.url}/jobs/{job_id}")
        expect(page.locator("main")).to_contain_text(AGENT)
        _revoke_and_check(page, server, call)
    finally:
        callback.close()
    assert docs.fetched == (["/client.json"] if style == "document" else [])


def _approvals(page: Page, server: Server) -> Page:
    page.goto(f"{server.url}/approvals")
    return page


def _allow_in_the_browser(page: Page, server: Server, url: str, callback: Callback) -> None:
    """The operator, logged in, opens the URL the client gave, names the agent, allows it."""
    assert url.startswith(f"{server.url}/authorize?")
    page.goto(url)
    assert urlsplit(page.url).path == "/agents/connect"
    expect(page.locator("#client-name")).to_have_text("SDK test client")
    expect(page.locator("#redirect-uri")).to_have_text(callback.url)
    page.fill("input[name=agent]", AGENT)
    page.fill("input[name=password]", PASSWORD)
    page.get_by_role("button", name="Allow").click()
    page.wait_for_url(f"{callback.url}?**")
    expect(page.locator("body")).to_contain_text("signed in")


def _revoke_and_check(page: Page, server: Server, call: SignedInCall) -> None:
    """Revoke the agent on the Agents page: its access token gets 401, its refresh nothing."""
    tokens = call.storage.tokens
    client = call.storage.client
    assert tokens is not None and tokens.refresh_token and client is not None
    mcp = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    page.goto(f"{server.url}/agents")
    row = page.locator(f'tr[data-agent="{AGENT}"]')
    expect(row).to_contain_text(OPERATOR)  # the operator who allowed it owns it
    row.get_by_role("button", name="Revoke").click()
    expect(page.locator("p.notice")).to_contain_text(f"Revoked agent {AGENT}.")
    refused = httpx.post(
        f"{server.url}/mcp",
        json=ping,
        headers={**mcp, "Authorization": f"Bearer {tokens.access_token}"},
        timeout=10,
    )
    assert refused.status_code == 401
    assert "resource_metadata=" in refused.headers["www-authenticate"]
    form = {"grant_type": "refresh_token", "refresh_token": tokens.refresh_token}
    form["client_id"] = client.client_id
    if client.client_secret:
        form["client_secret"] = client.client_secret
    refreshed = httpx.post(f"{server.url}/token", data=form, timeout=10)
    assert refreshed.status_code == 400
    assert refreshed.json()["error"] == "invalid_grant"


OPENCODE = Path(__file__).parents[1] / "mcp" / "node" / "node_modules" / ".bin" / "opencode"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def opencode_env(tmp_path: Path) -> dict[str, str]:
    """opencode's environment: its own HOME and XDG dirs, nothing fetched from the network."""
    home = tmp_path / "oc-home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AAT_", "OPENCODE_", "XDG_"))}
    env.update(
        {
            "HOME": str(home),
            "XDG_CONFIG_HOME": str(home / ".config"),
            "XDG_DATA_HOME": str(home / ".local" / "share"),
            "XDG_CACHE_HOME": str(home / ".cache"),
            "XDG_STATE_HOME": str(home / ".local" / "state"),
            "OPENCODE_DISABLE_MODELS_FETCH": "1",
            "OPENCODE_DISABLE_AUTOUPDATE": "1",
            "OPENCODE_DISABLE_SHARE": "1",
            "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
            "OPENCODE_DISABLE_LSP_DOWNLOAD": "1",
            "OPENCODE_DISABLE_CLAUDE_CODE": "1",
            "npm_config_registry": "http://127.0.0.1:9/",
            # No browser to open: opencode prints the URL, which Chromium is sent to here.
            "BROWSER": "/bin/true",
        }
    )
    return env


@pytest.mark.integration
def test_opencode_signs_in_headless_with_the_printed_block(
    page: Page, server: Server, tmp_path: Path
) -> None:
    """`aat config opencode --url URL --sign-in` pasted as is; `opencode mcp auth aat` prints
    the authorization URL (no browser here), Chromium allows it, and opencode connects."""
    env, project = opencode_env(tmp_path), tmp_path / "project"
    project.mkdir()
    url = f"{server.url}/mcp"
    block = subprocess.run(
        [sys.executable, "-m", "webplatform", "config", "opencode", "--url", url, "--sign-in"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
        env=env,
    ).stdout
    (project / "opencode.json").write_text(block)
    log = tmp_path / "opencode-auth.log"
    with log.open("wb") as out:
        auth = subprocess.Popen(
            [str(OPENCODE), "mcp", "auth", "aat"],
            cwd=project,
            env={**env, "PWD": str(project)},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        page.goto(_printed(log, re.escape(server.url) + r"/authorize\?" + URL_CHARS, auth))
        expect(page.locator("#redirect-uri")).to_contain_text("http://127.0.0.1:19876/")
        page.fill("input[name=agent]", "opencode-laptop")
        page.fill("input[name=password]", PASSWORD)
        page.get_by_role("button", name="Allow").click()
        expect(page.locator("body")).to_contain_text("OpenCode is now connected")
        assert auth.wait(timeout=60) == 0, log.read_text()
    finally:
        if auth.poll() is None:
            auth.kill()
            auth.wait()
    listed = subprocess.run(
        [str(OPENCODE), "mcp", "list"],
        cwd=project,
        env={**env, "PWD": str(project)},
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert "aat connected" in ANSI.sub("", listed.stdout + listed.stderr)
    page.goto(f"{server.url}/agents")
    expect(page.locator('tr[data-agent="opencode-laptop"]')).to_contain_text(OPERATOR)


CLAUDE = OPENCODE.parent / "claude"
URL_CHARS = r"[A-Za-z0-9%._~:/?#@!$&'()*+,;=-]+"


def claude_env(tmp_path: Path) -> dict[str, str]:
    """Claude Code's environment: a throwaway HOME, nothing on the network but aat."""
    home = tmp_path / "cc-home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CLAUDE", "ANTHROPIC", "AAT_"))}
    return env | {
        "HOME": str(home),
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "BROWSER": "/bin/true",  # it prints the URL too; Chromium is sent there here
    }


@pytest.mark.integration
def test_claude_code_signs_in_headless_as_a_pre_registered_client(
    page: Page, server: Server, tmp_path: Path
) -> None:
    """Claude Code names itself by a client document on claude.ai, which aat cannot fetch
    offline; registered at aat's /register with a fixed callback port instead, `claude mcp
    login` (in a pseudo-terminal: it wants one) prints the URL, Chromium allows it, and
    `claude mcp list` shows aat connected."""
    env, port = claude_env(tmp_path), free_port()
    callback = f"http://localhost:{port}/callback"
    registered = httpx.post(
        f"{server.url}/register",
        json={"redirect_uris": [callback], "client_name": "Claude Code"},
        timeout=10,
    ).json()
    add = [str(CLAUDE), "mcp", "add", "--scope", "user", "--transport", "http"]
    add += ["--client-id", registered["client_id"], "--callback-port", str(port)]
    subprocess.run([*add, "aat", f"{server.url}/mcp"], env=env, check=True, timeout=60)
    log = tmp_path / "claude-login.log"
    with log.open("wb") as out:
        login = subprocess.Popen(
            ["script", "-q", "-c", f"{CLAUDE} mcp login aat", "/dev/null"],
            cwd=tmp_path,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        page.goto(_printed(log, re.escape(server.url) + r"/authorize\?" + URL_CHARS, login))
        expect(page.locator("#client-name")).to_have_text("Claude Code")
        page.fill("input[name=agent]", "claude-laptop")
        page.fill("input[name=password]", PASSWORD)
        page.get_by_role("button", name="Allow").click()
        page.wait_for_url(f"{callback}?**")
        assert login.wait(timeout=60) == 0, log.read_text(errors="replace")
    finally:
        if login.poll() is None:
            login.kill()
            login.wait()
    assert 'Authenticated with "aat"' in ANSI.sub("", log.read_text(errors="replace"))
    listed = subprocess.run(
        [str(CLAUDE), "mcp", "list"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )
    assert "aat: " in listed.stdout and "Connected" in listed.stdout, listed.stdout
    page.goto(f"{server.url}/agents")
    expect(page.locator('tr[data-agent="claude-laptop"]')).to_contain_text(OPERATOR)


def _printed(log: Path, pattern: str, proc: subprocess.Popen[bytes]) -> str:
    """The first match of `pattern` in the process's output, once it is there."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = ANSI.sub("", log.read_text(errors="replace"))
        found = re.search(pattern, text)
        if found:
            return found.group(0)
        assert proc.poll() is None, text
        time.sleep(0.3)
    raise AssertionError(f"no authorization URL printed:\n{log.read_text(errors='replace')}")
