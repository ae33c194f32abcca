from controller.helpers import served  # noqa: F401  (the fixture)
