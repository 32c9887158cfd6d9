"""The service: an ``App`` of agents on a runtime, its HTTP API and its web page.

Needs the ``service`` extra (FastAPI, uvicorn)::

    from steadyrun.service import App, create_app
    api = create_app(App(store, agents=[support]), tokens=["s3cret"])
    # uvicorn.run(api, host="127.0.0.1", port=8000)

See docs/service.md.
"""

from steadyrun.service._api import TOKENS_ENV, create_app
from steadyrun.service._app import App, NotSupportedError, Started, start_fingerprint

__all__ = ["TOKENS_ENV", "App", "NotSupportedError", "Started", "create_app", "start_fingerprint"]
