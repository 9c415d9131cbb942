"""The bounded retry: policy arithmetic, when it retries, and how it gives up (no sockets)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import pytest
import trio
from hypothesis import given, settings
from hypothesis import strategies as st

from robotad.agent.provider import ProviderError
from robotad.providers.failures import ProviderFailure
from robotad.providers.retry import RetryPolicy, StreamProgress, call_with_retries

from .conftest import Recorder


class Script:
    """An attempt function failing with the given errors in turn, then answering "ok"."""

    def __init__(self, *failures: BaseException, text_first: StreamProgress | None = None) -> None:
        self.failures = list(failures)
        self.calls = 0
        self.text_first = text_first

    async def __call__(self) -> str:
        self.calls += 1
        if self.text_first is not None:
            self.text_first.on_text("partial")
        if self.failures:
            raise self.failures.pop(0)
        return "ok"


class Sleeps:
    def __init__(self) -> None:
        self.waits: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waits.append(seconds)


def _busy(retry_after: float | None = None) -> ProviderFailure:
    return ProviderFailure(
        "HTTP 429: rate limited", retryable=True, status=429, retry_after=retry_after
    )


@settings(max_examples=200, deadline=None)
@given(
    retry=st.integers(1, 40),
    jitter=st.floats(0.0, 1.0, exclude_max=True),
    base=st.floats(0.0, 5.0),
    ceiling=st.floats(0.0, 60.0),
)
def test_backoff_stays_in_its_jittered_band(
    retry: int, jitter: float, base: float, ceiling: float
) -> None:
    policy = RetryPolicy(base_delay=base, max_delay=ceiling)
    wait = policy.delay(retry, None, jitter)
    top = min(base * 2.0 ** (retry - 1), ceiling)
    assert top / 2 - 1e-9 <= wait <= top + 1e-9


@settings(max_examples=200, deadline=None)
@given(hint=st.floats(-10.0, 1e9), cap=st.floats(0.0, 600.0))
def test_retry_after_is_honoured_within_the_cap(hint: float, cap: float) -> None:
    policy = RetryPolicy(retry_after_cap=cap)
    assert policy.delay(1, hint, 0.9) == min(max(hint, 0.0), cap)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_retries": -1},
        {"base_delay": -0.1},
        {"max_delay": float("nan")},
        {"retry_after_cap": -1.0},
    ],
)
def test_nonsense_policies_are_refused(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="must be >= 0"):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


async def test_retryable_failures_are_retried_until_success(recorder: Recorder) -> None:
    sleeps = Sleeps()
    attempt = Script(_busy(), _busy(retry_after=3.0))
    policy = RetryPolicy(max_retries=2, base_delay=1.0, max_delay=8.0, retry_after_cap=60.0)
    result = await call_with_retries(
        attempt,
        policy,
        progress=StreamProgress(recorder),
        provider="p",
        sleep=sleeps,
        jitter=lambda: 0.0,
    )
    assert result == "ok"
    assert attempt.calls == 3
    assert sleeps.waits == [0.5, 3.0]


async def test_gives_up_after_max_retries_with_the_count(recorder: Recorder) -> None:
    sleeps = Sleeps()
    attempt = Script(_busy(), _busy(), _busy(), _busy())
    with pytest.raises(ProviderError) as caught:
        await call_with_retries(
            attempt,
            RetryPolicy(max_retries=2),
            progress=StreamProgress(recorder),
            provider="p",
            sleep=sleeps,
        )
    assert attempt.calls == 3
    assert len(sleeps.waits) == 2
    assert caught.value.reason == "HTTP 429: rate limited (gave up after 3 attempts)"
    assert caught.value.retryable is True
    assert caught.value.status == 429


async def test_without_retries_the_error_is_raised_as_it_was(recorder: Recorder) -> None:
    failure = _busy()
    with pytest.raises(ProviderError) as caught:
        await call_with_retries(
            Script(failure),
            RetryPolicy(max_retries=0),
            progress=StreamProgress(recorder),
            provider="p",
            sleep=Sleeps(),
        )
    assert caught.value is failure


async def test_non_retryable_failures_are_not_retried(recorder: Recorder) -> None:
    attempt = Script(ProviderError("HTTP 401: authentication failed", status=401))
    with pytest.raises(ProviderError, match="HTTP 401"):
        await call_with_retries(
            attempt,
            RetryPolicy(max_retries=5),
            progress=StreamProgress(recorder),
            provider="p",
            sleep=Sleeps(),
        )
    assert attempt.calls == 1


async def test_no_retry_once_text_was_shown(recorder: Recorder) -> None:
    progress = StreamProgress(recorder)
    attempt = Script(_busy(), text_first=progress)
    with pytest.raises(ProviderError, match="HTTP 429"):
        await call_with_retries(
            attempt, RetryPolicy(max_retries=5), progress=progress, provider="p", sleep=Sleeps()
        )
    assert attempt.calls == 1
    assert recorder.texts == ["partial"]


async def test_activity_alone_does_not_stop_a_retry(recorder: Recorder) -> None:
    progress = StreamProgress(recorder)

    async def attempt() -> str:
        progress.on_activity()
        if recorder.activity == 1:
            raise _busy()
        return "ok"

    result = await call_with_retries(
        attempt, RetryPolicy(max_retries=1), progress=progress, provider="p", sleep=Sleeps()
    )
    assert result == "ok"
    assert recorder.activity == 2


async def test_other_exceptions_propagate_untouched(recorder: Recorder) -> None:
    attempt = Script(KeyError("bug"))
    with pytest.raises(KeyError):
        await call_with_retries(
            attempt,
            RetryPolicy(max_retries=3),
            progress=StreamProgress(recorder),
            provider="p",
            sleep=Sleeps(),
        )
    assert attempt.calls == 1


async def test_each_retry_is_logged_with_the_safe_reason(
    recorder: Recorder, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="robotad.providers.retry")
    await call_with_retries(
        Script(_busy()),
        RetryPolicy(max_retries=1, base_delay=0.0),
        progress=StreamProgress(recorder),
        provider="work",
        sleep=Sleeps(),
    )
    [record] = caplog.records
    assert record.getMessage() == "provider work: HTTP 429: rate limited; retry 1 of 1 in 0.00s"


async def test_cancellation_during_the_backoff_wait(
    recorder: Recorder, autojump_clock: trio.testing.MockClock
) -> None:
    attempt = Script(_busy(), _busy())
    with trio.CancelScope() as scope:  # no deadline: cancelled from outside, mid-wait

        async def cancel_later() -> None:
            await trio.sleep(5)
            scope.cancel()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(cancel_later)
            await call_with_retries(
                attempt,
                RetryPolicy(max_retries=2, base_delay=60.0, max_delay=60.0),
                progress=StreamProgress(recorder),
                provider="p",
            )
    assert scope.cancelled_caught
    assert attempt.calls == 1


async def _retried(attempt: Callable[[], Awaitable[str]], recorder: Recorder, delay: float) -> str:
    """`call_with_retries` with two retries at a fixed `delay` (no jitter to speak of)."""
    return await call_with_retries(
        attempt,
        RetryPolicy(max_retries=2, base_delay=delay, max_delay=delay),
        progress=StreamProgress(recorder),
        provider="p",
    )


async def test_no_retry_waits_past_an_enclosing_deadline(
    recorder: Recorder, autojump_clock: trio.testing.MockClock
) -> None:
    """The turn's idle window (any enclosing deadline) ends in 5 s and the wait would take
    60: the failure is raised at once, the real cause, not an idle timeout after a sleep."""
    attempt = Script(_busy(), _busy())
    started = trio.current_time()
    with trio.move_on_after(5), pytest.raises(ProviderError) as caught:
        await _retried(attempt, recorder, 60.0)
    assert attempt.calls == 1
    assert trio.current_time() == started
    assert caught.value.reason == "HTTP 429: rate limited"


async def test_no_retry_starts_that_would_be_cut_off_as_the_last_one_failed(
    recorder: Recorder, autojump_clock: trio.testing.MockClock
) -> None:
    """An attempt that failed after 10 s (a connection that timed out) with 15 s of the idle
    window left at its start: a retry would need as long, so the failure is the answer; one
    that failed at once is retried in the same window."""
    calls = 0

    async def slow_failure() -> str:
        nonlocal calls
        calls += 1
        await trio.sleep(10)
        raise ProviderFailure("no connection within 10 s", retryable=True)

    with trio.move_on_after(15) as idle, pytest.raises(ProviderError) as caught:
        await _retried(slow_failure, recorder, 0.5)
    assert not idle.cancelled_caught
    assert calls == 1
    assert caught.value.reason == "no connection within 10 s"
    quick = Script(_busy(), _busy(), _busy())
    with trio.move_on_after(5), pytest.raises(ProviderError) as caught:
        await _retried(quick, recorder, 0.5)
    assert quick.calls == 3
    assert caught.value.reason.endswith("(gave up after 3 attempts)")


async def test_real_waits_follow_the_policy(
    recorder: Recorder, autojump_clock: trio.testing.MockClock
) -> None:
    attempt = Script(_busy(retry_after=30.0), _busy(retry_after=600.0))
    start = trio.current_time()
    result = await call_with_retries(
        attempt,
        RetryPolicy(max_retries=2, retry_after_cap=45.0),
        progress=StreamProgress(recorder),
        provider="p",
    )
    assert result == "ok"
    assert trio.current_time() - start == pytest.approx(75.0)
