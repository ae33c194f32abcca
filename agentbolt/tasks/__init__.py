"""Task datasets from the ecosystem's formats: :mod:`agentbolt.tasks.harbor` (Harbor task directories)."""
