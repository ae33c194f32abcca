"""The fixtures are Harbor tasks: their own tests (tests/test_outputs.py) run inside a task's
environment as its verifier, never in this suite."""

collect_ignore_glob = ["fixtures/*"]
