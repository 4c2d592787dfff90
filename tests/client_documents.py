"""An https server on loopback serving OAuth Client ID Metadata Documents, with a CA of its own
(point `SSL_CERT_FILE` at `ca_file` so aat trusts it, as it would a real client's site)."""

from __future__ import annotations

import datetime
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

# A name the certificate also covers, for a test whose resolver answers it with a public
# address first and loopback after (a DNS-rebinding server, which does not run here).
REBINDING_HOST = "rebind.example"


@dataclass
class DocumentServer:
    """Where the documents are served, the CA that signed its certificate, and the documents
    by path (change them while it runs)."""

    url: str
    ca_file: Path
    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    fetched: list[str] = field(default_factory=list)

    def client_id(self, path: str = "/client.json") -> str:
        """The client id (the document's URL) for `path`."""
        return self.url + path


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificates(folder: Path) -> tuple[Path, Path, Path]:
    """(CA certificate, server certificate, server key) files for 127.0.0.1 and localhost."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder()
        .subject_name(_name("aat test CA"))
        .issuer_name(_name("aat test CA"))
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    names = [
        x509.DNSName("localhost"),
        x509.DNSName(REBINDING_HOST),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
    ]
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name("localhost"))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    files = (folder / "ca.pem", folder / "server.pem", folder / "server.key")
    files[0].write_bytes(ca.public_bytes(pem))
    files[1].write_bytes(leaf.public_bytes(pem))
    files[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return files


@contextmanager
def document_server(folder: Path) -> Iterator[DocumentServer]:
    """Serve `server.documents` over https on a free loopback port until the block ends."""
    ca_file, cert, key = _certificates(folder)
    served = DocumentServer(url="", ca_file=ca_file)

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            served.fetched.append(self.path)
            document = served.documents.get(self.path)
            body = json.dumps(document).encode() if document is not None else b"not found"
            self.send_response(200 if document is not None else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_: object) -> None:
            return

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    served.url = f"https://127.0.0.1:{httpd.server_address[1]}"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield served
    finally:
        httpd.shutdown()
        httpd.server_close()
