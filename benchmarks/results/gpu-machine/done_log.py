"""pytest plugin (-p done_log): appends "<outcome> <nodeid>" to $DONE_LOG as each test finishes, so
a suite cut off by a device command's time limit can be resumed with the tests it had not run
(run_suite_resumable.sh, phase 2). Under xdist the controller sees every worker's reports."""
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("DONE_LOG")
    if not path:
        return
    # A test is done at its call phase, or at setup when setup did not pass (skip or error).
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        outcome = "error" if report.when == "setup" and report.outcome == "failed" else report.outcome
        with open(path, "a") as f:
            f.write(f"{outcome} {report.nodeid}\n")
