"""Building blocks of the in-process transformers engine: request sampling parameters,
the dynamic-batching generation loop, and weight hot-swaps."""
