#!/usr/bin/env python3
"""The downstream tier in Python: `bench.v1.Downstream/Fetch` on a grpcio (aio)
server and `POST /v1/fetch` on Starlette served by uvicorn, one event loop, one
core (validate, wait the service time with asyncio.sleep, generate the records).

    downstream.py --grpc HOST:PORT --rest HOST:PORT [--delay-ms N]

Errors are answered as the Rust tiers answer them: 400/413/415/404/405 with a
JSON body {"error": "..."} on REST; INVALID_ARGUMENT or RESOURCE_EXHAUSTED with
a message on gRPC. It also serves grpc.health.v1 and reflection (v1alpha).
"""

import argparse
import asyncio
import json
import signal

import contract

contract.use_venv()

import grpc  # noqa: E402
import uvicorn  # noqa: E402
from grpc_health.v1 import health, health_pb2, health_pb2_grpc  # noqa: E402
from grpc_reflection.v1alpha import reflection  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.exceptions import HTTPException  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bench.v1 import bench_pb2, bench_pb2_grpc  # noqa: E402

PROTOBUF = "application/x-protobuf"
SERVICE = "bench.v1.Downstream"


def host_port(text):
    return text.split("://", 1)[-1].rstrip("/")


class Core:
    """The work both listeners share: the same for gRPC and REST."""

    def __init__(self, delay_s, max_items):
        self.delay_s = delay_s
        self.max_items = max_items

    async def fetch(self, request_id, items, body, shape):
        contract.validate(request_id, items, len(body), max_items=self.max_items)
        if self.delay_s > 0:
            await asyncio.sleep(self.delay_s)
        if shape == "timeseries":
            return [], contract.points(request_id, items)
        return contract.records(request_id, items), []


def error(status, reason):
    headers = {"connection": "close"} if status == 413 else None
    return JSONResponse({"error": reason}, status_code=status, headers=headers)


def rest_app(core):
    limit = contract.MAX_BODY_BYTES * 4 // 3 + contract.MAX_REQUEST_ID_BYTES * 6 + 1024

    async def fetch(request: Request):
        media = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if media not in ("application/json", PROTOBUF, "application/protobuf"):
            return error(415, f"Content-Type must be application/json or {PROTOBUF}")
        if int(request.headers.get("content-length") or 0) > limit:
            return error(413, f"request body is larger than the {limit} bytes this service accepts")
        raw = await request.body()
        answer_pb = PROTOBUF in request.headers.get("accept", "") or (
            media != "application/json" and "application/json" not in request.headers.get("accept", ""))
        try:
            if media == "application/json":
                try:
                    data = json.loads(raw)
                except ValueError as e:
                    raise contract.Invalid(f"malformed JSON request: {e}") from None
                request_id, items, body, shape = contract.parse_fetch_json(data)
            else:
                req = bench_pb2.FetchRequest.FromString(raw)
                shape = "timeseries" if req.shape == bench_pb2.SHAPE_TIMESERIES else "order"
                request_id, items, body = req.request_id, req.items, req.body
            recs, pts = await core.fetch(request_id, items, body, shape)
        except contract.Invalid as e:
            return error(413 if e.too_large else 400, e.reason)
        except Exception as e:  # a protobuf that does not decode
            return error(400, f"malformed protobuf request: {e}")
        if answer_pb:
            resp = bench_pb2.FetchResponse(request_id=request_id,
                                           records=[contract.record_pb(bench_pb2, r) for r in recs],
                                           points=[bench_pb2.Point(**p) for p in pts])
            return Response(resp.SerializeToString(), media_type=PROTOBUF)
        answer = contract.answer_json(request_id, [contract.record_json(r) for r in recs],
                                      [contract.point_json(p) for p in pts])
        return Response(json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode(), media_type="application/json")

    async def refused(request: Request, exc: HTTPException):
        path = request.url.path[:200]
        if exc.status_code == 405:
            return error(405, f"{request.method} is not allowed on {path}; the API is POST /v1/fetch")
        if exc.status_code == 404:
            return error(404, f"no such route {path}; the API is POST /v1/fetch")
        return error(exc.status_code, exc.detail)

    return Starlette(routes=[Route("/v1/fetch", fetch, methods=["POST"])],
                     exception_handlers={HTTPException: refused})


class Downstream(bench_pb2_grpc.DownstreamServicer):
    def __init__(self, core):
        self.core = core

    async def Fetch(self, request, context):
        shape = "timeseries" if request.shape == bench_pb2.SHAPE_TIMESERIES else "order"
        if request.shape not in (bench_pb2.SHAPE_ORDER, bench_pb2.SHAPE_TIMESERIES):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "field shape is out of range")
        try:
            recs, pts = await self.core.fetch(request.request_id, request.items, request.body, shape)
        except contract.Invalid as e:
            code = grpc.StatusCode.RESOURCE_EXHAUSTED if e.too_large else grpc.StatusCode.INVALID_ARGUMENT
            await context.abort(code, e.reason)
        return bench_pb2.FetchResponse(request_id=request.request_id,
                                       records=[contract.record_pb(bench_pb2, r) for r in recs],
                                       points=[bench_pb2.Point(**p) for p in pts])


async def serve(args):
    core = Core(args.delay_ms / 1000.0, args.max_items)
    limit = contract.MAX_BODY_BYTES + 64 * 1024
    server = grpc.aio.server(options=[("grpc.max_receive_message_length", limit),
                                      ("grpc.max_send_message_length", 64 * 1024 * 1024)])
    bench_pb2_grpc.add_DownstreamServicer_to_server(Downstream(core), server)
    health_servicer = health.aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection([SERVICE, health.SERVICE_NAME, reflection.SERVICE_NAME], server)
    grpc_port = server.add_insecure_port(host_port(args.grpc))
    await server.start()
    await health_servicer.set(SERVICE, health_pb2.HealthCheckResponse.SERVING)
    await health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
    host, _, port = host_port(args.rest).rpartition(":")
    config = uvicorn.Config(rest_app(core), host=host.strip("[]"), port=int(port), log_level="warning",
                            access_log=False, lifespan="off")
    rest = uvicorn.Server(config)
    task = asyncio.create_task(rest.serve())
    while not rest.started and not task.done():
        await asyncio.sleep(0.01)
    if rest.started:
        rest_port = rest.servers[0].sockets[0].getsockname()[1]
        print(json.dumps({"grpc_port": grpc_port, "rest_port": rest_port}), flush=True)
    # uvicorn handles SIGINT/SIGTERM; gRPC drains once it has stopped.
    await task
    await server.stop(grace=5)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--grpc", required=True, help="gRPC listener, HOST:PORT")
    p.add_argument("--rest", required=True, help="REST listener, HOST:PORT")
    p.add_argument(
        "--delay-ms", type=float, default=500.0,
        help="simulated service time of every request (500, the harness's --delay default; give {delay_ms})",
    )
    p.add_argument("--max-items", type=int, default=contract.MAX_ITEMS, help="most records one request may ask for")
    args = p.parse_args()
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
