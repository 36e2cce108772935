"""Plumbing shared by slotflight's HTTP servers (the local model server, the scripted
test server, the gateway): OpenAI wire payloads and error bodies, bounded body reads,
responses that notice a disconnected client, serving an ASGI app on a background
thread, an h11 protocol with a deadline on request headers (``protocol``), and the
readers of the servers' command-line values (``arguments``).

Nothing here knows a model or a script; it needs Starlette and uvicorn (the ``server``
or ``local`` extra). Import the submodules: ``payloads`` and ``arguments`` have no
dependency of their own.
"""
