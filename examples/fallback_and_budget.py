"""A fallback chain and a cost budget, offline.

Live, the chain would be ``Fallback(Anthropic.from_env(), OpenRouter.from_env())``;
here two scripted providers stand in: the first is down (a 503 every time),
so after its retries the second answers. The price table prices both models,
so the run's spend is exact, and ``max_cost`` would stop it if it ran over.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from io_harness import (
    Budget,
    Fallback,
    FileContains,
    PriceTable,
    ProviderError,
    RunOutcome,
    Store,
    TaskContract,
    Usage,
    run,
)
from io_harness.testing import ScriptedProvider, call, reply


async def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        contract = TaskContract.file(
            "write a haiku about retries",
            Path(scratch, "haiku.txt"),
            FileContains("again"),
            budget=Budget(max_retries=1, max_cost=0.05),
        )
        down = ProviderError("server", "503 Service Unavailable", status=503)
        primary = ScriptedProvider([down, down], name="primary", model="big-model")
        secondary = ScriptedProvider(
            [
                reply(
                    calls=[call("write_file", content="try, wait, try again\n")],
                    usage=Usage(input_tokens=1_200, output_tokens=40),
                    model="small-model-2026",
                )
            ],
            name="secondary",
            model="small-model",
        )
        prices = PriceTable(
            {
                "big-model": {"input": 3, "output": 15},
                "small-model*": {"input": "0.25", "output": 2},
            }
        )
        with Store.open(Path(scratch, "runs.db")) as store:
            result = await run(contract, Fallback(primary, secondary), store=store, prices=prices)
            calls = store.trace(result.run_id).provider_calls

        assert result.outcome is RunOutcome.SUCCESS
        for attempt in calls:
            print(attempt.attempt, attempt.provider, attempt.error_kind or "answered")
        # 1,200 x 0.25 + 40 x 2 = 380 micro-units
        assert result.cost_micros == 380 and result.unpriced_calls == 0
        print(f"spent {result.cost} USD")


if __name__ == "__main__":
    asyncio.run(main())
