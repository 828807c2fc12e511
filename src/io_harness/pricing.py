"""Money: the operator's prices per million tokens, and what each call cost.

Amounts are kept in integer **micro-units** of the operator's currency (one
millionth of a dollar, say), so sums never drift. A price is given per
million tokens, which makes a call's cost in micro-units simply
``tokens * price`` — exact in decimal arithmetic, then rounded up to a whole
micro-unit, so a budget is never under-counted.

A call whose model has no price is *unpriced*: counted as such, never as zero.
"""

from __future__ import annotations

import fnmatch
import json
import math
from collections.abc import Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator

from io_harness._validation import CheckedModel, describe_validation, loading, read_toml
from io_harness.errors import ConfigError
from io_harness.messages import Usage

__all__ = ["MICROS", "Price", "PriceTable", "format_money", "run_spend"]

MICROS = 1_000_000
"""Micro-units in one unit of currency."""


def _decimal(value: object) -> object:
    # TOML and Python floats are binary; go through their shortest text so that
    # 0.1 means one tenth, not 0.1000000000000000055...
    return Decimal(repr(value)) if isinstance(value, float) else value


class Price(CheckedModel):
    """What a model costs per million tokens, in the operator's currency.

    ``input`` is for input tokens read without a cache; ``cache_read`` and
    ``cache_write`` (each defaulting to ``input``) for input tokens read from
    or written to the vendor's prompt cache; ``output`` for output tokens,
    reasoning included.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: Decimal = Field(ge=0)
    output: Decimal = Field(ge=0)
    cache_read: Decimal | None = Field(None, ge=0)
    cache_write: Decimal | None = Field(None, ge=0)
    context_window: int | None = Field(None, gt=0)
    """Tokens the model takes in one request, for compaction (``None``: not said)."""

    @field_validator("input", "output", "cache_read", "cache_write", mode="before")
    @classmethod
    def _exact(cls, value: object) -> object:
        return _decimal(value)

    def cost_micros(self, usage: Usage) -> int:
        """What ``usage`` costs, in micro-units, rounded up."""
        cache_read = self.cache_read if self.cache_read is not None else self.input
        cache_write = self.cache_write if self.cache_write is not None else self.input
        uncached = max(0, usage.input_tokens - usage.cache_read_tokens - usage.cache_write_tokens)
        total = (
            uncached * self.input
            + usage.cache_read_tokens * cache_read
            + usage.cache_write_tokens * cache_write
            + usage.output_tokens * self.output
        )
        return math.ceil(total)

    def input_floor_micros(self, input_tokens: int) -> int:
        """The least ``input_tokens`` of input can cost: all of it at the cheapest input rate."""
        rates = [self.input]
        rates += [rate for rate in (self.cache_read, self.cache_write) if rate is not None]
        return math.ceil(input_tokens * min(rates))


class PriceTable:
    """Prices by model name; a name may be a glob (``gpt-5*``). Exact names win over globs.

    Build one from a mapping or load one from TOML with :meth:`from_toml`::

        currency = "USD"            # a label for display; optional

        [models."gpt-5-mini"]
        input = 0.25                # per million tokens
        output = 2.00
        cache_read = 0.025          # optional, default: input

        [models."claude-sonnet-4-5*"]
        input = 3
        output = 15
        cache_read = 0.30
        cache_write = 3.75
    """

    def __init__(
        self, models: Mapping[str, Price | Mapping[str, Any]], *, currency: str = "USD"
    ) -> None:
        self.currency = currency
        self.models: dict[str, Price] = {
            name: price if isinstance(price, Price) else Price(**price)
            for name, price in models.items()
        }

    @classmethod
    def from_toml(cls, path: str | Path) -> PriceTable:
        """Load prices from TOML; a bad file or key is a :class:`ConfigError` naming it."""
        path = Path(path)
        data = read_toml(path, "price table")
        unknown = sorted(set(data) - {"currency", "models"})
        if unknown:
            raise ConfigError(f"{path}: unknown key {unknown[0]!r}; the keys are: currency, models")
        models = data.get("models", {})
        if not isinstance(models, dict) or not all(isinstance(v, dict) for v in models.values()):
            raise ConfigError(f'{path}: models: give one [models."NAME"] table per model')
        prices = {}
        for name, fields in models.items():
            try:
                with loading():
                    prices[name] = Price(**fields)
            except ValidationError as exc:
                where = describe_validation(exc)
                raise ConfigError(f"{path}: models.{name}: {where}") from None
        currency = data.get("currency", "USD")
        if not isinstance(currency, str):
            raise ConfigError(f'{path}: currency: give a label such as "USD"')
        return cls(prices, currency=currency)

    def to_json(self) -> str:
        """The table as JSON, as a run stores it so a resume needs no prices given again."""
        models = {name: price.model_dump(mode="json") for name, price in self.models.items()}
        return json.dumps({"currency": self.currency, "models": models})

    @classmethod
    def from_json(cls, text: str) -> PriceTable:
        """A table from :meth:`to_json`; anything else is a :class:`ConfigError`."""
        try:
            data = json.loads(text)
            with loading():
                return cls(data["models"], currency=data["currency"])
        except (ValueError, KeyError, TypeError) as exc:  # ValidationError is a ValueError
            raise ConfigError(f"not a stored price table: {exc}") from None

    def price_for(self, *models: str | None) -> Price | None:
        """The price of the first of ``models`` the table knows (exact names first)."""
        named = [model for model in models if model]
        for model in named:
            if model in self.models:
                return self.models[model]
        for model in named:
            for pattern, price in self.models.items():
                if fnmatch.fnmatchcase(model, pattern):
                    return price
        return None

    def __repr__(self) -> str:
        return f"PriceTable({len(self.models)} models, currency={self.currency!r})"


def format_money(micros: int, currency: str = "") -> str:
    """Micro-units as a decimal amount, e.g. ``0.012345 USD``."""
    amount = Decimal(micros) / MICROS
    text = f"{amount:.6f}"
    return f"{text} {currency}".strip()


def run_spend(cost_micros: int, unpriced_calls: int, currency: str | None) -> str:
    """A run's spend in its price table's currency; ``unpriced`` (never a zero) without one.

    Calls the table had no price for are counted beside the priced amount; this
    is how ``ioh`` and the HTML report word every spend.
    """
    calls = _count(unpriced_calls, "call", "calls")
    if currency is None or (unpriced_calls and not cost_micros):
        return f"unpriced ({calls})" if unpriced_calls else "unpriced"
    money = format_money(cost_micros, currency)
    if not unpriced_calls:
        return money
    return f"{money} + {_count(unpriced_calls, 'unpriced call', 'unpriced calls')}"


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"
