"""Under ``ROBOTA_NO_SKIPS=1`` (which `.ci/run` sets) a skipped test fails instead.

A test that drives a real component (bubblewrap, socat, Emacs, node, a llama.cpp build) skips
where the component is missing, so a developer's machine without it still runs the rest. In CI
every such component is installed first, so a skip there means a guarantee went unproven while
the run stayed green: this plugin turns it into a failure that names the skip's reason.
"""

from __future__ import annotations

import os
from collections.abc import Generator
from typing import Any

import pytest

#: The environment variable that turns skips into failures.
NO_SKIPS_ENV = "ROBOTA_NO_SKIPS"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, Any, None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or os.environ.get(NO_SKIPS_ENV) != "1" or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = f"skipped under {NO_SKIPS_ENV}=1 (CI installs every component): {reason}"
