#!/usr/bin/env python3
"""A real gRPC server for the interop tests: answers one unary method with its own id.

Methods (requests and responses are JSON, bytes on the wire, so no protoc code
generation is needed):
- /meshlink.interop.Greeter/SayHello (unary): request {"name": "...",
  "delay_ms": optional, "fail": optional K, "fail_servers": optional ids}
  -> response {"server": "<--id>", "greeting": "hello ..."}, after delay_ms
  milliseconds; with "fail": K the server answers UNAVAILABLE to K of every
  K+1 such calls (a counter per server), so a client retrying K times always
  succeeds; a server whose id is in "fail_servers" answers UNAVAILABLE;
- /meshlink.interop.Greeter/Count (server streaming): request {"n": N} -> N
  responses {"server": "<--id>", "i": 0..N-1}.

Once it listens, prints one JSON line to stdout and flushes it:
  {"event": "listening", "server": "<id>", "port": <port>}
With --port 0 (the default) the kernel picks the port; read it from that line.
Runs until SIGTERM/SIGINT or until stdin closes (so it never outlives its parent
when started with a pipe on stdin).
"""

import argparse
import json
import signal
import sys
import threading
import time
from concurrent import futures

import grpc

SERVICE = "meshlink.interop.Greeter"
METHOD = "SayHello"


def encode(obj):
    return json.dumps(obj).encode()


def decode(data):
    return json.loads(data.decode()) if data else {}


def handler_for(server_id):
    failing = {"calls": 0}
    lock = threading.Lock()

    def say_hello(request, context):
        if server_id in request.get("fail_servers", []):
            context.abort(grpc.StatusCode.UNAVAILABLE, f"{server_id}: told to fail")
        k = int(request.get("fail", 0))
        if k:
            with lock:
                n = failing["calls"]
                failing["calls"] += 1
            if n % (k + 1) < k:
                context.abort(grpc.StatusCode.UNAVAILABLE, f"{server_id}: failing {k} of {k + 1}")
        delay = request.get("delay_ms", 0)
        if delay:
            time.sleep(delay / 1000)
        return {"server": server_id, "greeting": f"hello {request.get('name', 'world')}"}

    def count(request, _context):
        for i in range(int(request.get("n", 0))):
            yield {"server": server_id, "i": i}

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            METHOD: grpc.unary_unary_rpc_method_handler(
                say_hello, request_deserializer=decode, response_serializer=encode
            ),
            "Count": grpc.unary_stream_rpc_method_handler(
                count, request_deserializer=decode, response_serializer=encode
            ),
        },
    )


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--id", required=True, help="the server id put in every response")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0, help="0 lets the kernel pick one")
    p.add_argument(
        "--exit-on-stdin-eof",
        action="store_true",
        help="stop when stdin closes (the parent test died or dropped us)",
    )
    args = p.parse_args()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    server.add_generic_rpc_handlers((handler_for(args.id),))
    port = server.add_insecure_port(f"{args.host}:{args.port}")
    if port == 0:
        sys.exit(f"greeter_server {args.id}: cannot listen on {args.host}:{args.port}")
    server.start()
    print(json.dumps({"event": "listening", "server": args.id, "port": port}), flush=True)

    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    if args.exit_on_stdin_eof:
        threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
    stop.wait()
    server.stop(grace=1).wait()


if __name__ == "__main__":
    main()
