#!/usr/bin/env python3
"""The caller tier in Python: a JSON front door (`POST /v1/call`, Starlette on
uvicorn) that fetches the records from the downstream over gRPC (grpcio aio,
one channel) or REST (httpx, an HTTP/1.1 connection pool), checks each answer
as a real caller does (its id echoed, its record count) and answers every
record as JSON, with `Server-Timing: downstream;dur=<ms>`.

    caller.py --listen HOST:PORT --downstream-grpc HOST:PORT --downstream-rest HOST:PORT --transport grpc|rest
"""

import argparse
import asyncio
import base64
import json
import time

import contract

contract.use_venv()

import grpc  # noqa: E402
import httpx  # noqa: E402
import uvicorn  # noqa: E402
from starlette.applications import Starlette  # noqa: E402
from starlette.exceptions import HTTPException  # noqa: E402
from starlette.requests import Request  # noqa: E402
from starlette.responses import JSONResponse, Response  # noqa: E402
from starlette.routing import Route  # noqa: E402

from bench.v1 import bench_pb2, bench_pb2_grpc  # noqa: E402

MAX_RECORDS = 100_000
MAX_FRONT_BODY_BYTES = 64 * 1024


class CallError(Exception):
    """A downstream call that failed: 502, or 504 for a timeout."""

    def __init__(self, status, reason):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def host_port(text):
    return text.split("://", 1)[-1].rstrip("/")


class GrpcClient:
    def __init__(self, target, timeout_s):
        self.target = host_port(target)
        self.timeout_s = timeout_s
        self.channel = grpc.aio.insecure_channel(self.target, options=[
            ("grpc.max_receive_message_length", 64 * 1024 * 1024)])
        self.stub = bench_pb2_grpc.DownstreamStub(self.channel)

    async def fetch(self, request_id, items, shape, body):
        req = bench_pb2.FetchRequest(request_id=request_id, items=items, body=body,
                                     shape=bench_pb2.SHAPE_TIMESERIES if shape == "timeseries" else bench_pb2.SHAPE_ORDER)
        try:
            resp = await self.stub.Fetch(req, timeout=self.timeout_s)
        except grpc.aio.AioRpcError as e:
            if e.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                raise CallError(504, f"{self.target} did not answer within {self.timeout_s}s") from None
            raise CallError(502, f"{self.target} answered {e.code().name}: {e.details()}") from None
        return (resp.request_id, [contract.record_from_pb(r) for r in resp.records],
                [contract.point_from_pb(p) for p in resp.points])


class RestClient:
    def __init__(self, base, timeout_s):
        self.base = "http://" + host_port(base)
        self.timeout_s = timeout_s
        self.client = httpx.AsyncClient(base_url=self.base, timeout=timeout_s,
                                        limits=httpx.Limits(max_connections=None, max_keepalive_connections=1024))

    async def fetch(self, request_id, items, shape, body):
        req = {"requestId": request_id, "items": items}
        if body:
            req["body"] = base64.b64encode(body).decode()
        if shape == "timeseries":
            req["shape"] = shape
        try:
            resp = await self.client.post("/v1/fetch", content=json.dumps(req, separators=(",", ":")),
                                          headers={"content-type": "application/json"})
        except httpx.TimeoutException:
            raise CallError(504, f"{self.base} did not answer within {self.timeout_s}s") from None
        except httpx.HTTPError as e:
            raise CallError(502, f"{self.base}: {e!r}") from None
        if resp.status_code != 200:
            raise CallError(502, f"{self.base} answered {resp.status_code}: {resp.text[:200]}")
        try:
            data = resp.json()
            return data["requestId"], data.get("records", []), data.get("points", [])
        except (ValueError, KeyError, TypeError) as e:
            raise CallError(502, f"{self.base} answered no fetch response: {e}") from None


def error(status, reason):
    return JSONResponse({"error": reason}, status_code=status)


def parse_call(raw):
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise contract.Invalid(f"malformed JSON request: {e}") from None
    request_id, items, _, shape = contract.parse_fetch_json(data)
    request_bytes = data.get("requestBytes", 0)
    if not isinstance(request_bytes, int) or isinstance(request_bytes, bool) or not 0 <= request_bytes <= 0xFFFFFFFF:
        raise contract.Invalid("malformed JSON request: requestBytes is not a 32-bit unsigned integer")
    return request_id, items, shape, request_bytes


def front_app(client, fanout):
    async def call_one(request_id, items, shape, request_bytes):
        body = contract.upload_body(request_id, request_bytes)
        got_id, recs, pts = await client.fetch(request_id, items, shape, body)
        count = len(pts) if shape == "timeseries" else len(recs)
        if got_id != request_id or count != items or (recs and pts):
            raise CallError(502, f"the downstream answered {got_id!r} with {len(recs) + len(pts)} items; "
                                 f"asked {request_id!r} for {items}")
        return recs, pts

    async def call(request: Request):
        if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
            return error(415, "Content-Type must be application/json")
        raw = await request.body()
        if len(raw) > MAX_FRONT_BODY_BYTES:
            return error(413, f"request body is larger than the {MAX_FRONT_BODY_BYTES} bytes this service accepts")
        try:
            request_id, items, shape, request_bytes = parse_call(raw)
            contract.validate(request_id, items, 0)
            if request_bytes > contract.MAX_BODY_BYTES:
                raise contract.Invalid(f"requestBytes is {request_bytes}; the limit of one upload is "
                                       f"{contract.MAX_BODY_BYTES} bytes")
            if items * fanout > MAX_RECORDS:
                raise contract.Invalid(f"{items} items × fan-out {fanout} = {items * fanout} records, over this "
                                       f"caller's limit of {MAX_RECORDS} records per request")
        except contract.Invalid as e:
            return error(400, e.reason)
        ids = [request_id] if fanout <= 1 else [f"{request_id}/{k}" for k in range(fanout)]
        started = time.perf_counter()
        try:
            parts = await asyncio.gather(*(call_one(i, items, shape, request_bytes) for i in ids))
        except CallError as e:
            return error(e.status, e.reason)
        downstream_ms = (time.perf_counter() - started) * 1e3
        answer = contract.answer_json(request_id, [r for recs, _ in parts for r in recs],
                                      [p for _, pts in parts for p in pts])
        return Response(json.dumps(answer, separators=(",", ":"), ensure_ascii=False).encode(),
                        media_type="application/json",
                        headers={"server-timing": f"downstream;dur={downstream_ms:.3f}"})

    async def refused(request: Request, exc: HTTPException):
        path = request.url.path[:200]
        if exc.status_code == 405:
            return error(405, f"{request.method} is not allowed on {path}; the API is POST /v1/call")
        if exc.status_code == 404:
            return error(404, f"no such route {path}; the API is POST /v1/call")
        return error(exc.status_code, exc.detail)

    return Starlette(routes=[Route("/v1/call", call, methods=["POST"])],
                     exception_handlers={HTTPException: refused})


async def serve(args):
    if args.transport == "grpc":
        if not args.downstream_grpc:
            raise SystemExit("--transport grpc needs --downstream-grpc")
        client = GrpcClient(args.downstream_grpc, args.downstream_timeout_s)
    else:
        if not args.downstream_rest:
            raise SystemExit("--transport rest needs --downstream-rest")
        client = RestClient(args.downstream_rest, args.downstream_timeout_s)
    host, _, port = host_port(args.listen).rpartition(":")
    config = uvicorn.Config(front_app(client, args.fanout), host=host.strip("[]"), port=int(port),
                            log_level="warning", access_log=False, lifespan="off")
    front = uvicorn.Server(config)
    task = asyncio.create_task(front.serve())
    while not front.started and not task.done():
        await asyncio.sleep(0.01)
    if front.started:
        print(json.dumps({"listen_port": front.servers[0].sockets[0].getsockname()[1]}), flush=True)
    await task


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--listen", required=True, help="front door, HOST:PORT")
    p.add_argument("--downstream-grpc", help="the downstream's gRPC listener, HOST:PORT")
    p.add_argument("--downstream-rest", help="the downstream's REST listener, HOST:PORT")
    p.add_argument("--transport", choices=["grpc", "rest"], default="grpc", help="the internal hop")
    p.add_argument("--fanout", type=int, default=1, help="concurrent downstream calls per front request")
    p.add_argument("--downstream-timeout-s", type=float, default=30.0, help="a slower downstream call is a 504")
    asyncio.run(serve(p.parse_args()))


if __name__ == "__main__":
    main()
