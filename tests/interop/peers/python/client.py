"""Calls an orchd through the Python a2a-sdk client and prints what it saw.

Usage: client.py URL

URL is orchd's base URL. The script resolves orchd's Agent Card, then, on
each JSON-RPC and HTTP+JSON interface the card lists (A2A 1.0 and, through
the SDK's compatibility transports, 0.3), it:

- sends a blocking message routed to skill "work" (metadata "skill"),
- streams a message routed to skill "work",
- gets the task of the blocking send,
- cancels that task, which has completed (expecting TaskNotCancelableError),
- sends a message routed to skill "hang" without waiting, then cancels the
  task it started,
- gets a task that does not exist (expecting TaskNotFoundError),
- starts a task routed to skill "steer" and steers and interrupts it over
  A2A: once without activating the steering extension (expecting
  UnsupportedOperationError), then with it (expecting acknowledgements
  carrying receipts),
- sends a message routed to skill "reply" (answered with a message).

It prints ONE JSON object on stdout: {"card": {...}, "interfaces": {"1.0
JSONRPC": {...}, ...}}. A step that fails records "<Error>: <message>"
under its name instead of stopping the script.
"""

import asyncio
import json
import sys
import uuid

import httpx
from google.protobuf.json_format import MessageToDict

from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.service_parameters import ServiceParametersFactory, with_a2a_extensions
from a2a.helpers import get_artifact_text, get_message_text, new_text_part
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    Message,
    Role,
    SendMessageRequest,
    TaskState,
)
from a2a.utils.errors import JSON_RPC_ERROR_CODE_MAP, A2AError

STEERING = "https://a2a-protocol.org/extensions/steering/v1"
CONTROL = STEERING + "/control"


def user_message(text: str, skill: str) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            role=Role.ROLE_USER,
            message_id=str(uuid.uuid4()),
            parts=[new_text_part(text)],
            metadata={"skill": skill},
        )
    )


def error_of(e: Exception) -> dict:
    out = {"error": type(e).__name__, "message": str(e)}
    if isinstance(e, A2AError) and type(e) in JSON_RPC_ERROR_CODE_MAP:
        out["code"] = JSON_RPC_ERROR_CODE_MAP[type(e)]
    return out


def state_name(state) -> str:
    return TaskState.Name(state)


async def steer(c) -> dict:
    """Steers and interrupts a task orchd works on, over A2A, with the steering extension."""
    out: dict = {}
    try:
        req = user_message("steer me", "steer")
        req.configuration.return_immediately = True
        task = [r async for r in c.send_message(req)][-1].task
        for _ in range(200):
            if task.status.state == TaskState.TASK_STATE_WORKING:
                break
            await asyncio.sleep(0.025)
            task = await c.get_task(GetTaskRequest(id=task.id))
        out["started"] = state_name(task.status.state)

        def signal(control: str, text: str) -> SendMessageRequest:
            r = user_message(text, "steer")
            r.message.task_id, r.message.context_id = task.id, task.context_id
            r.message.metadata.update({CONTROL: control})
            return r

        try:
            [r async for r in c.send_message(signal("steer", "unannounced"))]
            out["unactivated"] = {"state": "accepted"}
        except Exception as e:  # noqa: BLE001
            out["unactivated"] = error_of(e)

        activated = ClientCallContext(
            service_parameters=ServiceParametersFactory.create([with_a2a_extensions([STEERING])])
        )
        for control, text in (("steer", "go left"), ("interrupt", "stop")):
            got = [r async for r in c.send_message(signal(control, text), context=activated)]
            ack = got[-1].task
            meta = MessageToDict(ack.metadata)
            receipt = meta.get(STEERING + "/receipt", {})
            out[control] = {
                "state": state_name(ack.status.state),
                "interrupted": meta.get(STEERING + "/interrupted", False),
                "hops": [f"{h['agent']}#{int(h['seq'])}" for h in receipt.get("hops", [])],
                "inHistory": any(get_message_text(m) == text for m in ack.history),
            }
        await c.cancel_task(CancelTaskRequest(id=task.id))
    except Exception as e:  # noqa: BLE001
        out["error"] = error_of(e)
    return out


async def exercise(card: AgentCard, iface) -> dict:
    """Runs every step against one interface of orchd's card."""
    only = AgentCard()
    only.CopyFrom(card)
    del only.supported_interfaces[:]
    only.supported_interfaces.append(iface)
    out: dict = {}

    def client(streaming: bool):
        config = ClientConfig(streaming=streaming, supported_protocol_bindings=[iface.protocol_binding])
        return ClientFactory(config).create(only)

    task_id = ""
    async with client(False) as c:
        try:
            got = [r async for r in c.send_message(user_message("hello", "work"))]
            task = got[-1].task
            task_id = task.id
            out["send"] = {
                "kind": got[-1].WhichOneof("payload"),
                "state": state_name(task.status.state),
                "artifacts": [get_artifact_text(a, delimiter="") for a in task.artifacts],
                "historyRoles": [Role.Name(m.role) for m in task.history],
            }
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            out["send"] = error_of(e)

        try:
            task = await c.get_task(GetTaskRequest(id=task_id))
            out["get"] = {
                "id": task.id,
                "sameTask": task.id == task_id,
                "state": state_name(task.status.state),
                "artifacts": [get_artifact_text(a, delimiter="") for a in task.artifacts],
            }
        except Exception as e:  # noqa: BLE001
            out["get"] = error_of(e)

        try:
            task = await c.cancel_task(CancelTaskRequest(id=task_id))
            out["cancelDone"] = {"state": state_name(task.status.state)}
        except Exception as e:  # noqa: BLE001
            out["cancelDone"] = error_of(e)

        try:
            task = await c.get_task(GetTaskRequest(id=str(uuid.uuid4())))
            out["getUnknown"] = {"state": state_name(task.status.state)}
        except Exception as e:  # noqa: BLE001
            out["getUnknown"] = error_of(e)

        try:
            req = user_message("hold on", "hang")
            req.configuration.return_immediately = True
            got = [r async for r in c.send_message(req)]
            started = got[-1].task
            canceled = await c.cancel_task(CancelTaskRequest(id=started.id))
            after = await c.get_task(GetTaskRequest(id=started.id))
            out["cancel"] = {
                "started": state_name(started.status.state),
                "state": state_name(canceled.status.state),
                "after": state_name(after.status.state),
            }
        except Exception as e:  # noqa: BLE001
            out["cancel"] = error_of(e)

        out["steer"] = await steer(c)

        try:
            got = [r async for r in c.send_message(user_message("hi", "reply"))]
            last = got[-1]
            kind = last.WhichOneof("payload")
            out["reply"] = {"kind": kind, "text": get_message_text(last.message) if kind == "message" else ""}
        except Exception as e:  # noqa: BLE001
            out["reply"] = error_of(e)

    async with client(True) as c:
        try:
            kinds, state, artifacts = [], "", {}
            async for r in c.send_message(user_message("stream me", "work")):
                kind = r.WhichOneof("payload")
                kinds.append(kind)
                if kind == "task":
                    state = state_name(r.task.status.state)
                elif kind == "status_update":
                    state = state_name(r.status_update.status.state)
                elif kind == "artifact_update":
                    a = r.artifact_update.artifact
                    text = get_artifact_text(a, delimiter="")
                    artifacts[a.artifact_id] = artifacts.get(a.artifact_id, "") + text if r.artifact_update.append else text
            out["stream"] = {"kinds": kinds, "state": state, "artifacts": list(artifacts.values())}
        except Exception as e:  # noqa: BLE001
            out["stream"] = error_of(e)
    return out


async def main(url: str) -> None:
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, url).get_agent_card()
    report = {
        "card": {
            "name": card.name,
            "streaming": card.capabilities.streaming,
            "extensions": [e.uri for e in card.capabilities.extensions],
            "skills": [s.id for s in card.skills],
            "interfaces": [
                {"url": i.url, "binding": i.protocol_binding, "version": i.protocol_version}
                for i in card.supported_interfaces
            ],
        },
        "interfaces": {},
    }
    for iface in card.supported_interfaces:
        if iface.protocol_binding not in ("JSONRPC", "HTTP+JSON"):
            continue
        key = f"{iface.protocol_version} {iface.protocol_binding}"
        try:
            report["interfaces"][key] = await asyncio.wait_for(exercise(card, iface), 60)
        except Exception as e:  # noqa: BLE001
            report["interfaces"][key] = {"fatal": error_of(e)}
    print(json.dumps(report), flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: client.py URL")
    asyncio.run(main(sys.argv[1]))
