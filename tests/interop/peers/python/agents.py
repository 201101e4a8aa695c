"""Five small A2A agents built with the Python a2a-sdk, for orchd's interop tests.

Each agent listens on its own ephemeral port on 127.0.0.1 and serves its
Agent Card at /.well-known/agent-card.json and A2A 1.0 JSON-RPC at
/a2a/jsonrpc. Once all listen, one JSON line maps behaviour to base URL on
stdout; logs go to stderr. The process exits when stdin reaches EOF or on
SIGTERM.

Behaviours (deterministic, no model):

- complete: a completed Task with the artifact "done: <input>". Its card
  also lists a 0.3 JSON-RPC interface (the SDK's compatibility mode).
- stream: WORKING, three appended artifact chunks "part 1".."part 3",
  COMPLETED; the card declares streaming.
- ask: INPUT_REQUIRED with "which year?", then COMPLETED with the artifact
  "answer: <input>" on the next message to the task.
- slow: WORKING for up to 60 s; honours CancelTask.
- steer: advertises the steering extension and implements it by hand: a
  steer or interrupt for its WORKING task is taken before the SDK's request
  handler, which would queue the message behind the running execution.

Every agent records the messages that reached it (GET /received) and the
steer agent the signals it took (GET /steering/log), so tests can check
what was, and was not, delivered.
"""

import asyncio
import json
import logging
import signal
import socket
import sys
import threading
import time

import uvicorn
from google.protobuf.json_format import MessageToDict
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from a2a.helpers import get_message_text, new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.context import ServerCallContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    Message,
    SendMessageRequest,
    Task,
    TaskState,
)
from a2a.utils.errors import (
    InvalidParamsError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

log = logging.getLogger("py-agents")

STEERING = "https://a2a-protocol.org/extensions/steering/v1"
CONTROL = STEERING + "/control"
INTERRUPTED = STEERING + "/interrupted"
RECEIPT = STEERING + "/receipt"
RPC_PATH = "/a2a/jsonrpc"
SLOW_SECONDS = 60


def metadata_of(msg: Message) -> dict:
    """Returns a message's metadata as plain Python values."""
    return MessageToDict(msg.metadata) if msg.HasField("metadata") else {}


async def open_task(context: RequestContext, queue: EventQueue) -> TaskUpdater:
    """Creates the request's task unless it exists, and returns its updater."""
    if context.current_task is None:
        await queue.enqueue_event(
            new_task(
                context.task_id,
                context.context_id,
                TaskState.TASK_STATE_SUBMITTED,
                history=[context.message],
            )
        )
    return TaskUpdater(queue, context.task_id, context.context_id)


def agent_text(updater: TaskUpdater, text: str) -> Message:
    return updater.new_agent_message([new_text_part(text)])


class Complete(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await open_task(context, queue)
        await updater.add_artifact([new_text_part("done: " + context.get_user_input())], name="result")
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        raise UnsupportedOperationError(message="complete finishes at once")


class Stream(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await open_task(context, queue)
        await updater.start_work()
        for i in range(1, 4):
            await asyncio.sleep(0.05)
            await updater.add_artifact(
                [new_text_part(f"part {i}")],
                artifact_id="parts",
                name="parts",
                append=i > 1,
                last_chunk=i == 3,
            )
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class Ask(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await open_task(context, queue)
        task = context.current_task
        if task is None or task.status.state != TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.requires_input(agent_text(updater, "which year?"))
            return
        await updater.add_artifact([new_text_part("answer: " + context.get_user_input())], name="answer")
        await updater.complete()

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class Slow(AgentExecutor):
    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await open_task(context, queue)
        await updater.start_work(agent_text(updater, "working slowly"))
        # The SDK cancels this coroutine when the task is canceled.
        await asyncio.sleep(SLOW_SECONDS)
        await updater.complete(agent_text(updater, "finally done"))

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        log.info("slow: cancel %s", context.task_id)
        await TaskUpdater(queue, context.task_id, context.context_id).cancel(
            new_text_message("canceled", context_id=context.context_id, task_id=context.task_id)
        )


class Signal:
    """A steering signal handed from the request handler to an execution."""

    def __init__(self, control: str, message: Message):
        self.control = control
        self.message = message
        self.taken = asyncio.get_running_loop().create_future()


class Steer(AgentExecutor):
    """Works until interrupted, taking steers while WORKING.

    Executions read signals from a per-task inbox that SteerHandler fills.
    A steer becomes the task's status message (still WORKING); an interrupt
    ends the execution with INPUT_REQUIRED marked interrupted. The next
    ordinary message resumes the work.
    """

    def __init__(self):
        self.inboxes: dict[str, asyncio.Queue] = {}
        self.taken: list[dict] = []

    async def execute(self, context: RequestContext, queue: EventQueue) -> None:
        updater = await open_task(context, queue)
        inbox: asyncio.Queue = asyncio.Queue()
        resumed = context.current_task is not None
        await updater.update_status(
            TaskState.TASK_STATE_WORKING,
            agent_text(updater, "resumed: " + context.get_user_input() if resumed else "working"),
            metadata={INTERRUPTED: False} if resumed else None,
        )
        self.inboxes[context.task_id] = inbox
        try:
            deadline = time.monotonic() + SLOW_SECONDS
            while True:
                sig = await asyncio.wait_for(inbox.get(), max(0.0, deadline - time.monotonic()))
                try:
                    if await self.take(sig, context, updater):
                        return
                except BaseException as e:
                    if not sig.taken.done():
                        sig.taken.set_exception(UnsupportedOperationError(message=f"the task stopped: {e!r}"))
                    raise
        except TimeoutError:
            await updater.complete(agent_text(updater, "nobody steered"))
        finally:
            self.inboxes.pop(context.task_id, None)
            while not inbox.empty():
                inbox.get_nowait().taken.set_exception(UnsupportedOperationError(message="the task stopped working"))

    async def take(self, sig: Signal, context: RequestContext, updater: TaskUpdater) -> bool:
        """Takes one signal; reports whether the execution stops (an interrupt)."""
        text = get_message_text(sig.message)
        self.taken.append({"control": sig.control, "text": text, "taskId": context.task_id})
        if sig.control == "interrupt":
            # No signal is taken after this one: later ones are refused.
            del self.inboxes[context.task_id]
            await updater.update_status(
                TaskState.TASK_STATE_INPUT_REQUIRED,
                agent_text(updater, "interrupted: " + text),
                metadata={INTERRUPTED: True},
            )
            sig.taken.set_result(None)
            return True
        # The steer becomes the status message, so it shows in the task's
        # event stream and, once the status moves on, in its history.
        steer = Message()
        steer.CopyFrom(sig.message)
        steer.task_id, steer.context_id = context.task_id, context.context_id
        await updater.update_status(TaskState.TASK_STATE_WORKING, steer)
        sig.taken.set_result(None)
        return False

    async def cancel(self, context: RequestContext, queue: EventQueue) -> None:
        await TaskUpdater(queue, context.task_id, context.context_id).cancel()


class RecordingHandler(DefaultRequestHandler):
    """The SDK's request handler, recording every message and cancel."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.received: list[dict] = []

    def record(self, method: str, params: SendMessageRequest, context: ServerCallContext) -> None:
        headers = context.state.get("headers", {})
        self.received.append(
            {
                "method": method,
                "taskId": params.message.task_id,
                "text": get_message_text(params.message),
                "control": metadata_of(params.message).get(CONTROL, ""),
                "version": headers.get("a2a-version", ""),
                "extensions": sorted(context.requested_extensions),
            }
        )

    async def on_message_send(self, params, context):
        self.record("SendMessage", params, context)
        return await super().on_message_send(params, context)

    async def on_message_send_stream(self, params, context):
        self.record("SendStreamingMessage", params, context)
        async for event in super().on_message_send_stream(params, context):
            yield event

    async def on_cancel_task(self, params, context):
        self.received.append({"method": "CancelTask", "taskId": params.id})
        return await super().on_cancel_task(params, context)


class SteerHandler(RecordingHandler):
    """Takes steering signals for WORKING tasks before the SDK's handler.

    The SDK queues a message to a task behind its running execution, which
    for a task that stays WORKING means never; steering needs the message
    to reach the execution now. Messages without the control metadata go
    to the SDK's handler as usual.
    """

    def __init__(self, executor: Steer, modes: dict, *args, **kwargs):
        super().__init__(executor, *args, **kwargs)
        self.steer = executor
        self.modes = modes
        self.seq: dict[str, int] = {}

    async def on_message_send(self, params, context):
        control = metadata_of(params.message).get(CONTROL)
        if control is None:
            self.refuse_running("SendMessage", params, context)
            return await super().on_message_send(params, context)
        self.record("SendMessage", params, context)
        return await self.signal(control, params.message, context)

    async def on_message_send_stream(self, params, context):
        control = metadata_of(params.message).get(CONTROL)
        if control is None:
            self.refuse_running("SendStreamingMessage", params, context)
            async for event in super().on_message_send_stream(params, context):
                yield event
            return
        self.record("SendStreamingMessage", params, context)
        yield await self.signal(control, params.message, context)

    def refuse_running(self, method: str, params, context) -> None:
        """Refuses an ordinary message to a WORKING task (it would wait forever)."""
        if params.message.task_id and params.message.task_id in self.steer.inboxes:
            self.record(method, params, context)
            raise UnsupportedOperationError(
                message=f"task {params.message.task_id} is WORKING: send a steer or an interrupt"
            )

    async def signal(self, control, message: Message, context: ServerCallContext) -> Task:
        if STEERING not in context.requested_extensions:
            raise UnsupportedOperationError(
                message=f"the steering extension {STEERING} was not activated: send it in the A2A-Extensions header"
            )
        if control not in ("steer", "interrupt"):
            raise InvalidParamsError(message=f"unknown steering control {control!r}")
        mode = "steerable" if control == "steer" else "interruptible"
        if not self.modes.get(mode):
            raise UnsupportedOperationError(message=f"this agent is not {mode}")
        task_id = message.task_id
        if not task_id:
            raise InvalidParamsError(message="a steering message needs a taskId")
        inbox = self.steer.inboxes.get(task_id)
        if inbox is None:
            stored = await self.task_store.get(task_id, context)
            if stored is None:
                raise TaskNotFoundError(message=f"task {task_id} not found")
            raise UnsupportedOperationError(
                message=f"task {task_id} is {TaskState.Name(stored.status.state)}: only a WORKING task can be steered or interrupted"
            )
        sig = Signal(control, message)
        await inbox.put(sig)
        await asyncio.wait_for(sig.taken, 10)
        if control == "interrupt":
            task = await self.settled(task_id, context, lambda t: t.status.state == TaskState.TASK_STATE_INPUT_REQUIRED)
        else:
            task = await self.settled(task_id, context, lambda t: t.status.message.message_id == message.message_id)
        # The acknowledgement: the task with the signal in its history and a
        # receipt naming this agent.
        if not any(m.message_id == message.message_id for m in task.history):
            task.history.append(message)
        self.seq[task_id] = self.seq.get(task_id, 0) + 1
        seq = self.seq[task_id]
        task.metadata.update(
            {RECEIPT: {"control": control, "messageId": message.message_id, "seq": seq,
                       "hops": [{"agent": "py-steer", "seq": seq}]}}
        )
        return task

    async def settled(self, task_id: str, context, done) -> Task:
        """Reads the task once the execution's update reached the store (or after 5 s)."""
        deadline = time.monotonic() + 5
        while True:
            task = await self.task_store.get(task_id, context)
            if task is not None and (done(task) or time.monotonic() > deadline):
                return task
            await asyncio.sleep(0.01)


class EchoExtensions:
    """Echoes the requested steering extension in the A2A-Extensions response header.

    The SDK reads the request header but does not echo activated extensions.
    """

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        requested = b",".join(v for k, v in scope["headers"] if k == b"a2a-extensions").decode()
        active = STEERING in [u.strip() for u in requested.split(",")]

        async def echo(message):
            if active and message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [(b"a2a-extensions", STEERING.encode())]
            await send(message)

        return await self.app(scope, receive, echo)


def card(name: str, skill: str, base: str, streaming: bool = False, extensions=None, v03: bool = False) -> AgentCard:
    interfaces = [AgentInterface(url=base + RPC_PATH, protocol_binding="JSONRPC", protocol_version="1.0")]
    if v03:
        interfaces.append(AgentInterface(url=base + RPC_PATH, protocol_binding="JSONRPC", protocol_version="0.3"))
    return AgentCard(
        name=name,
        description=f"a2a-sdk test agent: {skill}",
        version="1.0.0",
        supported_interfaces=interfaces,
        capabilities=AgentCapabilities(streaming=streaming, extensions=extensions or []),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id=skill, name=skill, description=f"the {skill} behaviour", tags=[skill])],
    )


def build(behaviour: str, base: str) -> Starlette:
    streaming = behaviour in ("stream", "steer")
    extensions = []
    if behaviour == "steer":
        modes = {"steerable": True, "interruptible": True}
        extensions = [AgentExtension(uri=STEERING, description="steering, implemented by hand", params=modes)]
    agent_card = card("py-" + behaviour, behaviour, base, streaming, extensions, v03=behaviour == "complete")
    store = InMemoryTaskStore()
    if behaviour == "steer":
        handler = SteerHandler(Steer(), modes, task_store=store, agent_card=agent_card)
    else:
        executor = {"complete": Complete, "stream": Stream, "ask": Ask, "slow": Slow}[behaviour]()
        handler = RecordingHandler(agent_executor=executor, task_store=store, agent_card=agent_card)

    async def received(_request):
        return JSONResponse(handler.received)

    async def steering_log(_request):
        taken = handler.steer.taken if behaviour == "steer" else []
        return JSONResponse([{"control": t["control"], "text": t["text"]} for t in taken])

    routes = create_agent_card_routes(agent_card)
    routes += create_jsonrpc_routes(handler, RPC_PATH, enable_v0_3_compat=behaviour == "complete")
    routes += [Route("/received", received), Route("/steering/log", steering_log)]
    app = Starlette(routes=routes)
    app.add_middleware(EchoExtensions)
    return app


async def main() -> None:
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    servers, urls, tasks = [], {}, []
    for behaviour in ("complete", "stream", "ask", "slow", "steer"):
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sock.listen(128)
        base = f"http://127.0.0.1:{sock.getsockname()[1]}"
        config = uvicorn.Config(build(behaviour, base), log_level="warning", lifespan="off", timeout_graceful_shutdown=1)
        server = uvicorn.Server(config)
        # The process handles signals itself, for all servers at once.
        server.install_signal_handlers = lambda: None
        servers.append(server)
        urls[behaviour] = base
        tasks.append(asyncio.create_task(server.serve(sockets=[sock])))
    while not all(s.started for s in servers):
        if any(t.done() for t in tasks):
            for t in tasks:
                if t.done() and t.exception():
                    raise t.exception()
            raise SystemExit("a server stopped before listening")
        await asyncio.sleep(0.01)
    print(json.dumps(urls), flush=True)
    log.info("listening: %s", urls)

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    def watch_stdin():
        sys.stdin.buffer.read()
        loop.call_soon_threadsafe(stop.set)

    threading.Thread(target=watch_stdin, daemon=True).start()
    await stop.wait()
    log.info("stopping")
    for s in servers:
        s.should_exit = True
        s.force_exit = True
    await asyncio.wait(tasks, timeout=3)


if __name__ == "__main__":
    asyncio.run(main())
