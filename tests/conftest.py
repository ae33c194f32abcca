"""Suite-wide: every skip says how to get what it lacks, the run ends saying what it skipped,
and the process ends with the status pytest reported.

The install lines live in ``tests/optional_requirements.py``; ``scripts/test`` (the
README's test command) installs all of them where this user can.
"""

from __future__ import annotations

import os
import sys
from collections import Counter

import pytest
from optional_requirements import Requirement, requirement_for

_SKIPPED: Counter[Requirement | None] = Counter()
_UNKNOWN: Counter[str] = Counter()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # type: ignore[no-untyped-def]
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.skipped or not isinstance(report.longrepr, tuple) or hasattr(report, "wasxfail"):
        return
    path, lineno, reason = report.longrepr
    requirement = requirement_for(reason)
    _SKIPPED[requirement] += 1
    if requirement is None:
        _UNKNOWN[reason] += 1
        report.longrepr = (path, lineno, f"{reason} -- no install line known: add one to tests/optional_requirements.py")
    elif requirement.install not in reason:
        report.longrepr = (path, lineno, f"{reason} -- needs {requirement.what}: {requirement.install}")


def pytest_terminal_summary(terminalreporter, exitstatus: int) -> None:  # type: ignore[no-untyped-def]
    total = sum(_SKIPPED.values())
    if not total:
        return
    lines = [f"{total} test{'s' if total != 1 else ''} skipped because this machine lacks what they need "
             "(scripts/test installs all of it where it can):"]
    for requirement, count in _SKIPPED.most_common():
        if requirement is not None:
            lines.append(f"  {count:4d}  {requirement.what}: {requirement.install}")
    for reason, count in _UNKNOWN.most_common():
        lines.append(f"  {count:4d}  {reason.removeprefix('Skipped: ')} (no install line known: add one to tests/optional_requirements.py)")
    terminalreporter.write_sep("-", "skipped tests and how to run them")
    for line in lines:
        terminalreporter.write_line(line)


_EXIT_STATUS: list[int] = []


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """End the process with pytest's status once everything is reported and unconfigured.

    After a full run (3,164 passed) the interpreter's own teardown once ended in SIGABRT
    with no message (CI, 4 Dec): some native library's threads or destructors, left by
    one of the thousands of tests that load torch, gRPC, Docker and browser clients, did
    not survive finalization. It never recurred in a full run here and is not traced;
    what the tests check is decided and printed before this point, so the process
    leaves without that teardown (``AGENTBOLT_TEST_FULL_TEARDOWN=1`` keeps it, to hunt the
    cause). An abort during the run still prints every thread's stack: pytest's
    faulthandler plugin is on until its own unconfigure, which runs before this one."""
    if not _EXIT_STATUS or config.option.collectonly or os.environ.get("AGENTBOLT_TEST_FULL_TEARDOWN") == "1":
        return
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])
