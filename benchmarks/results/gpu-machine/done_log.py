"""pytest plugin (-p done_log): appends "<outcome> <nodeid>" to $DONE_LOG as each test finishes, so
a suite cut off by a device command's time limit can be resumed with the tests it had not run
(run_suite_resumable.sh, phase 2), and each failure's report to $DONE_LOG.fail (a suite killed at
its limit prints no summary: on 2026-11-30 two failures' reasons were lost so). Under xdist only
the controller writes (it sees every worker's reports; workers writing too doubled each line)."""
import os

_worker = False


def pytest_configure(config):
    global _worker
    _worker = hasattr(config, "workerinput")


def pytest_runtest_logreport(report):
    path = os.environ.get("DONE_LOG")
    if not path or _worker:
        return
    # A test is done at its call phase, or at setup when setup did not pass (skip or error).
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "error" if report.when == "setup" and report.outcome == "failed" else report.outcome
        with open(path, "a") as f:
            f.write(f"{outcome} {report.nodeid}\n")
    if report.failed:
        with open(path + ".fail", "a") as f:
            f.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext[-6000:]}\n")
