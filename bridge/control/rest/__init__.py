"""Kafka Connect's REST API, served by every worker (issue 32b): `shapes.py` and `validate.py`
build Connect's JSON (pure), `auth.py` checks basic-auth credentials, `backend.py` reads and
writes the Kafka topics behind each answer, `app.py` routes the requests (Starlette) and
`server.py` serves them (uvicorn) on the `listeners`, bounded like the metrics port."""
