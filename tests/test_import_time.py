"""`import io_harness` and `ioh --help` load no heavy dependency; each loads where it is used.

Every check runs in a fresh interpreter (``sys.executable``), since this test
process has long since imported everything. No duration is asserted: what is
checked is which modules are loaded; ``bench/import_time.py`` prints the times.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

TESTS = Path(__file__).parent
BENCH = TESTS.parent / "bench"

# Loaded where they are used, never by importing the package.
HEAVY = (
    "anthropic",
    "openai",
    "httpx2",
    "httpx",
    "mcp",
    "psycopg",
    "psycopg_pool",
    "pgqueuer",
    "opentelemetry",
    "jinja2",
    "markupsafe",
    "rich",
    "yaml",
    "docstring_parser",
    "pydantic",
    "asyncio",
)
"""``import io_harness`` loads its public names when first used, so none of these."""
VENDOR = ("anthropic", "openai", "httpx2", "httpx", "mcp", "psycopg", "opentelemetry")
HELP_UNLOADED = (*VENDOR, "rich", "pydantic", "asyncio", "jinja2", "pgqueuer")
"""``ioh --help`` only parses arguments: what a command needs loads when it runs."""


def loaded_after(code: str) -> set[str]:
    """The top-level modules a fresh interpreter has loaded after running ``code``."""
    script = textwrap.dedent(code) + textwrap.dedent(
        """
        import json as _json, sys as _sys
        _sys.__stderr__.write("\\nMODULES " + _json.dumps(sorted(_sys.modules)) + "\\n")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = [ln for ln in done.stderr.splitlines() if ln.startswith("MODULES ")]
    return {name.partition(".")[0] for name in json.loads(line.removeprefix("MODULES "))}


@pytest.fixture(scope="module")
def after_import() -> set[str]:
    return loaded_after("import io_harness")


@pytest.fixture(scope="module")
def after_help() -> set[str]:
    # What the `ioh` console script (`io_harness.cli:entry`) does, with --help.
    return loaded_after(
        """
        import sys
        from io_harness.cli import entry
        sys.argv = ["ioh", "--help"]
        try:
            entry()
        except SystemExit as stop:
            assert stop.code in (0, None), stop.code
        """
    )


@pytest.mark.parametrize("module", HEAVY)
def test_importing_the_package_leaves_the_module_unloaded(
    module: str, after_import: set[str]
) -> None:
    assert module not in after_import


@pytest.mark.parametrize("module", HELP_UNLOADED)
def test_ioh_help_leaves_the_module_unloaded(module: str, after_help: set[str]) -> None:
    assert module not in after_help


def test_every_public_name_loads_from_the_package() -> None:
    loaded = loaded_after(
        """
        import io_harness
        missing = [n for n in io_harness.__all__ if getattr(io_harness, n, None) is None]
        assert not missing, missing
        assert set(io_harness.__all__) <= set(dir(io_harness))
        """
    )

    assert "io_harness" in loaded


def test_the_vendor_providers_are_built_without_loading_an_sdk() -> None:
    loaded = loaded_after(
        """
        from io_harness.providers import (
            Anthropic, Fallback, OpenAI, OpenAICompatible, OpenRouter, provider_from_spec,
        )
        Fallback(
            OpenAI("m", api_key="k-openai"),
            OpenRouter("m", api_key="k-openrouter"),
            OpenAICompatible.preset("ollama", model="m"),
            Anthropic("m", api_key="k-anthropic", thinking_budget=2048),
            provider_from_spec("compatible:http://127.0.0.1:9/v1#m"),
        )
        """
    )

    assert not {"anthropic", "openai", "httpx2"} & loaded


def failed_call_loads(setup: str, expected: tuple[str, int | None, float | None]) -> set[str]:
    """The modules loaded by one call that fails; ``setup`` defines ``reply`` and ``make(url)``.

    The call goes to a loopback server answering ``reply``; the error it raises
    must have ``expected`` as its kind, status and retry-after.
    """
    call = f"""
        import asyncio
        from loopback import LoopbackServer
        from io_harness.errors import ProviderError
        from io_harness.messages import CompletionRequest, Message

        async def call(provider):
            request = CompletionRequest(model="m", system="", messages=(Message.user("hi"),))
            try:
                await provider.complete(request)
            except ProviderError as error:
                return error
            finally:
                await provider.aclose()
            raise AssertionError("the call did not fail")

        with LoopbackServer([reply]) as server:
            error = asyncio.run(call(make(server.url)))
        assert (error.kind, error.status, error.retry_after) == {expected!r}, error
        """
    prelude = f"import sys; sys.path.insert(0, {str(TESTS)!r})\n"
    return loaded_after(prelude + textwrap.dedent(setup) + textwrap.dedent(call))


def test_an_openai_call_maps_its_errors_without_loading_anthropic() -> None:
    loaded = failed_call_loads(
        """
        from wire_openai import error_reply
        from io_harness.providers import OpenAI
        reply = error_reply(429, "slow down", headers={"retry-after": "7"})
        make = lambda url: OpenAI("m", api_key="k", base_url=url + "/v1")
        """,
        expected=("rate_limited", 429, 7.0),
    )

    assert "openai" in loaded
    assert "anthropic" not in loaded


def test_an_anthropic_call_maps_its_errors_without_loading_openai() -> None:
    loaded = failed_call_loads(
        """
        from wire_anthropic import error_reply
        from io_harness.providers import Anthropic
        reply = error_reply(529, "overloaded_error", "Overloaded")
        make = lambda url: Anthropic("m", api_key="k", base_url=url)
        """,
        expected=("server", 529, None),
    )

    assert "anthropic" in loaded
    assert "openai" not in loaded


def test_the_import_time_benchmark_runs_and_prints_its_figures() -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / "import_time.py"), "--runs", "1", "--top", "3"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    for label in ("import io_harness", "ioh --help", "-X importtime"):
        assert label in done.stdout
