"""catalog.outbound: a store owner's catalog source reaches only what the operator allows (issue 39, items 1-2).

SQL sources connect only to the operator's CATALOG_SQL_HOSTS, judged on the URL as SQLAlchemy parses it, and
never to the application's own database; feed URLs are checked at every request and redirect on the address
connected to. The checks run when the import connects (the Celery task's path), so a source saved before, or
edited in the database, is refused at its sync: the sources below are written straight to the table.
"""

from __future__ import annotations

import json
import datetime
import socket
import ssl
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import pytest
import sqlalchemy as sa
from django.core.management import call_command
from django.db import connection
from django.test import Client

from catalog import outbound, sync
from catalog.models import ImportRun, ImportSource, Product, Store
from tests.studio.conftest import make_user

pytestmark = pytest.mark.django_db

FEED = [{"handle": "trail-mug", "title": "Trail Mug", "price": "12.50", "sku": "MUG-1"}]
# The issue's mapping: a live session key of the server's own database as a product title.
SESSION_MAPPING = {"products": {
    "query": "SELECT 'sess-' || session_key AS handle, 'session ' || session_key AS title, 1 AS price "
             "FROM django_session",
    "columns": {"handle": "handle", "title": "title", "price": "price"}}}
PUBLIC_ADDRESS = "93.184.215.14"


@pytest.fixture
def store() -> Store:
    return Store.objects.create(slug="outbound", name="Outbound")


@pytest.fixture
def owner_client(store) -> Client:
    client = Client()
    client.force_login(make_user("olga", store, "owner"))
    return client


@pytest.fixture(autouse=True)
def no_embedding(monkeypatch):
    monkeypatch.setattr("catalog.tasks.embed_store_products.delay", lambda *a, **k: None)


def synced(source: ImportSource, capture) -> ImportRun:
    """A studio sync of ``source`` through the Celery task (eager here), as the studio and celery beat start it."""
    with capture(execute=True):
        run = sync.start_sync(source)
    run.refresh_from_db()
    return run


def saved_source(store: Store, kind: str, location: str, mapping: dict | None = None) -> ImportSource:
    """A source as the table holds it: saved before the checks existed, or edited in the database."""
    return ImportSource.objects.create(store=store, name=f"src-{uuid.uuid4().hex[:6]}", kind=kind,
                                       location=location, mapping=mapping)


# --- feeds: a local server (its address allowed only where a test says so) ---------------------------------

class FeedServer:
    """A feed on 127.0.0.x: /feed.json, /redirect?to=URL (302), /loop (302 to itself); records each path."""

    def __init__(self, host: str, feed: list[dict] = FEED, tls: ssl.SSLContext | None = None) -> None:
        hits = self.hits = []

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                hits.append((self.path, self.headers.get("Host")))
                url = urlsplit(self.path)
                if url.path == "/redirect":
                    self.send_response(302)
                    self.send_header("Location", parse_qs(url.query)["to"][0])
                    self.end_headers()
                elif url.path == "/loop":
                    self.send_response(302)
                    self.send_header("Location", "/loop")
                    self.end_headers()
                elif url.path in ("/feed.json", "/metrics"):
                    body = json.dumps(feed).encode()
                    self.send_response(200)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                else:
                    self.send_error(404)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer((host, 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        self.host, self.port = host, self.server.server_port
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str, host: str | None = None) -> str:
        return f"http://{host or self.host}:{self.port}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def feed_server():
    server = FeedServer("127.0.0.1")
    yield server
    server.close()


@pytest.fixture
def other_server():
    """A second local server, on an address the tests never allow: it must never be reached."""
    server = FeedServer("127.0.0.2")
    yield server
    server.close()


@pytest.fixture
def resolver(monkeypatch):
    """Answers for made-up host names, one list per lookup (the last one repeats); counts the lookups."""
    real = socket.getaddrinfo
    answers: dict[str, list[str]] = {}
    lookups: dict[str, int] = {}

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in answers:
            return real(host, port, *args, **kwargs)
        lookups[host] = lookups.get(host, 0) + 1
        address = answers[host][min(lookups[host], len(answers[host])) - 1]
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port or 0))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers, lookups


def test_a_feed_on_the_servers_own_network_is_refused_at_sync(store, feed_server, django_capture_on_commit_callbacks):
    run = synced(saved_source(store, "json", feed_server.url("/feed.json")), django_capture_on_commit_callbacks)
    assert run.status == "failed" and "inside the server's own network" in run.message
    assert feed_server.hits == [] and not Product.objects.filter(store=store).exists()


def test_an_allowed_network_is_fetched_and_its_redirects_followed(store, feed_server, settings,
                                                                  django_capture_on_commit_callbacks):
    settings.CATALOG_FEED_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    location = feed_server.url("/redirect?to=" + feed_server.url("/feed.json"))
    run = synced(saved_source(store, "json", location), django_capture_on_commit_callbacks)
    assert run.status == "succeeded", run.message
    assert Product.objects.get(store=store).handle == "trail-mug"
    assert [path for path, _host in feed_server.hits] == [urlsplit(location).path + "?" + urlsplit(location).query,
                                                          "/feed.json"]


def test_a_percent_encoded_host_is_refused_when_saved_and_at_sync(store, feed_server, settings, owner_client,
                                                                   django_capture_on_commit_callbacks):
    # The issue's http://127.0.0.1%3A8000/metrics: resolving "127.0.0.1%3a8000" failed, so it was let through,
    # and urllib unquoted it into 127.0.0.1:8000. Refused for its form, even where 127.0.0.1 is allowed.
    settings.CATALOG_FEED_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    location = f"http://127.0.0.1%3A{feed_server.port}/metrics"
    response = owner_client.post("/studio/outbound/catalog/sources", {
        "name": "metrics", "kind": "json", "location": location, "schedule": "off"})
    assert response.status_code == 400 and b"percent-encoded" in response.content
    run = synced(saved_source(store, "json", location), django_capture_on_commit_callbacks)
    assert run.status == "failed" and "percent-encoded" in run.message
    assert feed_server.hits == [] and not Product.objects.filter(store=store).exists()


def test_a_redirect_to_an_address_not_allowed_is_refused_before_connecting(
    store, feed_server, other_server, settings, django_capture_on_commit_callbacks
):
    settings.CATALOG_FEED_ALLOWED_NETWORKS = ["127.0.0.1/32"]  # 127.0.0.2 is not in it
    location = feed_server.url("/redirect?to=" + other_server.url("/feed.json"))
    run = synced(saved_source(store, "json", location), django_capture_on_commit_callbacks)
    assert run.status == "failed", run.message
    assert f"redirects to {other_server.url('/feed.json')}" in run.message
    assert "inside the server's own network" in run.message
    assert len(feed_server.hits) == 1 and other_server.hits == []
    assert not Product.objects.filter(store=store).exists()


def test_redirects_stop_after_five(feed_server):
    with pytest.raises(outbound.FetchError, match="more than 5 redirects"):
        outbound.fetch(feed_server.url("/loop"), restricted=True, max_bytes=1024,
                       networks=outbound.parse_networks(["127.0.0.1/32"]))
    assert len(feed_server.hits) == 6


def test_a_feed_larger_than_the_limit_is_refused(feed_server):
    with pytest.raises(outbound.FetchError, match="larger than"):
        outbound.fetch(feed_server.url("/feed.json"), restricted=True, max_bytes=10,
                       networks=outbound.parse_networks(["127.0.0.1/32"]))


def test_a_name_public_when_saved_and_loopback_at_sync_is_refused_at_sync(
    store, feed_server, resolver, owner_client, django_capture_on_commit_callbacks
):
    answers, lookups = resolver
    answers["feed.example.com"] = [PUBLIC_ADDRESS, "127.0.0.1"]  # DNS rebinding: a public answer, then loopback
    location = feed_server.url("/feed.json", host="feed.example.com")
    response = owner_client.post("/studio/outbound/catalog/sources", {
        "name": "rebinding", "kind": "json", "location": location, "schedule": "off"})
    assert response.status_code == 302 and lookups["feed.example.com"] == 1
    run = synced(ImportSource.objects.get(store=store, name="rebinding"), django_capture_on_commit_callbacks)
    assert run.status == "failed" and "feed.example.com is an address inside" in run.message
    assert feed_server.hits == [] and not Product.objects.filter(store=store).exists()


def test_the_fetch_connects_to_the_address_it_checked(store, feed_server, other_server, resolver, settings,
                                                     django_capture_on_commit_callbacks):
    # An allowed first answer, and a disallowed one for any lookup after it: a fetch that looked the name up
    # again to connect would land on 127.0.0.2.
    settings.CATALOG_FEED_ALLOWED_NETWORKS = ["127.0.0.1/32"]
    answers, lookups = resolver
    answers["feed.example.com"] = ["127.0.0.1", "127.0.0.2"]
    other_server.server.server_close()
    other_server.server = ThreadingHTTPServer(("127.0.0.2", feed_server.port), other_server.server.RequestHandlerClass)
    threading.Thread(target=other_server.server.serve_forever, daemon=True).start()
    run = synced(saved_source(store, "json", feed_server.url("/feed.json", host="feed.example.com")),
                 django_capture_on_commit_callbacks)
    assert run.status == "succeeded", run.message
    assert lookups["feed.example.com"] == 1 and other_server.hits == []
    # The server was asked for the URL's host, not the address.
    assert feed_server.hits == [("/feed.json", f"feed.example.com:{feed_server.port}")]


def self_signed(folder, name: str) -> tuple[str, str]:
    """A certificate for ``name`` (and its key), its own authority."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    certificate = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


def test_https_is_pinned_to_the_checked_address_and_checks_the_urls_name(tmp_path, resolver, monkeypatch):
    cert, key = self_signed(tmp_path, "feed.example.com")
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(cert, key)
    server = FeedServer("127.0.0.1", tls=tls)
    monkeypatch.setenv("SSL_CERT_FILE", cert)  # the client's trust: this certificate only
    answers, lookups = resolver
    answers["feed.example.com"] = ["127.0.0.1", "127.0.0.2"]
    answers["other.example.com"] = ["127.0.0.1"]
    allowed = outbound.parse_networks(["127.0.0.1/32"])
    try:
        body = outbound.fetch(f"https://feed.example.com:{server.port}/feed.json", restricted=True,
                              max_bytes=1024, networks=allowed)
        assert json.loads(body) == FEED and lookups["feed.example.com"] == 1
        assert server.hits == [("/feed.json", f"feed.example.com:{server.port}")]
        # The same server under a name its certificate does not hold, or by address: refused by TLS.
        for url in (f"https://other.example.com:{server.port}/feed.json", f"https://127.0.0.1:{server.port}/"):
            with pytest.raises(outbound.FetchError, match="certificate"):
                outbound.fetch(url, restricted=True, max_bytes=1024, networks=allowed)
        assert len(server.hits) == 1
    finally:
        server.close()


@pytest.mark.parametrize("url", [
    "http://127.0.0.1%3A8000/metrics",
    "http://2130706433/feed.json",
    "http://0x7f.1/feed.json",
    "http://0x7f000001/feed.json",
    "http://0177.0.0.1/feed.json",
    "http://127.1/feed.json",
    "http://shop@feed.example.com/feed.json",
    "http://feed.example.com./feed.json",
    "http://feed.example.com:99999/feed.json",
    "http://feed\\.example.com/feed.json",
    "http://feed.example.com /feed.json",
    "http://fe%80::1/feed.json",
    "file:///etc/passwd",
])
def test_unusual_host_forms_are_refused(url):
    with pytest.raises(outbound.Refused):
        outbound.parse_feed_url(url)


@pytest.mark.parametrize("address,allowed", [
    ("127.0.0.1", False), ("10.0.0.5", False), ("172.16.0.1", False), ("192.168.1.1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("224.0.0.1", False),
    ("255.255.255.255", False), ("::1", False), ("::ffff:127.0.0.1", False), ("fd00::1", False),
    ("fe80::1", False), ("ff02::1", False), (PUBLIC_ADDRESS, True), ("2606:4700::1", True),
])
def test_only_public_unicast_addresses_pass_unless_the_operator_allows_a_network(address, allowed):
    assert outbound.address_allowed(address, ()) is allowed
    networks = outbound.parse_networks(["127.0.0.1/32", "10.0.0.0/8"])
    inside_allowed = address in ("127.0.0.1", "::ffff:127.0.0.1", "10.0.0.5")
    assert outbound.address_allowed(address, networks) is (allowed or inside_allowed)


def test_the_operators_command_reads_any_feed(store, feed_server):
    # ingest_catalog is the operator's own tool: no list applies to what the operator types.
    call_command("ingest_catalog", feed_server.url("/feed.json"), "--store", store.slug, "--no-embed", verbosity=0)
    assert Product.objects.get(store=store).handle == "trail-mug"


def test_the_settings_are_checked_when_the_process_starts():
    with pytest.raises(ValueError, match="CATALOG_FEED_ALLOWED_NETWORKS: '127.0.0.1/33'"):
        outbound.parse_networks(["127.0.0.1/33"])
    with pytest.raises(ValueError, match="CATALOG_SQL_HOSTS: 'db.example.com:x'"):
        outbound.parse_sql_hosts(["db.example.com:x"])
    assert outbound.parse_sql_hosts(["DB.example.com:5432/shop", "10.0.0.5", "[::1]/x"]) == (
        outbound.SqlHost("db.example.com", 5432, "shop"), outbound.SqlHost("10.0.0.5", None, None),
        outbound.SqlHost("::1", None, "x"))


# --- SQL sources --------------------------------------------------------------------------------------------

POSTGRES_APP = {"default": {"ENGINE": "django.db.backends.postgresql", "HOST": "127.0.0.1", "PORT": "5432",
                            "NAME": "shop"}}


@pytest.mark.parametrize("url,reason", [
    ("postgresql+psycopg://postgres@/shop?host=127.0.0.1", "?host= is not allowed"),
    ("postgresql+psycopg://postgres@/shop?hostaddr=127.0.0.1", "?hostaddr= is not allowed"),
    ("postgresql+psycopg://postgres@db.example.com/shop?host=127.0.0.1", "?host= is not allowed"),
    ("postgresql+psycopg://postgres@db.example.com/shop?hostaddr=127.0.0.1", "?hostaddr= is not allowed"),
    ("postgresql+psycopg://postgres@/shop", "names no database server"),
    ("mysql+pymysql://shop@db.example.com/shop?unix_socket=/run/mysqld/mysqld.sock", "?unix_socket= is not"),
    ("postgresql+psycopg://shop@db.example.com/shop?service=app", "?service= is not allowed"),
    ("postgresql+psycopg://shop@db.example.com/shop?passfile=/etc/passwd", "?passfile= is not allowed"),
    ("postgresql+psycopg://shop@db.example.com/shop?sslkey=/app/var/secret_key", "?sslkey= is not allowed"),
    ("postgresql+psycopg://shop@db.example.com/shop?sslrootcert=/etc/shadow", "?sslrootcert= is not allowed"),
    ("postgresql+psycopg://shop@db.example.com/shop?options=-csearch_path%3Dx", "?options= is not allowed"),
    ("postgresql+psycopg://shop@db.example.com,127.0.0.1/shop", "not a plain host name"),
    ("postgresql+psycopg://shop@%2Ftmp/shop", "percent-encoded"),
    ("postgresql+psycopg://shop@db.example.com./shop", "ends with a dot"),
    ("postgresql+psycopg://shop@db.example.com/", "names no database"),
    ("postgresql+psycopg://shop@db.example.com/other", "not among the database servers"),
    ("postgresql+psycopg://shop@db.example.com:6432/shop", "not among the database servers"),
    ("postgresql+psycopg://shop@10.0.0.5/shop", "not among the database servers"),
    ("sqlite:////app/var/db.sqlite3", "SQLite file"),
    ("not a url", "not a SQLAlchemy database URL"),
])
def test_sql_urls_outside_the_operators_list_are_refused(url, reason):
    with pytest.raises(outbound.Refused) as refused:
        outbound.check_sql_url(url, hosts=["db.example.com:5432/shop"], databases={}, allow_sqlite=False)
    assert reason in str(refused.value)


def test_sql_sources_are_off_until_the_operator_lists_a_server():
    with pytest.raises(outbound.Refused, match="database sources are off on this server"):
        outbound.check_sql_url("postgresql+psycopg://shop@db.example.com/shop", hosts=[], databases={})


def test_a_listed_server_is_connected_to_with_its_port_and_database_written_out():
    # Written out, the driver's environment (PGPORT, PGDATABASE) cannot move it; and no ~/.pgpass of the worker.
    assert outbound.check_sql_url(
        "postgresql+psycopg://shop:pw@DB.example.com/shop?sslmode=require", hosts=["db.example.com:5432/shop"],
        databases={},
    ) == "postgresql+psycopg://shop:pw@db.example.com:5432/shop?passfile=%2Fdev%2Fnull&sslmode=require"


@pytest.mark.parametrize("url", [
    "postgresql+psycopg://postgres@127.0.0.1:5432/shop",
    "postgresql+psycopg://postgres@127.0.0.1/shop",  # the default port
    "postgresql+psycopg://postgres@localhost/shop",  # another name of the same server
    "postgresql+psycopg://postgres@127.0.0.1/test_shop",  # its test database
])
def test_the_applications_own_database_is_refused_even_on_a_listed_server(url):
    # The issue's server: the app's PostgreSQL on 127.0.0.1, database "shop"; the operator lists that server
    # for a store's database of another name, which stays usable.
    hosts = ["127.0.0.1", "localhost"]
    with pytest.raises(outbound.Refused, match="this application's own database"):
        outbound.check_sql_url(url, hosts=hosts, databases=POSTGRES_APP)
    assert outbound.check_sql_url("postgresql+psycopg://shop@127.0.0.1/stock", hosts=hosts, databases=POSTGRES_APP
                                  ).startswith("postgresql+psycopg://shop@127.0.0.1:5432/stock?")


@pytest.mark.django_db(transaction=True)
def test_a_sync_of_the_applications_own_database_is_refused(store, settings, django_capture_on_commit_callbacks):
    """The live database, whichever the suite runs on (a SQLite file, or CI's PostgreSQL), with a session in it:
    the issue's mapping must not turn the session key into a product, even where the operator lists the server
    (and SQLite is allowed for tests)."""
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session["_auth_user_id"] = "1"
    session.create()
    db = connection.settings_dict
    if db["ENGINE"].endswith("sqlite3"):
        settings.CATALOG_STUDIO_ALLOW_SQLITE = True
        url = f"sqlite:///{db['NAME']}"
    else:
        host = db["HOST"] or "127.0.0.1"
        settings.CATALOG_SQL_HOSTS = [host]
        url = sa.engine.URL.create("postgresql+psycopg", username=db["USER"], password=db["PASSWORD"] or None,
                                   host=host, port=int(db["PORT"] or 5432), database=db["NAME"]
                                   ).render_as_string(hide_password=False)
    run = synced(saved_source(store, "sql", url, SESSION_MAPPING), django_capture_on_commit_callbacks)
    assert run.status == "failed" and "this application's own database" in run.message
    assert not Product.objects.filter(store=store).exists()


@pytest.fixture
def server_database(postgres_url):
    """A scratch database on the local PostgreSQL, standing for the server's own: a live session in it."""
    server = sa.create_engine(postgres_url, isolation_level="AUTOCOMMIT", poolclass=sa.pool.NullPool)
    name = f"outbound_{uuid.uuid4().hex[:10]}"
    with server.connect() as conn:
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    engine = sa.create_engine(sa.engine.make_url(postgres_url).set(database=name), poolclass=sa.pool.NullPool)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE django_session (session_key varchar(40) PRIMARY KEY, "
                             "session_data text, expire_date timestamptz)"))
        conn.execute(sa.text("INSERT INTO django_session VALUES ('k3y0fasuperuser', '', now() + interval '1 day')"))
    engine.dispose()
    yield name
    with server.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    server.dispose()


@pytest.mark.services
@pytest.mark.parametrize("location", [
    "postgresql+psycopg://postgres@/{db}?host=127.0.0.1",
    "postgresql+psycopg://postgres@/{db}?hostaddr=127.0.0.1",
    "postgresql+psycopg://postgres@/{db}",  # no host: the local socket
    "postgresql+psycopg://postgres@db.example.com/{db}?host=127.0.0.1",  # a listed host, overridden
    "postgresql+psycopg://postgres@db.example.com/{db}?hostaddr=127.0.0.1",
])
def test_the_issues_sql_urls_read_nothing_at_sync(store, server_database, location, settings,
                                                 django_capture_on_commit_callbacks):
    # The operator lists a database server; none of these URLs goes there, each reaches the local PostgreSQL.
    settings.CATALOG_SQL_HOSTS = ["db.example.com"]
    run = synced(saved_source(store, "sql", location.format(db=server_database), SESSION_MAPPING),
                 django_capture_on_commit_callbacks)
    assert run.status == "failed" and "cannot use database URL" in run.message
    assert not Product.objects.filter(store=store).exists()


@pytest.mark.services
def test_a_listed_server_is_read(store, server_database, settings, django_capture_on_commit_callbacks):
    settings.CATALOG_SQL_HOSTS = [f"127.0.0.1:5432/{server_database}"]
    run = synced(saved_source(store, "sql", f"postgresql+psycopg://postgres@127.0.0.1/{server_database}",
                              SESSION_MAPPING), django_capture_on_commit_callbacks)
    assert run.status == "succeeded", run.message
    assert Product.objects.get(store=store).handle == "sess-k3y0fasuperuser"
