"""HTTP transport, password authentication, TLS, idle sessions, the `recsql serve` command, and
eight concurrent clients. Real clients only (PyHive, Thrift's HTTP and TLS transports, beeline)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import subprocess
import threading

import pytest
from click.testing import CliRunner
from pyhive import hive
from thrift.transport import THttpClient, TSSLSocket, TTransport

import recsql
from recsql.cli.serve import serve as serve_command
from recsql.server import auth
from tests.server.clients import (
    EDGES,
    SSSP,
    beeline,
    csv_rows,
    register_edges,
    sssp_oracle,
    wait_for,
)


def self_signed(directory) -> tuple[str, str]:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture(scope="module")
def password_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "users.txt"
    result = CliRunner().invoke(serve_command, ["--add-user", "analyst", "--password-file", str(path)],
                                input="s3cret pass\ns3cret pass\n")
    assert result.exit_code == 0, result.output
    return path


@pytest.fixture(scope="module")
def tls(tmp_path_factory):
    return self_signed(tmp_path_factory.mktemp("tls"))


def run_sssp(connection) -> list[tuple]:
    try:
        cursor = connection.cursor()
        cursor.execute(SSSP)
        return sorted(cursor.fetchall())
    finally:
        connection.close()


def http_transport(server, user, password, cafile=None):
    context = None
    scheme = "http"
    if cafile:
        scheme, context = "https", ssl.create_default_context(cafile=cafile)
    transport = THttpClient.THttpClient(f"{scheme}://127.0.0.1:{server.port}/cliservice/",
                                        ssl_context=context)
    hive.Connection._set_authorization_header(transport, user, password)
    return transport


def test_password_file_holds_no_plain_text(password_file):
    text = password_file.read_text()
    assert text.startswith("analyst:scrypt:") and "s3cret" not in text
    assert oct(password_file.stat().st_mode & 0o777) == "0o600"


def test_http_transport_pyhive_and_beeline(spark):
    with recsql.serve(spark=spark, port=0, transport="http", init=register_edges) as server:
        connection = hive.Connection(scheme="http", host="127.0.0.1", port=server.port,
                                     username="analyst")
        assert run_sssp(connection) == sssp_oracle()
        out = beeline(f"jdbc:hive2://127.0.0.1:{server.port}/default;transportMode=http;"
                      "httpPath=cliservice", f"{SSSP};\n")
        assert csv_rows(out, "Dst,Cost") == sssp_oracle(), out


def test_password_auth_over_sasl_with_tls(spark, password_file, tls, tmp_path):
    cert, key = tls
    auth.add_user(password_file, "jdbc", "tls-secret")  # beeline's launcher splits at spaces
    with recsql.serve(spark=spark, port=0, auth="password", password_file=str(password_file),
                      ssl_cert=cert, ssl_key=key, init=register_edges) as server:
        def connect(password):
            import thrift_sasl
            from pyhive.hive import get_installed_sasl

            socket = TSSLSocket.TSSLSocket("127.0.0.1", server.port, ca_certs=cert)
            transport = thrift_sasl.TSaslClientTransport(
                lambda: get_installed_sasl(host="127.0.0.1", sasl_auth="PLAIN", service=None,
                                           username="analyst", password=password), "PLAIN", socket)
            return hive.Connection(thrift_transport=transport)

        assert run_sssp(connect("s3cret pass")) == sssp_oracle()
        with pytest.raises(TTransport.TTransportException, match="Authentication failed|Bad"):
            connect("wrong")
        with pytest.raises(Exception):  # noqa: B017 - no SASL, no credentials: refused
            hive.Connection(thrift_transport=TTransport.TBufferedTransport(
                TSSLSocket.TSSLSocket("127.0.0.1", server.port, ca_certs=cert)))
        store = tmp_path / "trust.p12"  # Hive JDBC's ;ssl=true trusts the certificate through it
        subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "recsql", "-file", cert,
                        "-keystore", str(store), "-storetype", "PKCS12", "-storepass", "changeit"],
                       check=True, capture_output=True, timeout=60)
        out = beeline(f"jdbc:hive2://127.0.0.1:{server.port}/default;ssl=true;sslTrustStore={store};"
                      "trustStorePassword=changeit", f"{SSSP};\n", user="jdbc", password="tls-secret")
        assert csv_rows(out, "Dst,Cost") == sssp_oracle(), out


def test_password_auth_over_https(spark, password_file, tls):
    cert, key = tls
    with recsql.serve(spark=spark, port=0, transport="http", auth="password",
                      password_file=str(password_file), ssl_cert=cert, ssl_key=key) as server:
        good = hive.Connection(thrift_transport=http_transport(server, "analyst", "s3cret pass", cert))
        try:
            cursor = good.cursor()
            cursor.execute("SELECT current_user() IS NOT NULL")
            assert cursor.fetchall() == [(True,)]
        finally:
            good.close()
        refused = http_transport(server, "analyst", "nope", cert)
        with pytest.raises((EOFError, TTransport.TTransportException)):  # Thrift reads no reply
            hive.Connection(thrift_transport=refused)
        assert refused.code == 401


def test_non_loopback_hosts_need_auth(spark):
    with pytest.raises(ValueError, match="refusing to serve 0.0.0.0 without authentication"):
        recsql.serve(spark=spark, host="0.0.0.0", port=0)
    result = CliRunner().invoke(serve_command, ["--host", "192.0.2.1"])
    assert result.exit_code == 2 and "--insecure" in result.output


def test_idle_sessions_expire(spark):
    with recsql.serve(spark=spark, port=0, idle_session_timeout=0.5) as server:
        connection = hive.Connection(host="127.0.0.1", port=server.port, auth="NOSASL")
        try:
            wait_for(lambda: len(server.sessions) == 0, 15)
            with pytest.raises(Exception, match="Invalid SessionHandle"):
                connection.cursor().execute("SELECT 1")
        finally:
            connection._transport.close()


def reach_oracle(source: int) -> list[tuple[int]]:
    import networkx as nx

    graph = nx.DiGraph((s, d) for s, d, _ in EDGES)
    return sorted((n,) for n in nx.descendants(graph, source) | {source})


def test_eight_concurrent_clients(server):
    """Each client has its own temp view `start` (same name, other content) and its own query:
    SSSP (UNION with min) or reachability (set recursion), from its own source."""
    queries = {
        "sssp": ("WITH recursive path (Dst, min() AS Cost) AS (SELECT s, 0 FROM start) UNION "
                 "(SELECT edge.Dst, path.Cost + edge.Cost FROM path, edge WHERE path.Dst = edge.Src) "
                 "SELECT Dst, Cost FROM path", sssp_oracle),
        "reach": ("WITH recursive reach (Node) AS (SELECT s FROM start) UNION "
                  "(SELECT edge.Dst FROM reach, edge WHERE reach.Node = edge.Src) "
                  "SELECT Node FROM reach", reach_oracle),
    }
    answers, errors = {}, []

    def client(number: int) -> None:
        kind = "sssp" if number % 2 else "reach"
        source = number + 1
        try:
            connection = hive.Connection(host="127.0.0.1", port=server.port, username=f"u{number}",
                                         auth="NOSASL" if number < 4 else "NONE")
            try:
                cursor = connection.cursor()
                cursor.execute(f"CREATE TEMPORARY VIEW start AS SELECT {source} AS s")
                cursor.execute(queries[kind][0])
                answers[number] = (sorted(cursor.fetchall()), queries[kind][1](source))
            finally:
                connection.close()
        except Exception as error:  # noqa: BLE001 - reported below
            errors.append((number, error))

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(240)
    assert not errors, errors
    assert len(answers) == 8
    for number, (got, expected) in answers.items():
        assert got == expected, number
