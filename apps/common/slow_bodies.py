"""Request bodies that arrive too slowly are cut off with 408 (config/asgi.py wraps the application in
`body_time_limit`).

Uvicorn has no time limit on reading a request's body: a client that sends a byte every few seconds holds a
connection, and the request's task, for as long as it likes, and a few hundred such clients hold a worker's every
connection. So, with settings.LOREKEEPER_REQUEST_BODY:
- each read of the body must bring something within `read_seconds`;
- the whole body must have arrived within `seconds`, plus one second for every `min_rate` bytes received (an upload
  at least that fast is never cut, however large: the limit is on slowness, not on size).
Past either, the application is told the client went away (it reads no more), the client gets 408 with
`Connection: close` and the connection is closed. Only the body is timed: once it has arrived, waiting for the
client to go away (a streamed reply listens for that) is not.
"""

from __future__ import annotations

import asyncio

from django.conf import settings
from django.http import HttpResponse, JsonResponse

from apps.common.asgi_answers import answer_headers
from apps.common.views import plain_page

MESSAGE = "The request's body arrived too slowly."


def too_slow_response(path: str) -> HttpResponse:
    if path.startswith("/api/"):
        return JsonResponse({"message": MESSAGE, "extra": {}}, status=408)
    return HttpResponse(plain_page("Too slow", f"{MESSAGE} Try again on a steadier connection."), status=408)


def body_time_limit(app):
    """ASGI middleware: 408 for a request body whose reads or whole take too long (module docstring)."""

    async def timed(scope, receive, send):
        if scope["type"] != "http":
            return await app(scope, receive, send)
        conf = settings.LOREKEEPER_REQUEST_BODY
        loop = asyncio.get_running_loop()
        began = loop.time()
        state = {"received": 0, "complete": False, "late": False}

        async def receive_timed():
            if state["complete"]:
                return await receive()
            if state["late"]:
                return {"type": "http.disconnect"}
            whole = began + conf["seconds"] + state["received"] / conf["min_rate"] - loop.time()
            try:
                async with asyncio.timeout(max(0.0, min(conf["read_seconds"], whole))):
                    message = await receive()
            except TimeoutError:
                state["late"] = True
                return {"type": "http.disconnect"}
            if message["type"] == "http.request":
                state["received"] += len(message.get("body", b""))
                state["complete"] = not message.get("more_body", False)
            return message

        await app(scope, receive_timed, send)
        if state["late"]:
            response = too_slow_response(scope.get("path", ""))
            response["Connection"] = "close"
            await send({"type": "http.response.start", "status": 408, "headers": answer_headers(scope, response)})
            await send({"type": "http.response.body", "body": response.content})

    return timed
