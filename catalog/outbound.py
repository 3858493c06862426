"""Where a catalog import may connect: external databases and URLs are the operator's decision, not an owner's.

A studio source is a store owner's input, and the importer runs it on the server, inside the server's network.
So an import started from the studio (a source synced by hand or on its schedule, an upload, the admin's form;
everything but the operator's own ``manage.py ingest_catalog``) goes through these checks:

- SQL: ``check_sql_url`` passes only a URL whose host (and port and database) is on the operator's
  ``CATALOG_SQL_HOSTS`` list, judged on the URL as SQLAlchemy parses it: no host in the query string
  (``?host=``, ``?hostaddr=``, ``unix_socket``: the driver would connect there, whatever the URL's host says),
  no URL without a host (the local socket), only query keys that name no file or server (libpq's ``service``,
  ``passfile``, ``sslkey``, ``options`` are refused), never the application's own database, and a SQLite file
  only where the tests allow it (``CATALOG_STUDIO_ALLOW_SQLITE``), never the application's. It returns the
  URL to connect to with the port and database written out, so that the driver's environment (``PGPORT``,
  ``PGDATABASE``) cannot move it elsewhere.
- Feeds: ``fetch`` resolves the host once per request, checks every address it got (public unicast only, or
  inside ``CATALOG_FEED_ALLOWED_NETWORKS``), and connects to that checked address itself, with the URL's name
  in the Host header and the TLS check: a second DNS answer never decides where it connects. Redirects are
  followed here, at most ``MAX_REDIRECTS``, each one checked the same way. Host forms that parsers read
  differently (percent-encoding, user names, integer or hex IPv4, a trailing dot) are refused outright.

The forms run the same checks when a source is saved, for an early error; the import run runs them again when
it connects, which is what counts: a source saved before, or edited in the database, is held to today's lists.

Plain module, no Django import at load: ``shop_assistant/settings.py`` checks the two settings with
``parse_sql_hosts`` and ``parse_networks`` when the process starts.
"""

from __future__ import annotations

import http.client
import ipaddress
import os
import re
import socket
import ssl
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urljoin, urlsplit

MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
USER_AGENT = "shop-assistant-catalog/1"

# The query keys a studio database URL may carry: none names a host, a socket, a file or a server option.
SQL_QUERY_KEYS = frozenset({"sslmode", "connect_timeout", "application_name", "charset", "client_encoding"})
# Keys that make the driver connect somewhere else than the URL's host: named apart for a precise message.
SQL_HOST_KEYS = frozenset({"host", "hostaddr", "port", "unix_socket", "service", "dbname", "dsn", "odbc_connect"})
DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "mariadb": 3306, "mssql": 1433, "oracle": 1521}

SQL_OFF = ("database sources are off on this server: the operator lists the database servers that studio "
           "sources may read (CATALOG_SQL_HOSTS)")
SQLITE_REFUSED = ("a SQLite file on the server cannot be a studio source; use a database server's URL "
                  "(PostgreSQL, MySQL...)")
OWN_DATABASE = "that is this application's own database; a source must be the store's own database"
INSIDE = "an address inside the server's own network"

_LABEL = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
# A last label that is a number (decimal, or 0x hex) is an IPv4 address written some other way.
_NUMERIC_LABEL = re.compile(r"[0-9]+|0x[0-9a-f]*")


class FetchError(Exception):
    """A feed could not be downloaded; the message says why (it is shown to the store owner)."""


class Refused(FetchError):
    """The operator's settings do not allow this connection; the message says why."""


class _TooLarge(FetchError):
    """The feed says (Content-Length) or shows that it is larger than the download limit."""


# --- host names -------------------------------------------------------------------------------------------

def host_problem(host: str) -> str | None:
    """Why ``host`` (as a URL parser returned it) is no plain host name or IP address, or None.

    Every parser on the way (ours, SQLAlchemy's, urllib's, libpq's, the resolver's) must read the same host:
    percent-encoding, integer, octal and hex IPv4 forms, trailing dots, commas and other characters are refused
    rather than guessed at."""
    if not host:
        return "the URL names no host"
    if "%" in host:
        return f"the host {host!r} is percent-encoded; write it plainly"
    try:
        ipaddress.ip_address(host)  # only canonical forms: no 0x7f.1, 2130706433 or 0177.0.0.1
        return None
    except ValueError:
        pass
    if host.endswith("."):
        return f"the host {host!r} ends with a dot; leave it out"
    if not _HOSTNAME.fullmatch(host) or len(host) > 253:
        return (f"the host {host!r} is not a plain host name (letters, digits, '-' and '.'; an international "
                f"name in its xn-- form)")
    if _NUMERIC_LABEL.fullmatch(host.rsplit(".", 1)[-1]):
        return f"the host {host!r} is an IP address in an unusual form; write it as 203.0.113.7"
    return None


def address_allowed(address: str, networks: Iterable[ipaddress.IPv4Network | ipaddress.IPv6Network]) -> bool:
    """A public unicast address, or one inside a network the operator allows."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped  # ::ffff:127.0.0.1 is 127.0.0.1
    if any(ip.version == network.version and ip in network for network in networks):
        return True
    inside = (ip.is_private or ip.is_loopback or ip.is_link_local or ip.is_reserved or ip.is_multicast
              or ip.is_unspecified or getattr(ip, "is_site_local", False))
    return ip.is_global and not inside


# --- settings ---------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class SqlHost:
    """One entry of CATALOG_SQL_HOSTS: ``host[:port][/database]``; a part left out allows any."""

    host: str
    port: int | None
    database: str | None

    def allows(self, host: str, port: int, database: str) -> bool:
        return (self.host == host and self.port in (None, port)
                and (self.database is None or self.database == database))


def parse_sql_hosts(entries: Iterable[str]) -> tuple[SqlHost, ...]:
    """CATALOG_SQL_HOSTS entries; ValueError names a malformed one."""
    hosts = []
    for entry in entries:
        parts = urlsplit("//" + entry.strip())
        try:
            port = parts.port
        except ValueError:
            port = -1
        host, database = parts.hostname or "", parts.path[1:] or None
        if (port == -1 or host_problem(host) or parts.username is not None or parts.query or parts.fragment
                or "/" in (database or "")):
            raise ValueError(f"CATALOG_SQL_HOSTS: {entry.strip()!r} is not host[:port][/database]")
        hosts.append(SqlHost(host, port, database))
    return tuple(hosts)


def parse_networks(entries: Iterable[str]) -> tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, ...]:
    """CATALOG_FEED_ALLOWED_NETWORKS entries (CIDR, e.g. 10.1.2.0/24 or 127.0.0.1/32); ValueError names a bad one."""
    networks = []
    for entry in entries:
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise ValueError(f"CATALOG_FEED_ALLOWED_NETWORKS: {entry.strip()!r} is not a network such as "
                             f"10.1.2.0/24") from None
    return tuple(networks)


def _settings() -> Any:
    from django.conf import settings

    return settings


# --- SQL --------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Database:
    host: str  # "" for a local socket
    port: int | None
    names: frozenset[str]
    files: frozenset[Path]


def _own_databases(databases: Mapping[str, Mapping[str, Any]]) -> list[_Database]:
    """Every database this application is configured with (its test database's name too)."""
    own = []
    for config in databases.values():
        names = {str(config.get("NAME") or "")}
        test_name = (config.get("TEST") or {}).get("NAME")
        names |= {str(test_name)} if test_name else {f"test_{name}" for name in names if name}
        names.discard("")
        sqlite = "sqlite" in str(config.get("ENGINE"))
        port = str(config.get("PORT") or "").strip()
        own.append(_Database(
            host=str(config.get("HOST") or "").lower(),
            port=int(port) if port.isdigit() else None,  # None: the default port, or any: either way refused
            names=frozenset(name.casefold() for name in names),
            files=frozenset(Path(name).resolve() for name in names) if sqlite else frozenset(),
        ))
    return own


def _addresses_of(host: str) -> set[str]:
    """What ``host`` resolves to; a local socket ("" or a directory) is this machine."""
    if not host or host.startswith("/"):
        names = ["localhost", socket.gethostname()]
    else:
        names = [host]
    found = {"127.0.0.1", "::1"} if not host or host.startswith("/") else set()
    for name in names:
        try:
            found |= {info[4][0].split("%", 1)[0] for info in socket.getaddrinfo(name, None)}
        except (OSError, UnicodeError):
            continue
    return found


def _same_server(host: str, own_host: str) -> bool:
    return host == own_host or bool(_addresses_of(host) & _addresses_of(own_host))


def check_sql_url(url: str, *, hosts: Iterable[str] | None = None,
                  databases: Mapping[str, Mapping[str, Any]] | None = None,
                  allow_sqlite: bool | None = None) -> str:
    """The URL a studio SQL source may connect to (port and database written out), or Refused saying why.

    ``hosts``, ``databases`` and ``allow_sqlite`` default to the settings CATALOG_SQL_HOSTS, DATABASES and
    CATALOG_STUDIO_ALLOW_SQLITE (a test setting)."""
    from sqlalchemy.engine import make_url

    settings = _settings()
    own = _own_databases(settings.DATABASES if databases is None else databases)
    try:
        parsed = make_url(url)
        backend = parsed.get_backend_name()
    except Exception:  # noqa: BLE001 - any parse failure is a typo, said as such
        raise Refused("that is not a SQLAlchemy database URL") from None
    if backend == "sqlite":
        if not (getattr(settings, "CATALOG_STUDIO_ALLOW_SQLITE", False) if allow_sqlite is None else allow_sqlite):
            raise Refused(SQLITE_REFUSED)
        _check_query(parsed.query)
        path = Path(parsed.database or ":memory:").resolve()
        if any(path in database.files for database in own):
            raise Refused(OWN_DATABASE)
        return url
    if backend not in DEFAULT_PORTS:
        raise Refused(f"{backend} databases cannot be a studio source "
                      f"(PostgreSQL, MySQL, MariaDB, SQL Server or Oracle)")
    allowed = parse_sql_hosts(settings.CATALOG_SQL_HOSTS if hosts is None else hosts)
    if not allowed:
        raise Refused(SQL_OFF)
    _check_query(parsed.query)
    if not parsed.host:
        raise Refused("the URL names no database server (without a host the driver uses this server's own "
                      "local socket); write postgresql+psycopg://user@db.example.com/shop")
    host = parsed.host.lower()
    problem = host_problem(host)
    if problem:
        raise Refused(problem)
    port, database = parsed.port or DEFAULT_PORTS[backend], parsed.database
    if not database:
        raise Refused("the URL names no database: end it with /database_name")
    if not any(rule.allows(host, port, database) for rule in allowed):
        raise Refused(f"{host}:{port}/{database} is not among the database servers the operator allows for "
                      f"studio sources (CATALOG_SQL_HOSTS)")
    for own_database in own:
        if (database.casefold() in own_database.names and own_database.port in (None, port)
                and _same_server(host, own_database.host)):
            raise Refused(OWN_DATABASE)
    checked = parsed.set(host=host, port=port, database=database)
    if backend == "postgresql":
        # libpq would look for a password in the worker's ~/.pgpass (where the app's own may be): never here.
        checked = checked.update_query_dict({"passfile": os.devnull})
    return checked.render_as_string(hide_password=False)


def _check_query(query: Mapping[str, Any]) -> None:
    for key, value in query.items():
        if key in SQL_HOST_KEYS:
            raise Refused(f"?{key}= is not allowed: put the database server in the URL's host part "
                          f"(postgresql+psycopg://user@db.example.com:5432/shop)")
        if key not in SQL_QUERY_KEYS:
            raise Refused(f"?{key}= is not allowed in a studio source (allowed: {', '.join(sorted(SQL_QUERY_KEYS))})")
        if not isinstance(value, str):
            raise Refused(f"?{key}= is given more than once")


# --- feeds ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class FeedTarget:
    scheme: str
    host: str
    port: int
    target: str  # path and query, as sent

    @property
    def host_header(self) -> str:
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == (443 if self.scheme == "https" else 80) else f"{name}:{self.port}"


def parse_feed_url(url: str) -> FeedTarget:
    """The parts of an http(s) feed URL, or Refused when its form is one that parsers read differently."""
    if any(char <= " " or char in "\x7f\\" for char in url):
        raise Refused("a feed URL cannot hold spaces, backslashes or control characters")
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        raise Refused("a feed needs an http(s) URL")
    if "@" in parts.netloc:
        raise Refused("a feed URL cannot carry a user name or password (user@host)")
    if "%" in parts.netloc:
        raise Refused("the host of a feed URL cannot be percent-encoded; write it plainly")
    try:
        port = parts.port
    except ValueError:
        raise Refused("the feed URL's port is not a number from 1 to 65535") from None
    host = parts.hostname or ""
    problem = host_problem(host)
    if problem:
        raise Refused(problem)
    scheme = parts.scheme.lower()
    # Non-ASCII in the path or query is sent %-encoded; what is encoded already stays as it is.
    target = quote(parts.path or "/", safe="/%:@!$&'()*+,;=-._~")
    if parts.query:
        target += "?" + quote(parts.query, safe="/%:@!$&'()*+,;=-._~?")
    return FeedTarget(scheme, host, port or (443 if scheme == "https" else 80), target)


def resolve(target: FeedTarget, *, restricted: bool, networks: Iterable | None = None) -> list[str]:
    """The addresses to connect to, each checked when ``restricted``: one lookup, then never again."""
    try:
        infos = socket.getaddrinfo(target.host, target.port, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        raise FetchError(f"cannot resolve {target.host}: {exc}") from None
    addresses = list(dict.fromkeys(info[4][0] for info in infos))
    if restricted:
        allowed = parse_networks(_settings().CATALOG_FEED_ALLOWED_NETWORKS) if networks is None else networks
        # One inside address among public ones refuses the host: which one a connection gets is not ours to pick.
        if not addresses or not all(address_allowed(address, allowed) for address in addresses):
            # The address itself is not said: an owner must not map the server's network through these messages.
            raise Refused(f"{target.host} is {INSIDE}; a feed must be on the public internet "
                          f"(the operator allows other networks with CATALOG_FEED_ALLOWED_NETWORKS)")
    return addresses


class _PinnedConnection(http.client.HTTPConnection):
    """http.client to an address checked beforehand: connect() never resolves the host name again."""

    def __init__(self, target: FeedTarget, address: str, timeout: float) -> None:
        super().__init__(target.host, target.port, timeout=timeout)
        self.address = address
        self.tls = ssl.create_default_context() if target.scheme == "https" else None

    def connect(self) -> None:
        self.sock = socket.create_connection((self.address, self.port), self.timeout)
        if self.tls is not None:
            # The certificate is checked against the URL's host name, as any client would.
            self.sock = self.tls.wrap_socket(self.sock, server_hostname=self.host)


def _get(target: FeedTarget, addresses: list[str], timeout: float, max_bytes: int) -> tuple[int, str, str, bytes]:
    """(status, reason, Location, body) of one GET, tried on each checked address in turn. The body is read
    only for a 200, and at most ``max_bytes + 1`` of it (one more says it is too large)."""
    error: Exception | None = None
    for address in addresses:
        connection = _PinnedConnection(target, address, timeout)
        try:
            connection.putrequest("GET", target.target, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", target.host_header)
            connection.putheader("User-Agent", USER_AGENT)
            connection.putheader("Accept-Encoding", "identity")
            connection.endheaders()
            response = connection.getresponse()
            if response.status != 200:
                return response.status, response.reason, response.getheader("Location") or "", b""
            length = response.getheader("Content-Length") or ""
            if length.isdigit() and int(length) > max_bytes:
                raise _TooLarge()  # said before a byte of it is read
            return response.status, response.reason, "", response.read(max_bytes + 1)
        except ConnectionRefusedError as exc:
            error = exc  # the host's next address may answer
        except (OSError, http.client.HTTPException) as exc:
            error = exc
            break
        finally:
            connection.close()
    raise FetchError(str(error or "") or error.__class__.__name__)


def fetch(url: str, *, restricted: bool, max_bytes: int, timeout: float = 30,
          networks: Iterable | None = None) -> bytes:
    """GET a feed, following redirects here (each one parsed, resolved and checked like the first URL)."""
    first = url
    for _hop in range(MAX_REDIRECTS + 1):
        try:
            target = parse_feed_url(url)
            addresses = resolve(target, restricted=restricted, networks=networks)
        except FetchError as exc:
            raise exc.__class__(str(exc) if url == first else f"{first} redirects to {url}: {exc}") from None
        try:
            status, reason, location, body = _get(target, addresses, timeout, max_bytes)
        except _TooLarge:
            raise FetchError(f"{url} is larger than {max_bytes // (1024 * 1024)} MiB") from None
        except FetchError as exc:
            raise FetchError(f"cannot download {url}: {exc}") from None
        if status in REDIRECT_STATUSES:
            if not location:
                raise FetchError(f"{url} answered {status} {reason} without a Location")
            url = urljoin(url, location)
            continue
        if status != 200:
            raise FetchError(f"cannot download {url}: HTTP Error {status}: {reason}")
        if len(body) > max_bytes:
            raise FetchError(f"{url} is larger than {max_bytes // (1024 * 1024)} MiB")
        return body
    raise FetchError(f"{url}: more than {MAX_REDIRECTS} redirects")


def check_feed_url(url: str, *, networks: Iterable | None = None) -> None:
    """When a source is saved: Refused for a URL that a studio sync would refuse now. A host that does not
    resolve passes (the sync will say so); the sync checks again anyway, where it counts."""
    try:
        resolve(parse_feed_url(url), restricted=True, networks=networks)
    except Refused:
        raise
    except FetchError:
        pass


def post(url: str, body: bytes, headers: Mapping[str, str], *, timeout: float = 10,
         networks: Iterable | None = None) -> tuple[int, str]:
    """POST ``body`` to a studio-configured URL (an owner's webhook): (status, reason) of the answer.

    The same checks as a feed's GET, made when it connects (public unicast addresses, or the operator's
    ``CATALOG_FEED_ALLOWED_NETWORKS``; Refused otherwise), pinned to the checked address; a redirect is not
    followed (it is the answer: a webhook that moved is the owner's to fix). FetchError for a connection that
    failed; the body of the answer is not read beyond its status."""
    target = parse_feed_url(url)
    addresses = resolve(target, restricted=True, networks=networks)
    error: Exception | None = None
    for address in addresses:
        connection = _PinnedConnection(target, address, timeout)
        try:
            connection.putrequest("POST", target.target, skip_host=True, skip_accept_encoding=True)
            connection.putheader("Host", target.host_header)
            connection.putheader("User-Agent", USER_AGENT)
            connection.putheader("Content-Length", str(len(body)))
            for name, value in headers.items():
                connection.putheader(name, value)
            connection.endheaders(body)
            response = connection.getresponse()
            return response.status, response.reason
        except ConnectionRefusedError as exc:
            error = exc  # the host's next address may answer
        except (OSError, http.client.HTTPException) as exc:
            error = exc
            break
        finally:
            connection.close()
    raise FetchError(f"cannot reach {url}: {error or 'no address'}")
