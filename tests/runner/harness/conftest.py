from runner.harness.helpers import served  # noqa: F401  (the fixture)
