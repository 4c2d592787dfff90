"""Benchmarks: `make bench` or `python -m bench [B1 ...]`; see issue 6 for the targets."""
