"""Fixtures for the integration tests: real `aat` processes (see proc_helpers)."""

from proc_helpers import procs  # noqa: F401
