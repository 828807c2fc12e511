"""No credential in a URL is ever printed or stored, whatever the URL's shape.

Tested as an attacker would: generated URLs carry a marker in every place a
credential goes (the user part, a password with good or bad percent-escapes
or unescaped ``@ / ? #``, secret query and fragment parameters however their
names are spelt, a libpq ``key=value`` string), and the marker must appear
neither in the one credential-free spelling (``_urls.without_password``), nor
in a driver's message quoting a piece of the URL, nor in anything the real
``ioh`` prints, nor in any column of the store or byte of its files.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from io_harness import ConfigError, Store
from io_harness._mcp import McpServer
from io_harness._urls import redacted, without_password
from io_harness.cli import main
from io_harness.providers._spec import provider_from_spec, spec_without_credentials
from loopback import LoopbackServer, Reply
from wire_openai import chat_stream, usage

MARK = "SECRETMARK"

# Characters a careless URL holds where a credential goes, escaped or not.
_JUNK = st.lists(
    st.sampled_from([
        "a", "Z", "9", "-", ".", "~", "!", "$", "'", "(", "*", "+", ",", "=", ":",
        "%", "%zz", "%4", "%41", "%25", "@", "/", "?", "#", "[", "]", " ", "\\",
    ]),
    max_size=4,
).map("".join)  # fmt: skip
_SPEC_JUNK = _JUNK.map(lambda text: text.replace("#", "%23"))
# In a parameter's value, an unescaped & ; or # ends the value for every parser.
_VALUE_JUNK = st.lists(
    st.sampled_from(["a", "9", "-", "%", "%zz", "%41", "=", ":", "@", "+"]), max_size=4
).map("".join)
_SECRET_NAMES = st.sampled_from([
    "password", "Password", "sslpassword", "api_key", "API-Key", "apikey", "key", "token",
    "access_token", "X-Amz-Signature", "client_secret", "auth", "pass%77ord", "pass%zzword",
])  # fmt: skip
_HARMLESS = st.sampled_from(["", "sslmode=require", "application_name=ioh", "v=1", "model"])
_SCHEMES = st.sampled_from(["postgresql", "postgres", "http", "https", "mysql", "redis"])


def _secret(junk: st.SearchStrategy[str] = _JUNK) -> st.SearchStrategy[str]:
    return st.tuples(junk, junk).map(lambda around: around[0] + MARK + around[1])


@st.composite
def _parameters(draw: st.DrawFn, *, secret: bool) -> str:
    pieces = [draw(_HARMLESS)]
    if secret:
        pieces.insert(
            draw(st.integers(0, 1)), f"{draw(_SECRET_NAMES)}={draw(_secret(_VALUE_JUNK))}"
        )
    separator = draw(st.sampled_from(["&", ";"]))
    return separator.join(piece for piece in pieces if piece)


@st.composite
def urls_with_a_secret(
    draw: st.DrawFn,
    schemes: st.SearchStrategy[str] = _SCHEMES,
    junk: st.SearchStrategy[str] = _JUNK,
) -> str:
    """A URL holding :data:`MARK` in one or more of the places a credential goes, with
    ``junk`` about it."""
    scheme = draw(schemes)
    database = scheme in ("postgresql", "postgres")
    places = draw(
        st.sets(st.sampled_from(["password", "user", "query", "fragment"]), min_size=1)
        if not database
        else st.sets(st.sampled_from(["password", "query"]), min_size=1)
    )
    user = draw(_secret(junk)) if "user" in places else draw(st.sampled_from(["u", "ioh", ""]))
    userinfo = user
    if "password" in places:
        userinfo += ":" + draw(_secret(junk))
    host = draw(st.sampled_from(["127.0.0.1:1", "db.example", "[::1]:5432", "h1:1,h2:2"]))
    url = f"{scheme}://{userinfo}@{host}" if userinfo else f"{scheme}://{host}"
    url += draw(st.sampled_from(["", "/", "/db", "/v1"]))
    query = draw(_parameters(secret="query" in places))
    if query or draw(st.booleans()):
        url += f"?{query}"
    if "fragment" in places:
        url += f"#{draw(_parameters(secret=True))}"
    return url


@st.composite
def connection_strings_with_a_secret(draw: st.DrawFn) -> str:
    """A libpq ``key=value`` string whose secret parameter holds :data:`MARK`."""
    quoted = draw(st.booleans())
    inner = draw(_secret(st.sampled_from(["", "a", " ", "\\'", "\\\\", "=", "%zz"])))
    value = f"'{inner}'" if quoted else inner.replace(" ", "").replace("'", "")
    if not quoted and "\\" in value:
        value = value.replace("\\", "")
    words = ["host=db", f"{draw(_SECRET_NAMES)}={value}", "dbname=runs"]
    return " ".join(draw(st.permutations(words)))


# -- the one helper ---------------------------------------------------------------------------


@given(urls_with_a_secret())
def test_no_url_keeps_a_credential_in_its_credential_free_spelling(url: str) -> None:
    assert MARK not in without_password(url), url


@given(connection_strings_with_a_secret())
def test_no_connection_string_keeps_a_credential_in_its_credential_free_spelling(dsn: str) -> None:
    assert MARK not in without_password(dsn), dsn


@given(urls_with_a_secret(), st.data())
def test_a_driver_quoting_any_piece_of_a_url_shows_none_of_its_credentials(
    url: str, data: st.DataObject
) -> None:
    start = data.draw(st.integers(0, url.index(MARK)))
    end = data.draw(st.integers(url.index(MARK) + len(MARK), len(url)))
    quote = data.draw(st.sampled_from(['"', "'"]))
    said = f"invalid percent-encoded token: {quote}{url[start:end]}{quote} in {url}"

    assert MARK not in redacted(said, url), (url, said)


def test_a_url_without_credentials_reads_as_written() -> None:
    for url in (
        "postgresql://ioh@db.example:5432/runs?sslmode=require&target_session_attrs=any",
        "postgresql:///runs",
        "https://api.example/v1",
        "postgresql://ioh@h1:1,h2:2/runs?sslkey=/etc/k.pem&passfile=/home/ioh/.pgpass",
    ):
        assert without_password(url) == url
    assert without_password("runs.db") == "runs.db"
    assert without_password("postgresql://u:p@[::1/db") == "postgresql://<unparseable URL>"


# -- what ioh prints -----------------------------------------------------------------------


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(location=st.one_of(urls_with_a_secret(), connection_strings_with_a_secret()))
def test_ioh_never_prints_a_store_locations_credential(
    location: str, capsys: pytest.CaptureFixture[str]
) -> None:
    for argv in (["runs"], ["resume", "r1"], ["pending"]):
        status = main([*argv, "--store", location])
        out, err = capsys.readouterr()
        assert MARK not in out + err, (location, out, err)
        assert status == 2 and err.startswith("error:") and err.count("\n") == 1, err
    assert not any(MARK in path.name for path in Path.cwd().iterdir())


@pytest.mark.parametrize(
    "location",
    [
        "postgresql://u:SECRETMARK%zz@127.0.0.1:1/db",
        "postgresql://u:SECRETMARK@[::1/db",
        "postgresql://u@127.0.0.1:1/db?password=a=SECRETMARK",
        "mysql://u:SECRETMARK@127.0.0.1/db",
        "host=127.0.0.1 port=1 password=SECRETMARK",
    ],
)
def test_the_ioh_command_never_prints_a_store_locations_credential(location: str) -> None:
    done = subprocess.run(
        [Path(sys.executable).parent / "ioh", "runs", "--store", location],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 2, done.stderr
    assert MARK not in done.stdout + done.stderr
    assert done.stderr.startswith("error:") and done.stderr.count("\n") == 1, done.stderr


def test_a_store_location_written_as_another_url_or_a_connection_string_is_a_config_error() -> None:
    for location in ("mysql://u:SECRETMARK@h/db", "host=h password=SECRETMARK"):
        with pytest.raises(ConfigError) as refused:
            Store.open(location)
        assert MARK not in str(refused.value) and "start it with ./" in str(refused.value)


# -- provider specs: printed and stored ---------------------------------------------------------


# In a provider spec the last "#" begins the model (compatible:URL#MODEL), so a "#" in a
# credential there is written %23, as in any URL's user part.
@given(urls_with_a_secret(st.sampled_from(["http", "https", "ftp"]), junk=_SPEC_JUNK))
def test_no_provider_spec_error_shows_a_credential(url: str) -> None:
    for spec in (f"compatible:{url}#m", f"compatible:{url}", f"compatble:{url}#m", url):
        assert MARK not in spec_without_credentials(spec)
        try:
            provider_from_spec(spec)
        except ConfigError as exc:
            assert MARK not in str(exc) and MARK not in (exc.shell or "")
        else:
            assert MARK not in repr(provider_from_spec(spec))


@given(urls_with_a_secret(st.sampled_from(["http", "https", "ftp"])))
def test_no_mcp_server_url_error_shows_a_credential(url: str) -> None:
    try:
        server = McpServer(name="tickets", url=url)
    except (ConfigError, ValueError) as exc:
        assert MARK not in str(exc), (url, str(exc))
    else:
        assert MARK not in server.target(), url


def openai_write() -> Reply:
    write = json.dumps({"path": "out.txt", "content": "hello\n"})
    return chat_stream(
        "Writing.", tool_calls=[("call_w", "write_file", write)], usage=usage(10, 5), model="m"
    )


def every_stored_text(db: Path) -> str:
    """Every column of every row of every table, and the raw bytes of the files, as text."""
    seen: list[str] = []
    with sqlite3.connect(db) as conn:
        tables = [
            row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        ]
        for table in tables:
            for row in conn.execute(f"SELECT * FROM {table}"):  # the names come from the file
                seen.extend(str(value) for value in row)
    for path in db.parent.glob(f"{db.name}*"):
        if path.is_file():
            seen.append(path.read_bytes().decode("utf-8", "replace"))
    return "\n".join(seen)


@st.composite
def provider_urls_with_a_secret(draw: st.DrawFn, host: str) -> str:
    """A base URL of the server at ``host`` holding :data:`MARK` in its user part or query."""
    places = draw(st.sets(st.sampled_from(["password", "user", "query"]), min_size=1))
    user = draw(_secret(_VALUE_JUNK)) if "user" in places else "u"
    password = f":{draw(_secret(_VALUE_JUNK))}" if "password" in places else ""
    url = f"http://{user}{password}@{host}/v1"
    query = draw(_parameters(secret="query" in places))
    return f"{url}?{query}" if query else url


CONTRACT = (
    'goal = "write hello to out.txt"\nroot = "ws"\n'
    '[verify]\nkind = "workspace_file_contains"\nfile = "out.txt"\nneedle = "hello"\n'
    "[budget]\nmax_retries = 0\n"
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_ioh_run_with_a_credential_in_the_providers_url_neither_prints_nor_stores_it(
    data: st.DataObject, capsys: pytest.CaptureFixture[str]
) -> None:
    with (
        LoopbackServer(lambda request: openai_write()) as server,
        tempfile.TemporaryDirectory() as temp,
    ):
        url = data.draw(provider_urls_with_a_secret(server.url.removeprefix("http://")))
        spec = f"compatible:{url}#m"
        folder = Path(temp)
        (folder / "ws").mkdir()
        (folder / "contract.toml").write_text(CONTRACT)
        store = folder / "runs.db"
        given_store = ["--store", str(store)]
        main(
            [
                "run",
                str(folder / "contract.toml"),
                *given_store,
                "--run-id",
                "r1",
                "--provider",
                spec,
            ]
        )
        said = [capsys.readouterr()]
        if store.exists():
            assert MARK not in every_stored_text(store), spec
            main(["show", "r1", *given_store])
            said.append(capsys.readouterr())
            resumed = main(["resume", "r1", *given_store])
            said.append(capsys.readouterr())
            assert resumed == 2 and "give --provider SPEC again" in said[-1].err, said[-1]
        for out, err in said:
            assert MARK not in out + err, (spec, out, err)
