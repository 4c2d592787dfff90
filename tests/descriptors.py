"""Running a block while this process can open no new file descriptor at all.

The kernel then refuses `inotify_init1` with EMFILE, exactly as it does when the per-user
limit of inotify instances (128 by default) is reached, without touching a limit other
processes of the same user share.
"""

from __future__ import annotations

import contextlib
import os
import resource
from collections.abc import Iterator


@contextlib.contextmanager
def no_new_descriptors() -> Iterator[None]:
    """While open, every new descriptor (file, socket, pipe, inotify) fails with EMFILE."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.open(os.devnull, os.O_RDONLY)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
