"""Real (not mocked) stand-ins for outside services, used by the tests."""
