"""Where a run's provider connects, as the run keeps it, so that a resume connects there too.

A vendor provider takes its base URL from its argument or else from the
environment (``ANTHROPIC_BASE_URL``, ``OPENAI_BASE_URL``, ...), so the same
spec in another shell can reach another host: a gateway's run, resumed where
the variable is not set, would send its conversation to the vendor's public
host. A run therefore stores each member of its provider as a
:class:`ProviderPlace` (name, model, endpoints, base URL), and a resume
compares (:func:`moved_member`) and ``ioh`` rebuilds a vendor's spec with the
base URL stored (:func:`started_base_urls`).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict

from io_harness._urls import without_password
from io_harness.providers._base import Provider
from io_harness.providers._fallback import members_of

__all__ = [
    "ProviderPlace",
    "base_url_variable",
    "moved_member",
    "provider_places",
    "started_base_urls",
]


class ProviderPlace(BaseModel):
    """One member of a run's provider as the run started with it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    model: str
    endpoints: tuple[str, ...] = ()
    """The hosts (``host:port``) it connected to; none for an offline provider."""
    base_url: str | None = None
    """Its base URL; ``None`` when it has none, or when the URL held a credential (which the
    store never keeps)."""

    @classmethod
    def of(cls, provider: Provider) -> ProviderPlace:
        """Where ``provider`` (one member, not a Fallback) connects."""
        url = getattr(provider, "base_url", None)
        kept = url if isinstance(url, str) and without_password(url) == url else None
        return cls(
            name=str(provider.name),
            model=str(provider.model),
            endpoints=tuple(provider.endpoints()),
            base_url=kept,
        )


def provider_places(provider: Provider) -> tuple[ProviderPlace, ...]:
    """Where each member of ``provider`` connects, in the order the loop asks them."""
    return tuple(ProviderPlace.of(member) for member in members_of(provider))


def moved_member(
    started: Sequence[ProviderPlace], provider: Provider
) -> tuple[Provider, tuple[str, ...]] | None:
    """The first member of ``provider`` that would connect where no member of its name
    connected when the run started, with the endpoints they connected to; ``None`` if none.

    A member of a name the run did not start with is another provider, chosen by
    whoever resumes; one that connects nowhere (a script, a replay) sends nothing.
    """
    for member in members_of(provider):
        before = tuple(
            dict.fromkeys(
                e for place in started if place.name == member.name for e in place.endpoints
            )
        )
        now = tuple(member.endpoints())
        if before and not set(now) <= set(before):
            return member, before
    return None


def started_base_urls(started: Sequence[ProviderPlace]) -> dict[str, str]:
    """The base URL the run started each provider name with, where it stored exactly one."""
    urls: dict[str, set[str | None]] = {}
    for place in started:
        urls.setdefault(place.name, set()).add(place.base_url)
    kept: dict[str, str] = {}
    for name, given in urls.items():
        url = given.pop() if len(given) == 1 else None
        if url is not None:
            kept[name] = url
    return kept


def base_url_variable(provider: Provider) -> str | None:
    """The environment variable ``provider`` reads its base URL from, if it reads one."""
    variable = getattr(type(provider), "base_url_env", None)
    return variable if isinstance(variable, str) else None
