"""--tls: a throwaway certificate authority and a server certificate for 127.0.0.1 and localhost, made per run.

trustme writes them into a temporary folder that lives as long as the run. Servers get --tls-cert/--tls-key,
clients --tls-ca (and NODE_EXTRA_CA_CERTS, for the WHATWG clients whose API takes no CA), the orchestrator's own
probe trusts the same CA. Nothing is installed in any system trust store.
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class TlsFiles:
    ca: str  # PEM of the throwaway CA: what clients trust
    cert: str  # PEM chain of the server certificate (127.0.0.1, ::1, localhost)
    key: str  # PEM of the server's private key


def make_tls_files(folder: Path) -> TlsFiles:
    import trustme

    authority = trustme.CA(organization_name="websocket-pingpong-bench throwaway CA")
    certificate = authority.issue_cert("127.0.0.1", "::1", "localhost")
    files = TlsFiles(ca=str(folder / "ca.pem"), cert=str(folder / "server-chain.pem"), key=str(folder / "server-key.pem"))
    authority.cert_pem.write_to_path(files.ca)
    certificate.private_key_pem.write_to_path(files.key)
    with open(files.cert, "wb") as chain:
        for blob in certificate.cert_chain_pems:
            chain.write(blob.bytes())
    return files


def client_context(ca_file: str) -> ssl.SSLContext:
    """A client context that trusts only the run's CA (hostname checked against the certificate)."""
    return ssl.create_default_context(cafile=ca_file)


def server_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_file, key_file)
    return context
