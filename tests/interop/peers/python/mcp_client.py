"""Calls orchd's MCP endpoint through the MCP Python SDK and prints what it saw.

Usage: mcp_client.py URL [--mode auto|legacy] [--answer TEXT] [--tasks]

URL is orchd's MCP endpoint (http://HOST:PORT/mcp). --mode is the SDK's
connect mode: "auto" (the default) probes server/discover and speaks
2026-07-28 when the server offers it, without sessions; "legacy" does the
initialize handshake and speaks 2025-11-25 in a session. --answer is what
the user answers when orchd asks a question on an agent's behalf (default
"2024").

The script expects orchd to know four agents, chosen by skill: "reply"
(answers at once), "work" (takes a few seconds), "ask" (asks a question
first) and "steer" (works until steered with "finish"). It:

- lists the tools,
- delegates to "reply" and takes the answer,
- delegates to "work" with a progress callback, recording every
  notifications/progress it receives,
- delegates to "ask" with an elicitation callback that answers
  {"answer": TEXT}: at 2026-07-28 orchd asks with an InputRequiredResult
  and the SDK calls the tool again with the answer and the request state;
  in a session orchd's SDK asks with elicitation/create,
- delegates to "steer" waiting one second, steers the work it gets back
  (twice with one idempotency key, then with "finish") and follows it with
  orchd_wait until it ends.

With --tasks (2026-07-28 only) the client declares the MCP Tasks
extension (io.modelcontextprotocol/tasks, SEP-2663) through the
TasksClientExtension of fastmcp-tasks 4.1.4, an independent client of the
extension built on the SDK's extension points. It is pinned, with the
same SDK, in peers/python-tasks/requirements.txt, not here: run the script
with the python of the venv peers/python-tasks/install.sh makes. It then
lists the tools and, instead of the steps above:

- delegates to "reply" and to "ask" through the SDK's call_tool: a call
  the server runs as a task (a CreateTaskResult) is followed with
  tasks/get until it ends, and a question is answered with tasks/update,
  by the extension's resolver,
- delegates to "steer" asking for the raw result: for a task, it reads it
  with tasks/get ("got"), cancels it with tasks/cancel and reads it until
  it ends ("final"); a call answered without a task is canceled with
  orchd_cancel.

It prints one JSON object per line on stdout, one for each step:
{"step": NAME, ...what the step saw..., "wire": [...]}. "wire" lists the
HTTP requests the step sent: the JSON-RPC method (or "response" for the
client's answer to a request of the server), the tool's name, the
Mcp-Protocol-Version, Mcp-Method and Mcp-Name headers, whether an
Mcp-Session-Id was sent, which MRTR fields and extensions a tools/call
carried, the task a tasks/* request named, and the HTTP status. A step
that fails records "error" (the exception's type and message) and "code"
(an MCP error's code) instead of stopping the script.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client, MCPError
from mcp.client import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

# The tools orchd serves to every client.
TOOL_DELEGATE = "orchd_delegate"
TOOL_STEER = "orchd_steer"
TOOL_WAIT = "orchd_wait"
TOOL_CANCEL = "orchd_cancel"

# A task's states that end it (SEP-2663).
TASK_ENDED = ("completed", "failed", "cancelled")


class Wire:
    """Records the HTTP requests the SDK sends, for the step running."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []

    def take(self) -> list[dict[str, Any]]:
        """Returns the requests recorded since the last take."""
        out, self.entries = self.entries, []
        return out

    async def on_request(self, request: httpx2.Request) -> None:
        """Records request (an httpx2 request event hook)."""
        entry: dict[str, Any] = {
            "http": request.method,
            "protocol": request.headers.get("mcp-protocol-version"),
            "mcpMethod": request.headers.get("mcp-method"),
            "mcpName": request.headers.get("mcp-name"),
            "session": "mcp-session-id" in request.headers,
        }
        if request.method == "POST":
            try:
                body = json.loads(request.content)
            except (ValueError, httpx2.RequestNotRead):
                body = None
            if isinstance(body, dict):
                entry.update(describe_message(body))
        request.extensions["orchd_wire"] = entry
        self.entries.append(entry)

    async def on_response(self, response: httpx2.Response) -> None:
        """Adds the HTTP status to the request's record (a response event hook)."""
        entry = response.request.extensions.get("orchd_wire")
        if entry is not None:
            entry["status"] = response.status_code


def describe_message(body: dict[str, Any]) -> dict[str, Any]:
    """What the wire record keeps of a JSON-RPC message the client sent."""
    if "method" not in body:
        return {"method": "response", "error": "error" in body}
    method = body["method"]
    out: dict[str, Any] = {"method": method}
    params = body.get("params") or {}
    meta = params.get("_meta") or {}
    if method == "tools/call":
        out["name"] = params.get("name")
        out["requestState"] = "requestState" in params
        out["inputResponses"] = sorted((params.get("inputResponses") or {}).keys())
        out["progressToken"] = "progressToken" in meta
        capabilities = meta.get(types.CLIENT_CAPABILITIES_META_KEY) or {}
        out["extensions"] = sorted((capabilities.get("extensions") or {}).keys())
    elif method.startswith("tasks/"):
        out["taskId"] = params.get("taskId")
        out["inputResponses"] = sorted((params.get("inputResponses") or {}).keys())
    return out


class User:
    """Stands for the user: answers every form orchd shows, remembering them."""

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.asked: list[dict[str, Any]] = []

    async def elicit(self, context: ClientRequestContext, params: types.ElicitRequestParams) -> types.ElicitResult:
        """Answers a form with {"answer": ...}; declines a URL (the SDK's elicitation callback)."""
        if isinstance(params, types.ElicitRequestURLParams):
            self.asked.append({"requestId": context.request_id, "mode": "url", "message": params.message, "url": params.url})
            return types.ElicitResult(action="decline")
        self.asked.append(
            {
                "requestId": context.request_id,
                "mode": params.mode,
                "message": params.message,
                "schema": params.requested_schema,
            }
        )
        return types.ElicitResult(action="accept", content={"answer": self.answer})


def outcome(result: types.CallToolResult) -> dict[str, Any]:
    """What a step keeps of a tool's result."""
    text = "\n".join(b.text for b in result.content if isinstance(b, types.TextContent))
    return {"isError": bool(result.is_error), "structured": result.structured_content, "text": text}


def failure(err: BaseException) -> dict[str, Any]:
    """A step's record of the exception that stopped it."""
    # Errors raised inside the transport's task group arrive wrapped in
    # (nested) exception groups of one.
    while isinstance(getattr(err, "exceptions", None), tuple) and len(err.exceptions) == 1:
        err = err.exceptions[0]
    out: dict[str, Any] = {"error": f"{type(err).__name__}: {err}"}
    if isinstance(err, MCPError):
        out["code"] = err.code
    return out


async def call(client: Client, tool: str, args: dict[str, Any], **kw: Any) -> dict[str, Any]:
    """Calls tool, failing the step when the result is a tool error."""
    res = outcome(await client.call_tool(tool, args, **kw))
    if res["isError"]:
        raise RuntimeError(f"{tool} {json.dumps(args)} answered an error: {res['text']}")
    return res


async def list_tools(client: Client) -> dict[str, Any]:
    """Lists the tools' names."""
    listed = await client.list_tools()
    return {"tools": sorted(t.name for t in listed.tools)}


async def reply(client: Client) -> dict[str, Any]:
    """Delegates to the agent that answers at once."""
    return outcome(await client.call_tool(TOOL_DELEGATE, {"text": "say hello", "skill": "reply"}))


async def progress(client: Client) -> dict[str, Any]:
    """Delegates work that takes a while, recording the progress received."""
    seen: list[dict[str, Any]] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        seen.append({"progress": value, "total": total, "message": message})

    res = outcome(
        await client.call_tool(
            TOOL_DELEGATE, {"text": "take a while", "skill": "work"}, progress_callback=on_progress
        )
    )
    res["progress"] = seen
    return res


async def ask(client: Client, user: User) -> dict[str, Any]:
    """Delegates to the agent that asks a question, which user answers."""
    user.asked.clear()
    res = outcome(await client.call_tool(TOOL_DELEGATE, {"text": "count", "skill": "ask"}))
    res["asked"] = list(user.asked)
    return res


async def steer(client: Client) -> dict[str, Any]:
    """Steers running work: a steer, its retry, "finish"; then follows it."""
    started = await call(client, TOOL_DELEGATE, {"text": "work until told", "skill": "steer", "waitSeconds": 1})
    delegation = started["structured"]["delegation"]
    out: dict[str, Any] = {"started": started["structured"]}
    signal = {"delegation": delegation, "text": "go left", "idempotencyKey": "left-1"}
    out["receipt"] = (await call(client, TOOL_STEER, signal))["structured"]
    out["retried"] = (await call(client, TOOL_STEER, signal))["structured"]
    await call(client, TOOL_STEER, {"delegation": delegation, "text": "finish"})
    status = started["structured"]
    # Bounded: each wait returns at the next event or after five seconds.
    for _ in range(12):
        if status["state"] not in ("submitted", "working"):
            break
        waited = await call(
            client, TOOL_WAIT, {"delegation": delegation, "afterSeq": status["seq"], "waitSeconds": 5}
        )
        status = waited["structured"]["status"]
    out["ended"] = status
    return out


def tasks_extension(user: User) -> Any:
    """The Tasks extension of fastmcp-tasks, asking user when a task needs input."""
    try:
        from fastmcp_tasks.client import TasksClientExtension
    except ImportError as err:
        raise RuntimeError(
            "--tasks needs fastmcp-tasks 4.1.4: run peers/python-tasks/install.sh and its venv's python"
        ) from err
    return TasksClientExtension(elicitation_callback=user.elicit)


async def task_cancel(client: Client) -> dict[str, Any]:
    """Starts steerable work; a task is read, canceled and read until it ends."""
    from fastmcp_tasks.client_models import (
        CancelTaskRequest,
        CancelTaskRequestParams,
        ClientCreateTaskResult,
        ClientGetTaskResult,
        GetTaskRequest,
        GetTaskRequestParams,
    )

    async def get(task_id: str) -> dict[str, Any]:
        got = await client.session.send_request(
            GetTaskRequest(params=GetTaskRequestParams(task_id=task_id)), ClientGetTaskResult
        )
        return got.model_dump(by_alias=True, mode="json", exclude_none=True)

    raw = await client.session.call_tool(
        TOOL_DELEGATE,
        {"text": "work until canceled", "skill": "steer", "waitSeconds": 0},
        allow_input_required=True,
        allow_claimed=True,
    )
    out: dict[str, Any] = {"task": isinstance(raw, ClientCreateTaskResult)}
    if not out["task"]:
        out["result"] = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
        structured = getattr(raw, "structured_content", None) or {}
        if delegation := structured.get("delegation"):
            out["canceled"] = (await call(client, TOOL_CANCEL, {"delegation": delegation}))["structured"]
        return out
    task_id = raw.task_id
    out["created"] = raw.model_dump(by_alias=True, mode="json", exclude_none=True)
    out["got"] = await get(task_id)
    await client.session.send_request(
        CancelTaskRequest(params=CancelTaskRequestParams(task_id=task_id)), types.Result
    )
    # Bounded: fifty reads, a fifth of a second apart.
    for _ in range(50):
        out["final"] = await get(task_id)
        if out["final"]["status"] in TASK_ENDED:
            break
        await anyio.sleep(0.2)
    return out


async def main(url: str, mode: str, answer: str, tasks: bool) -> None:
    """Connects in mode and runs every step, printing what each saw."""
    wire = Wire()
    user = User(answer)
    http = httpx2.AsyncClient(
        timeout=httpx2.Timeout(30.0, read=120.0),
        event_hooks={"request": [wire.on_request], "response": [wire.on_response]},
    )

    def emit(step: str, record: dict[str, Any]) -> None:
        record = {"step": step, **record, "wire": wire.take()}
        print(json.dumps(record), flush=True)

    async with http:
        connected = False
        try:
            async with Client(
                streamable_http_client(url, http_client=http),
                mode=mode,
                elicitation_callback=user.elicit,
                client_info=types.Implementation(name="orchd-interop-python", version="1.0.0"),
                extensions=[tasks_extension(user)] if tasks else None,
            ) as client:
                connected = True
                server = client.server_info
                emit("connect", {"protocol": client.protocol_version, "server": server.model_dump() if server else None})
                steps = [("tools", lambda: list_tools(client))]
                if tasks:
                    steps += [
                        ("taskReply", lambda: reply(client)),
                        ("taskAsk", lambda: ask(client, user)),
                        ("taskCancel", lambda: task_cancel(client)),
                    ]
                else:
                    steps += [
                        ("reply", lambda: reply(client)),
                        ("progress", lambda: progress(client)),
                        ("ask", lambda: ask(client, user)),
                        ("steer", lambda: steer(client)),
                    ]
                for name, step in steps:
                    try:
                        record = await step()
                    except Exception as err:  # noqa: BLE001 - a failed step is reported, and the next runs
                        record = failure(err)
                    emit(name, record)
        except Exception as err:  # noqa: BLE001 - every failure is reported, as data
            emit("close" if connected else "connect", failure(err))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url")
    parser.add_argument("--mode", default="auto", choices=["auto", "legacy"])
    parser.add_argument("--answer", default="2024")
    parser.add_argument("--tasks", action="store_true")
    args = parser.parse_args()
    if args.tasks and args.mode != "auto":
        parser.error("--tasks needs --mode auto: the Tasks extension is for 2026-07-28")
    anyio.run(main, args.url, args.mode, args.answer, args.tasks)
    sys.exit(0)
