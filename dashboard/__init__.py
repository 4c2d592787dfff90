"""The web dashboard: registry browser, run form, job history and the live approval queue.

`dashboard.app.create_app(settings)` builds the ASGI app; `aat serve` runs it.
"""
