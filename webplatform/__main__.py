"""`python -m webplatform` is `aat`."""

from webplatform.cli import main

raise SystemExit(main())
