#!/usr/bin/env python3
"""A real grpcio client for the L7 sidecar tests: calls the interop Greeter
through a meshlink-proxy outbound (plaintext from the app, as an app in a
mesh does) over ONE channel, and prints one JSON line with what it saw:

  {"unary": {"<server id>": calls, ...}, "unary_errors": [...],
   "streamed": N, "stream_servers": [...], "slow": "<status code name>"}

- --calls N unary SayHello calls (per-request balancing shows in "unary");
- --stream N: one server-streaming Count call of N messages;
- --slow-ms MS: one SayHello that the server answers after MS milliseconds
  ("slow" is its status: DEADLINE_EXCEEDED when the route times it out).
"""

import argparse
import json
import sys

import grpc


def encode(obj):
    return json.dumps(obj).encode()


def decode(data):
    return json.loads(data.decode()) if data else {}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", required=True, help="host:port of the sidecar's outbound")
    p.add_argument("--calls", type=int, default=100)
    p.add_argument("--stream", type=int, default=0)
    p.add_argument("--slow-ms", type=int, default=0)
    args = p.parse_args()

    out = {"unary": {}, "unary_errors": [], "streamed": 0, "stream_servers": [], "slow": None}
    with grpc.insecure_channel(args.target) as channel:
        hello = channel.unary_unary(
            "/meshlink.interop.Greeter/SayHello", request_serializer=encode, response_deserializer=decode
        )
        count = channel.unary_stream(
            "/meshlink.interop.Greeter/Count", request_serializer=encode, response_deserializer=decode
        )
        for i in range(args.calls):
            try:
                r = hello({"name": f"call-{i}"}, timeout=20)
                out["unary"][r["server"]] = out["unary"].get(r["server"], 0) + 1
            except grpc.RpcError as e:
                out["unary_errors"].append(f"{e.code().name}: {e.details()}")
        if args.stream:
            servers = set()
            expected = 0
            for msg in count({"n": args.stream}, timeout=60):
                if msg["i"] != expected:
                    sys.exit(f"stream out of order: got {msg['i']}, expected {expected}")
                expected += 1
                servers.add(msg["server"])
            out["streamed"] = expected
            out["stream_servers"] = sorted(servers)
        if args.slow_ms:
            try:
                hello({"name": "slow", "delay_ms": args.slow_ms}, timeout=30)
                out["slow"] = "OK"
            except grpc.RpcError as e:
                out["slow"] = e.code().name
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
