"""AAT_HOME is private on every backend: created 0700 by whichever aat process opens the store."""

from __future__ import annotations

import stat

from webplatform.config import Settings
from webplatform.store import make_engine


def test_aat_home_is_created_private_on_every_backend(settings: Settings) -> None:
    assert not settings.home.exists()
    make_engine(settings).dispose()
    assert stat.S_IMODE(settings.home.stat().st_mode) == 0o700
