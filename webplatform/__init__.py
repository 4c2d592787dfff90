"""aat: local tools for AI agents, with a human operator approving every irreversible call."""

__version__ = "0.1.0"
