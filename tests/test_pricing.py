"""Money: prices per million tokens, what each call cost, and the cost budget.

Through the public API with the scripted provider: exact decimal arithmetic,
the price table's lookup and TOML loading, spend in the result, the trace and
the run list, unpriced calls counted apart (never as zero), and
``Budget.max_cost`` stopping a run before a call it cannot cover or after the
call that crossed it, across a resume too.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import TypeVar

import pytest

import support
from io_harness import (
    Anthropic,
    Budget,
    CompletionResponse,
    ConfigError,
    Fallback,
    OpenAI,
    Price,
    PriceTable,
    ProviderError,
    RunEvent,
    RunFinished,
    RunOutcome,
    StepFinished,
    Store,
    TaskContract,
    Usage,
    resume,
    run,
)
from io_harness.pricing import format_money
from io_harness.testing import ScriptedProvider, ScriptItem, call, reply
from loopback import LoopbackServer
from support import ProcessDied
from wire_anthropic import messages_stream
from wire_openai import chat_stream
from wire_openai import usage as wire_usage

MODEL = "m-test"
E = TypeVar("E")


contract = partial(support.contract, goal="make add() add", file="pkg/calc.py", needle="a + b")
"""The task of the runs here: done when pkg/calc.py holds ``a + b``."""


def read(usage: Usage, model: str = MODEL) -> CompletionResponse:
    """A turn that changes nothing (the criterion is not checked, the run goes on)."""
    return reply(calls=[call("read_file", path="pkg/calc.py")], usage=usage, model=model)


def fix(usage: Usage, model: str = MODEL) -> CompletionResponse:
    """A turn that makes the criterion pass."""
    return reply(
        calls=[call("edit_file", path="pkg/calc.py", search="a - b", replace="a + b")],
        usage=usage,
        model=model,
    )


def provider(
    script: Sequence[ScriptItem], model: str = MODEL, name: str = "scripted"
) -> ScriptedProvider:
    return ScriptedProvider(script, model=model, name=name)


class Events:
    """An observer that keeps every event."""

    def __init__(self) -> None:
        self.seen: list[RunEvent] = []

    def __call__(self, event: RunEvent) -> None:
        self.seen.append(event)

    def of(self, kind: type[E]) -> list[E]:
        return [e for e in self.seen if isinstance(e, kind)]


# -- Price: exact decimal arithmetic ---------------------------------------------


def test_a_call_costs_tokens_times_the_price_per_million_in_micro_units() -> None:
    price = Price(input=Decimal("1.25"), output=10)

    assert price.cost_micros(Usage(input_tokens=1000, output_tokens=50)) == 1250 + 500
    assert price.cost_micros(Usage()) == 0


def test_a_fraction_of_a_micro_unit_is_rounded_up() -> None:
    price = Price(input=0.1, output=0)

    assert price.cost_micros(Usage(input_tokens=3)) == 1  # 0.3 micro-units
    assert price.cost_micros(Usage(input_tokens=11)) == 2  # 1.1 micro-units


def test_float_prices_mean_their_decimal_text_not_their_binary_value() -> None:
    # Decimal(0.1) is 0.1000000000000000055...; ten tokens of it would round up to 2.
    price = Price(input=0.1, output=0.7)

    assert price.input == Decimal("0.1") and price.output == Decimal("0.7")
    assert price.cost_micros(Usage(input_tokens=10)) == 1
    assert price.cost_micros(Usage(output_tokens=10)) == 7


def test_cached_input_is_priced_apart_and_input_tokens_include_it() -> None:
    price = Price(input=2, output=8, cache_read=Decimal("0.5"), cache_write=Decimal("2.5"))
    usage = Usage(
        input_tokens=1000, cache_read_tokens=600, cache_write_tokens=100, output_tokens=50
    )

    # 300 uncached at 2, 600 read at 0.5, 100 written at 2.5, 50 out at 8.
    assert price.cost_micros(usage) == 600 + 300 + 250 + 400


def test_cache_rates_default_to_the_input_rate() -> None:
    usage = Usage(
        input_tokens=1000, cache_read_tokens=600, cache_write_tokens=100, output_tokens=50
    )

    assert Price(input=2, output=8).cost_micros(usage) == 1000 * 2 + 50 * 8
    only_read = Price(input=2, output=8, cache_read=Decimal("0.5"))
    assert only_read.cost_micros(usage) == 300 * 2 + 600 // 2 + 100 * 2 + 50 * 8


def test_reasoning_tokens_are_inside_the_output_tokens_not_on_top() -> None:
    price = Price(input=1, output=4)

    assert price.cost_micros(Usage(output_tokens=100, reasoning_tokens=60)) == 400


def test_the_input_floor_uses_the_cheapest_input_rate() -> None:
    assert Price(input=2, output=8).input_floor_micros(1000) == 2000
    cheap_read = Price(input=2, output=8, cache_read=Decimal("0.2"), cache_write=3)
    assert cheap_read.input_floor_micros(1000) == 200
    assert cheap_read.input_floor_micros(3) == 1  # 0.6, rounded up


@pytest.mark.parametrize(
    "fields",
    [
        {"input": -1, "output": 1},
        {"input": 1, "output": -0.01},
        {"input": 1, "output": 1, "cache_read": -1},
        {"input": 1},
        {"input": "lots", "output": 1},
        {"input": float("inf"), "output": 1},
        {"input": 1, "output": 1, "per": "token"},
    ],
)
def test_a_bad_price_is_a_config_error(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="Price"):
        Price(**fields)


def test_money_is_shown_to_the_micro_unit() -> None:
    assert format_money(1_234_567, "USD") == "1.234567 USD"
    assert format_money(1750) == "0.001750"
    assert format_money(0) == "0.000000"


# -- PriceTable: lookup ------------------------------------------------------------


def test_an_exact_name_beats_a_glob_whatever_the_order() -> None:
    glob, exact = Price(input=1, output=1), Price(input=9, output=9)
    prices = PriceTable({"gpt-5*": glob, "gpt-5-mini": exact})

    assert prices.price_for("gpt-5-mini") is exact
    assert prices.price_for("gpt-5-nano") is glob
    assert prices.price_for("claude-sonnet") is None


def test_a_glob_matches_the_whole_name_case_sensitively() -> None:
    prices = PriceTable({"claude-*-4-5*": Price(input=3, output=15)})

    assert prices.price_for("claude-sonnet-4-5-20250929") is not None
    assert prices.price_for("Claude-sonnet-4-5") is None
    assert prices.price_for("my-claude-sonnet-4-5") is None


def test_the_served_model_is_priced_when_the_asked_one_is_not_and_vice_versa() -> None:
    served, asked = Price(input=1, output=1), Price(input=2, output=2)

    assert PriceTable({"served-1": served}).price_for("served-1", "asked") is served
    assert PriceTable({"asked": asked}).price_for("served-1", "asked") is asked
    both = PriceTable({"served-1": served, "asked": asked})
    assert both.price_for("served-1", "asked") is served
    assert both.price_for(None, "asked") is asked
    assert both.price_for("", "asked") is asked
    assert PriceTable({}).price_for("served-1", "asked") is None


def test_a_table_takes_plain_mappings_and_checks_them() -> None:
    prices = PriceTable({"m": {"input": "0.25", "output": 2}}, currency="EUR")

    assert prices.models["m"] == Price(input=Decimal("0.25"), output=2)
    assert prices.currency == "EUR"
    with pytest.raises(ConfigError, match="output"):
        PriceTable({"m": {"input": 1}})


# -- PriceTable.from_toml --------------------------------------------------------------


def write(tmp_path: Path, text: str, name: str = "prices.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_price_file_loads_exact_prices_globs_and_currency(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'currency = "EUR"\n'
        '[models."gpt-5-mini"]\ninput = 0.25\noutput = 2.00\ncache_read = 0.025\n'
        '[models."claude-sonnet-4-5*"]\ninput = 3\noutput = 15\n'
        "cache_read = 0.30\ncache_write = 3.75\n"
        '[models."gpt-4.1"]\ninput = 0.1\noutput = 0.3\n',
    )

    prices = PriceTable.from_toml(path)

    assert prices.currency == "EUR"
    mini = prices.models["gpt-5-mini"]
    assert (mini.input, mini.output, mini.cache_read, mini.cache_write) == (
        Decimal("0.25"),
        Decimal("2.00"),
        Decimal("0.025"),
        None,
    )
    assert prices.price_for("claude-sonnet-4-5-20250929") == prices.models["claude-sonnet-4-5*"]
    dotted = prices.models["gpt-4.1"]
    assert dotted.input == Decimal("0.1")  # the TOML float 0.1 is one tenth, exactly
    assert dotted.cost_micros(Usage(input_tokens=10, output_tokens=10)) == 1 + 3


def test_a_price_file_without_currency_is_usd_and_str_path_works(tmp_path: Path) -> None:
    path = write(tmp_path, '[models."m"]\ninput = 1\noutput = 2\n')

    assert PriceTable.from_toml(str(path)).currency == "USD"


def test_an_empty_price_file_is_an_empty_table(tmp_path: Path) -> None:
    prices = PriceTable.from_toml(write(tmp_path, ""))

    assert prices.models == {} and prices.price_for("anything") is None


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('currency = "USD"\nmodel = {}\n', "unknown key 'model'"),
        ('[models."m"]\ninput = 1\n', "models.m: output"),
        ('[models."m"]\ninput = -1\noutput = 1\n', "models.m: input"),
        ('[models."m"]\ninput = 1\noutput = 1\ncache_write = -0.5\n', "models.m: cache_write"),
        ('[models."m"]\ninput = 1\noutput = 1\ncahce_read = 0.1\n', "models.m: cahce_read"),
        ('[models."m"]\ninput = "cheap"\noutput = 1\n', "models.m: input"),
        ("models = 3\n", "models"),
        ("models = {m = 3}\n", "models"),
        ("currency = 840\n", "currency"),
        ('[models."m"\ninput = 1\n', "not valid TOML"),
    ],
)
def test_a_bad_price_file_is_a_config_error_naming_the_file_and_key(
    tmp_path: Path, text: str, named: str
) -> None:
    path = write(tmp_path, text)

    with pytest.raises(ConfigError) as caught:
        PriceTable.from_toml(path)

    message = str(caught.value)
    assert str(path) in message
    assert named in message


def test_a_missing_price_file_is_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.toml"

    with pytest.raises(ConfigError, match=r"nowhere\.toml"):
        PriceTable.from_toml(missing)


# -- Budget.max_cost ------------------------------------------------------------------


def test_max_cost_is_exact_and_rounds_down_to_micro_units() -> None:
    assert Budget(max_cost=0.1).max_cost == Decimal("0.1")
    assert Budget(max_cost=0.1).max_cost_micros == 100_000
    assert Budget(max_cost=Decimal("0.0000015")).max_cost_micros == 1
    assert Budget(max_cost="2").max_cost_micros == 2_000_000
    assert Budget().max_cost is None and Budget().max_cost_micros is None


@pytest.mark.parametrize("value", [0, -1, "lots", float("nan")])
def test_a_bad_max_cost_is_a_config_error(value: object) -> None:
    with pytest.raises(ConfigError, match="max_cost"):
        Budget(max_cost=value)


def test_max_cost_from_a_contract_file_is_an_exact_decimal(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    body = (
        'goal = "g"\nroot = "ws"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "a.txt"\nneedle = "x"\n'
    )
    half = write(tmp_path, body + "[budget]\nmax_cost = 0.5\n", "half.toml")
    tenth = write(tmp_path, body + "[budget]\nmax_cost = 0.1\n", "tenth.toml")

    loaded = TaskContract.from_toml(half)

    assert loaded.budget.max_cost == Decimal("0.5")
    assert isinstance(loaded.budget.max_cost, Decimal)
    assert TaskContract.from_toml(tenth).budget.max_cost == Decimal("0.1")
    # The store keeps the contract as JSON; resume must read back the same budget.
    again = TaskContract.model_validate_json(TaskContract.from_toml(tenth).model_dump_json())
    assert again.budget.max_cost == Decimal("0.1")


def test_a_bad_max_cost_in_a_contract_file_names_the_key(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    path = write(
        tmp_path,
        'goal = "g"\nroot = "ws"\n'
        '[verify]\nkind = "workspace_file_contains"\nfile = "a.txt"\nneedle = "x"\n'
        "[budget]\nmax_cost = -2\n",
    )

    with pytest.raises(ConfigError, match=r"budget\.max_cost"):
        TaskContract.from_toml(path)


# -- spend in a run ----------------------------------------------------------------------

PRICE = Price(input=1, output=4, cache_read=Decimal("0.1"))
TURNS = [
    Usage(input_tokens=1000, output_tokens=10),
    Usage(input_tokens=1500, cache_read_tokens=1000, output_tokens=20),
    Usage(input_tokens=2000, cache_read_tokens=1500, output_tokens=7, reasoning_tokens=3),
]
COSTS = [PRICE.cost_micros(u) for u in TURNS]


async def test_a_priced_run_adds_up_each_calls_cost(project: Path, store: Store) -> None:
    assert COSTS == [1040, 500 + 100 + 80, 500 + 150 + 28]
    scripted = provider([read(TURNS[0]), read(TURNS[1], model="m-test-0601"), fix(TURNS[2])])
    events = Events()

    result = await run(
        contract(project),
        scripted,
        store=store,
        prices=PriceTable({MODEL: PRICE}),
        observer=events,
    )

    assert result.outcome is RunOutcome.SUCCESS
    assert result.cost_micros == sum(COSTS) == 2398
    assert result.unpriced_calls == 0
    assert isinstance(result.cost, Decimal)
    assert result.cost == Decimal("0.002398")
    trace = store.trace(result.run_id)
    assert [c.cost_micros for c in trace.provider_calls] == COSTS
    assert [c.served_model for c in trace.provider_calls] == [MODEL, "m-test-0601", MODEL]
    assert [s.cost_micros for s in trace.steps] == COSTS
    summary = store.runs()[0]
    assert (summary.cost_micros, summary.unpriced_calls) == (sum(COSTS), 0)
    assert trace.run.cost_micros == sum(COSTS)
    steps = events.of(StepFinished)
    assert [e.cost_micros for e in steps] == COSTS
    assert [e.total_cost_micros for e in steps] == [1040, 1040 + 680, 2398]
    (finished,) = events.of(RunFinished)
    assert (finished.cost_micros, finished.unpriced_calls) == (sum(COSTS), 0)


async def test_the_stored_result_of_a_finished_run_carries_its_spend(
    project: Path, store: Store
) -> None:
    prices = PriceTable({MODEL: PRICE})
    finished = await run(
        contract(project), provider([read(TURNS[0]), fix(TURNS[1])]), store=store, prices=prices
    )

    again = await resume(finished.run_id, provider([]), store=store, prices=prices)

    assert again == finished
    assert again.cost_micros == COSTS[0] + COSTS[1]


async def test_a_call_is_priced_by_its_served_model_when_the_asked_one_has_no_price(
    project: Path, store: Store
) -> None:
    scripted = provider([fix(TURNS[0], model="real-model-2025")], model="alias")

    result = await run(
        contract(project),
        scripted,
        store=store,
        prices=PriceTable({"real-model-*": Price(input=2, output=1)}),
    )

    assert (result.cost_micros, result.unpriced_calls) == (2000 + 10, 0)
    (row,) = store.trace(result.run_id).provider_calls
    assert (row.model, row.served_model, row.cost_micros) == (
        "alias",
        "real-model-2025",
        2010,
    )


async def test_a_call_is_priced_by_the_asked_model_when_the_served_one_has_no_price(
    project: Path, store: Store
) -> None:
    scripted = provider([fix(TURNS[0], model="unheard-of")])

    result = await run(contract(project), scripted, store=store, prices=PriceTable({MODEL: PRICE}))

    assert (result.cost_micros, result.unpriced_calls) == (COSTS[0], 0)


async def test_a_failed_attempt_of_a_priced_model_costs_nothing(
    project: Path, store: Store
) -> None:
    scripted = provider([ProviderError("server", "boom", retry_after=0), fix(TURNS[0])])

    result = await run(contract(project), scripted, store=store, prices=PriceTable({MODEL: PRICE}))

    assert result.outcome is RunOutcome.SUCCESS
    rows = store.trace(result.run_id).provider_calls
    assert [(r.error_kind, r.cost_micros) for r in rows] == [("server", 0), (None, 1040)]
    assert (result.cost_micros, result.unpriced_calls) == (1040, 0)


# -- unpriced calls ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "prices",
    [None, PriceTable({"some-other-model": PRICE})],
    ids=["no table", "model not in the table"],
)
async def test_calls_without_a_price_are_unpriced_never_zero(
    project: Path, store: Store, prices: PriceTable | None
) -> None:
    scripted = provider([read(TURNS[0]), fix(TURNS[1])])
    events = Events()

    result = await run(contract(project), scripted, store=store, prices=prices, observer=events)

    assert result.outcome is RunOutcome.SUCCESS
    assert (result.cost_micros, result.unpriced_calls) == (0, 2)
    assert result.cost == 0
    trace = store.trace(result.run_id)
    assert [c.cost_micros for c in trace.provider_calls] == [None, None]
    summary = store.runs()[0]
    assert (summary.cost_micros, summary.unpriced_calls) == (0, 2)
    assert [e.cost_micros for e in events.of(StepFinished)] == [None, None]
    (finished,) = events.of(RunFinished)
    assert finished.unpriced_calls == 2


async def test_failed_attempts_are_not_unpriced_calls(project: Path, store: Store) -> None:
    scripted = provider(
        [
            ProviderError("server", "overloaded", retry_after=0),
            ProviderError("rate_limited", "slow down", retry_after=0),
            fix(TURNS[0]),
        ]
    )

    result = await run(contract(project), scripted, store=store)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.unpriced_calls == 1
    assert store.runs()[0].unpriced_calls == 1
    rows = store.trace(result.run_id).provider_calls
    assert [(r.error_kind, r.cost_micros) for r in rows] == [
        ("server", None),
        ("rate_limited", None),
        (None, None),
    ]


async def test_a_run_that_fails_before_any_answer_has_no_unpriced_calls(
    project: Path, store: Store
) -> None:
    scripted = provider([ProviderError("auth", "bad key", status=401)])

    result = await run(contract(project), scripted, store=store)

    assert result.outcome is RunOutcome.PROVIDER_FAILED
    assert (result.cost_micros, result.unpriced_calls) == (0, 0)


async def test_priced_and_unpriced_calls_are_counted_apart(project: Path, store: Store) -> None:
    scripted = provider(
        [read(TURNS[0], model="priced-1"), fix(TURNS[1], model="mystery")], model="alias"
    )
    events = Events()

    result = await run(
        contract(project),
        scripted,
        store=store,
        prices=PriceTable({"priced-*": PRICE}),
        observer=events,
    )

    assert (result.cost_micros, result.unpriced_calls) == (COSTS[0], 1)
    rows = store.trace(result.run_id).provider_calls
    assert [r.cost_micros for r in rows] == [COSTS[0], None]
    assert [e.cost_micros for e in events.of(StepFinished)] == [COSTS[0], None]
    assert [e.total_cost_micros for e in events.of(StepFinished)] == [COSTS[0], COSTS[0]]


# -- the cost budget ------------------------------------------------------------------------

ONE_PER_MILLION = PriceTable({MODEL: Price(input=1, output=1)})
"""One micro-unit per token: a call's cost is its token count."""


async def test_the_run_stops_after_the_call_that_crossed_the_budget(
    project: Path, store: Store
) -> None:
    scripted = provider(
        [
            read(Usage(input_tokens=100, output_tokens=400_000)),
            read(Usage(input_tokens=200, output_tokens=700_000)),
            fix(Usage(input_tokens=300, output_tokens=1)),
        ]
    )
    events = Events()

    result = await run(
        contract(project, max_cost=1),
        scripted,
        store=store,
        prices=ONE_PER_MILLION,
        observer=events,
    )

    assert result.outcome is RunOutcome.COST_BUDGET_EXCEEDED
    assert len(scripted.requests) == 2
    assert scripted.remaining == 1
    assert result.steps == 2
    assert result.cost_micros == 400_100 + 700_200
    assert result.cost == Decimal("1.1003")
    trace = store.trace(result.run_id)
    assert [c.cost_micros for c in trace.provider_calls] == [400_100, 700_200]
    assert [s.cost_micros for s in trace.steps] == [400_100, 700_200]
    assert trace.run.outcome == "cost_budget_exceeded"
    (finished,) = events.of(RunFinished)
    assert finished.outcome == "cost_budget_exceeded"
    assert finished.cost_micros == 1_100_300


async def test_a_step_that_passes_the_check_succeeds_even_if_it_crossed_the_budget(
    project: Path, store: Store
) -> None:
    scripted = provider([fix(Usage(input_tokens=100, output_tokens=2_000_000))])

    result = await run(contract(project, max_cost=1), scripted, store=store, prices=ONE_PER_MILLION)

    assert result.outcome is RunOutcome.SUCCESS
    assert result.cost_micros == 2_000_100


async def test_the_run_stops_before_a_call_the_remaining_budget_cannot_cover(
    project: Path, store: Store
) -> None:
    # The next prompt holds the last one's 600k input tokens: at least 600k micro-units,
    # and 600k spent + 600k > the 1M budget, though 600k spent is under it.
    scripted = provider(
        [
            read(Usage(input_tokens=600_000, output_tokens=10)),
            fix(Usage(input_tokens=600_100, output_tokens=10)),
        ]
    )

    result = await run(contract(project, max_cost=1), scripted, store=store, prices=ONE_PER_MILLION)

    assert result.outcome is RunOutcome.COST_BUDGET_EXCEEDED
    assert len(scripted.requests) == 1
    assert result.steps == 1
    assert result.cost_micros == 600_010  # under the budget: only the floor stopped it
    trace = store.trace(result.run_id)
    assert len(trace.provider_calls) == 1
    assert trace.run.outcome == "cost_budget_exceeded"


async def test_the_floor_uses_the_cheapest_input_rate_so_a_cached_prompt_still_goes(
    project: Path, store: Store
) -> None:
    # With cache reads at a tenth, 600k input tokens may cost as little as 60k.
    prices = PriceTable({MODEL: Price(input=1, output=1, cache_read=Decimal("0.1"))})
    scripted = provider(
        [
            read(Usage(input_tokens=600_000, output_tokens=10)),
            fix(Usage(input_tokens=600_100, cache_read_tokens=600_000, output_tokens=10)),
        ]
    )

    result = await run(contract(project, max_cost=1), scripted, store=store, prices=prices)

    assert result.outcome is RunOutcome.SUCCESS
    assert len(scripted.requests) == 2
    assert result.cost_micros == 600_010 + (100 + 60_000 + 10)


async def test_a_budget_that_cannot_cover_the_first_prompt_asks_nothing(
    project: Path, store: Store
) -> None:
    scripted = provider([fix(Usage(input_tokens=1, output_tokens=1))])

    result = await run(
        contract(project, max_cost=Decimal("0.000002")),
        scripted,
        store=store,
        prices=ONE_PER_MILLION,
    )

    assert result.outcome is RunOutcome.COST_BUDGET_EXCEEDED
    assert scripted.requests == []
    assert (result.steps, result.cost_micros) == (0, 0)
    assert store.trace(result.run_id).provider_calls == ()


async def test_max_cost_without_a_price_table_is_a_config_error_before_any_call(
    project: Path, store: Store
) -> None:
    scripted = provider([fix(TURNS[0])])

    with pytest.raises(ConfigError, match="max_cost") as caught:
        await run(contract(project, max_cost=1), scripted, store=store)

    assert MODEL in str(caught.value)
    assert scripted.requests == []
    assert store.runs() == []


async def test_max_cost_with_a_table_that_lacks_the_model_is_a_config_error(
    project: Path, store: Store
) -> None:
    scripted = provider([fix(TURNS[0])], model="unpriced-model")

    with pytest.raises(ConfigError, match="unpriced-model"):
        await run(contract(project, max_cost=1), scripted, store=store, prices=ONE_PER_MILLION)

    assert scripted.requests == []
    assert store.runs() == []


async def test_max_cost_needs_a_price_for_every_fallback_member(
    project: Path, store: Store
) -> None:
    primary = provider([fix(TURNS[0])], name="primary")
    backup = provider([fix(TURNS[0])], model="backup-model", name="backup")

    with pytest.raises(ConfigError, match="backup-model"):
        await run(
            contract(project, max_cost=1),
            Fallback(primary, backup),
            store=store,
            prices=ONE_PER_MILLION,
        )

    assert primary.requests == [] and backup.requests == []
    assert store.runs() == []

    both = PriceTable({MODEL: Price(input=1, output=1), "backup-model": Price(input=1, output=1)})
    result = await run(contract(project, max_cost=1), Fallback(primary, backup), prices=both)
    assert result.outcome is RunOutcome.SUCCESS
    assert backup.requests == []


async def test_a_fallback_members_answer_is_priced_by_its_own_model(
    project: Path, store: Store
) -> None:
    primary = provider([ProviderError("server", "down", retry_after=0)], name="primary")
    backup = provider([fix(TURNS[0], model="backup-model")], model="backup-model", name="backup")
    prices = PriceTable({MODEL: Price(input=1, output=1), "backup-model": Price(input=3, output=3)})

    result = await run(
        contract(project, max_cost=1, max_retries=0),
        Fallback(primary, backup),
        store=store,
        prices=prices,
    )

    assert result.outcome is RunOutcome.SUCCESS
    rows = store.trace(result.run_id).provider_calls
    assert [(r.provider, r.cost_micros) for r in rows] == [
        ("primary", 0),
        ("backup", 3 * (1000 + 10)),
    ]
    assert result.cost_micros == 3030


# -- resume -----------------------------------------------------------------------------------


EXPENSIVE = Usage(input_tokens=1000, output_tokens=399_000)
"""400k micro-units at one per token."""


async def test_resume_counts_the_money_already_spent(project: Path, store: Store) -> None:
    dying = provider([read(EXPENSIVE), read(EXPENSIVE), ProcessDied()])
    with pytest.raises(ProcessDied):
        await run(
            contract(project, max_cost=1),
            dying,
            store=store,
            run_id="r1",
            prices=ONE_PER_MILLION,
        )
    assert store.runs()[0].status == "running"
    assert store.runs()[0].cost_micros == 800_000

    # 400k more is under the budget on its own, but not on top of the 800k spent.
    resumed = provider([read(EXPENSIVE), read(EXPENSIVE), fix(EXPENSIVE)])
    result = await resume("r1", resumed, store=store, prices=ONE_PER_MILLION)

    assert result.outcome is RunOutcome.COST_BUDGET_EXCEEDED
    assert len(resumed.requests) == 1
    assert (result.steps, result.cost_micros) == (3, 1_200_000)
    assert store.runs()[0].cost_micros == 1_200_000
    rows = store.trace("r1").provider_calls
    assert [r.cost_micros for r in rows] == [400_000] * 3


async def test_resume_carries_unpriced_calls_and_adds_priced_ones(
    project: Path, store: Store
) -> None:
    dying = provider([read(TURNS[0]), ProcessDied()])
    with pytest.raises(ProcessDied):
        await run(contract(project), dying, store=store, run_id="r2")

    result = await resume(
        "r2", provider([fix(TURNS[1])]), store=store, prices=PriceTable({MODEL: PRICE})
    )

    assert result.outcome is RunOutcome.SUCCESS
    assert (result.cost_micros, result.unpriced_calls) == (COSTS[1], 1)
    summary = store.runs()[0]
    assert (summary.cost_micros, summary.unpriced_calls) == (COSTS[1], 1)


async def test_a_resume_of_a_run_with_max_cost_is_priced_by_the_table_it_started_with(
    project: Path, store: Store
) -> None:
    dying = provider([read(TURNS[0]), ProcessDied()])
    with pytest.raises(ProcessDied):
        await run(
            contract(project, max_cost=1),
            dying,
            store=store,
            run_id="r3",
            prices=ONE_PER_MILLION,
        )
    spent = store.runs()[0].cost_micros
    assert spent > 0
    resumed = provider([fix(TURNS[1])])

    result = await resume("r3", resumed, store=store)  # no prices given: the stored ones

    assert result.outcome is RunOutcome.SUCCESS
    assert result.unpriced_calls == 0 and result.cost_micros > spent


# -- each vendor's cached tokens, priced once ---------------------------------------------------


async def test_cached_tokens_from_each_vendors_wire_are_priced_once(
    project: Path, store: Store
) -> None:
    edit = json.dumps({"path": "pkg/calc.py", "search": "a - b", "replace": "a + b"})
    prices = PriceTable(
        {
            "gpt-cache": Price(input=Decimal("1.25"), output=10, cache_read=Decimal("0.125")),
            "claude-cache": Price(
                input=3, output=15, cache_read=Decimal("0.3"), cache_write=Decimal("3.75")
            ),
        }
    )
    # OpenAI: 1000 prompt tokens of which 800 cached, 50 out.
    openai_reply = chat_stream(
        tool_calls=[("call_e", "edit_file", edit)], usage=wire_usage(1000, 50, cached=800)
    )
    # Anthropic: 100 uncached, 1000 read from the cache, 200 written to it, 40 out.
    anthropic_reply = messages_stream(
        tool_calls=[("toolu_e", "edit_file", edit)],
        usage={
            "input_tokens": 100,
            "cache_read_input_tokens": 1000,
            "cache_creation_input_tokens": 200,
            "output_tokens": 40,
        },
    )
    costs = {}
    for name, reply_ in (("openai", openai_reply), ("anthropic", anthropic_reply)):
        (project / "pkg" / "calc.py").write_text("def add(a, b):\n    return a - b\n")
        with LoopbackServer([reply_]) as server:
            vendor: OpenAI | Anthropic
            if name == "openai":
                vendor = OpenAI("gpt-cache", api_key="sk-test-x", base_url=f"{server.url}/v1")
            else:
                vendor = Anthropic("claude-cache", api_key="sk-ant-test-x", base_url=server.url)
            result = await run(contract(project, max_cost=1), vendor, store=store, prices=prices)
            await vendor.aclose()
        assert result.outcome is RunOutcome.SUCCESS, name
        costs[name] = result.cost_micros

    assert costs["openai"] == 200 * 1.25 + 800 * 0.125 + 50 * 10 == 850
    assert costs["anthropic"] == 100 * 3 + 300 + 200 * 3.75 + 40 * 15 == 1950
