"""Known failures of the OpInfo sweep (test_opinfo_sweep.py): op id ("name" or "name.variant") -> reason."""
KNOWN_FAILURES: dict[str, str] = {}
