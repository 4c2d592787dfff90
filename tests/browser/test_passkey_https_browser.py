"""Passkeys where operators are: the dashboard behind an HTTPS reverse proxy at its own name
(`AAT_DASHBOARD_URL=https://aat.test:PORT`), opened in Chromium with a virtual
authenticator. The passkey is made for `aat.test`, shown as such on the account page, and
approves a queued job there; the proxy is a small TLS-terminating one in this file, with a
throwaway certificate Chromium is told to trust by its key."""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from browser_helpers import (
    CHROMIUM,
    CHROMIUM_ARGS,
    OPERATOR,
    PASSWORD,
    Server,
    add_to_store,
    queue_directly,
    serve_env,
    wait_state,
)
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from playwright.sync_api import Page, Playwright, expect
from serving import aat_serve, free_port

pytestmark = pytest.mark.browser

HOST = "aat.test"


def _certificate(folder: Path) -> tuple[Path, Path, str]:
    """A throwaway certificate for HOST: its files, and its key's SPKI pin for Chromium."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, HOST)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(HOST)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = folder / "cert.pem", folder / "key.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    spki = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return cert_file, key_file, base64.b64encode(hashlib.sha256(spki).digest()).decode()


class TlsProxy(threading.Thread):
    """Terminates TLS on `port` and passes each request to `upstream`, one per connection,
    saying it came over https (`X-Forwarded-Proto`), as a reverse proxy in front of aat does."""

    def __init__(self, port: int, upstream: int, cert: Path, key: Path) -> None:
        super().__init__(daemon=True)
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.listener = socket.create_server(("127.0.0.1", port))
        self.upstream = upstream

    def run(self) -> None:
        while True:
            try:
                raw, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(raw,), daemon=True).start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            client = self.context.wrap_socket(raw, server_side=True)
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(65536)
                if not chunk:
                    return
                head += chunk
            top, rest = head.split(b"\r\n\r\n", 1)
            lines = [
                line for line in top.split(b"\r\n") if not line.lower().startswith(b"connection:")
            ]
            lines += [b"X-Forwarded-Proto: https", b"Connection: close"]
            server = socket.create_connection(("127.0.0.1", self.upstream))
            server.sendall(b"\r\n".join(lines) + b"\r\n\r\n" + rest)
            threading.Thread(target=_pipe, args=(client, server), daemon=True).start()
            _pipe(server, client)
        except (OSError, ssl.SSLError):
            raw.close()

    def close(self) -> None:
        self.listener.close()


def _pipe(source: socket.socket, sink: socket.socket) -> None:
    try:
        while chunk := source.recv(65536):
            sink.sendall(chunk)
    except OSError:
        pass
    finally:
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)


@pytest.fixture
def https_page(playwright: Playwright, tmp_path: Path) -> Iterator[tuple[Page, str, Server]]:
    """Alice logged in at https://aat.test:PORT through the proxy, with a virtual authenticator."""
    home, port, public = tmp_path / "aat-home", free_port(), free_port()
    base = f"https://{HOST}:{public}"
    env = serve_env(home, port)
    env.update(
        {
            "AAT_DASHBOARD_URL": base,
            "AAT_ALLOWED_HOSTS": f"{HOST}:{public}",
            "AAT_TRUSTED_PROXIES": "127.0.0.1",
        }
    )
    add_to_store(home, [(OPERATOR, None)])
    cert, key, pin = _certificate(tmp_path)
    proxy = TlsProxy(public, port, cert, key)
    proxy.start()
    args = CHROMIUM_ARGS + [
        f"--host-resolver-rules=MAP {HOST} 127.0.0.1",
        f"--ignore-certificate-errors-spki-list={pin}",
    ]
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=args)
    log = tmp_path / "serve.log"
    try:
        with aat_serve(env=env, port=port, log=log) as url:
            context = browser.new_context(viewport={"width": 1200, "height": 900})
            page = context.new_page()
            cdp = context.new_cdp_session(page)
            cdp.send("WebAuthn.enable")
            options = {"protocol": "ctap2", "transport": "internal", "hasResidentKey": True}
            options |= {"hasUserVerification": True, "isUserVerified": True}
            cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
            page.goto(f"{base}/login")
            page.fill("input[name=username]", OPERATOR)
            page.fill("input[name=password]", PASSWORD)
            page.get_by_role("button", name="Log in").click()
            page.wait_for_url(f"{base}/")
            yield page, base, Server(url=url, port=port, home=home, log=log, env=env)
            context.close()
    finally:
        browser.close()
        proxy.close()


def test_a_passkey_made_at_the_https_dashboard_is_for_its_host_and_approves_there(
    https_page: tuple[Page, str, Server],
) -> None:
    page, base, server = https_page
    page.goto(f"{base}/account")
    page.fill("input[name=label]", "phone")
    page.fill("#add-passkey input[name=password]", PASSWORD)
    page.get_by_role("button", name="Add a passkey").click()
    page.wait_for_url(f"{base}/account?done=added")
    row = page.locator("table.passkeys tbody tr").first
    expect(row).to_contain_text("phone")
    expect(row.locator(".rp-id")).to_have_text(HOST)

    job_id = queue_directly(server, subject="from the phone")
    page.goto(f"{base}/approvals")
    card = page.locator(f'article.card[data-job-id="{job_id}"]')
    with page.expect_request(f"{base}/jobs/{job_id}/approve") as sent:
        card.get_by_role("button", name="Approve", exact=True).click()  # password left empty
    assert "passkey=" in (sent.value.post_data or "")
    expect(page.locator("#notice")).to_contain_text(f"Approved job {job_id}.")
    wait_state(page, base, job_id, "succeeded")
    assert len(server.outbox()) == 1
    page.goto(f"{base}/jobs/{job_id}")
    expect(page.locator("ol.timeline")).to_contain_text("step-up: passkey")
