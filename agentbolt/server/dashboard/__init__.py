"""The web dashboard's server side: the read-only views behind ``/v1/dashboard`` and the built page.

* :mod:`.views` — rollout lists and details, runs, as plain dicts; :mod:`.schemas` their OpenAPI shapes.
* :mod:`.calls`, :mod:`.waterfall`, :mod:`.resources`, :mod:`.training`, :mod:`.text` — one view each.
* :mod:`.static` — serves the built page (``dist/``, written by ``dashboard/``'s ``npm run build``).
"""
