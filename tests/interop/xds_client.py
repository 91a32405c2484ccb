#!/usr/bin/env python3
"""A proxyless gRPC client that finds its backends through meshlink's xDS server.

grpcio's own xDS client does the work: the channel target is `xds:///NAME`
and the bootstrap (GRPC_XDS_BOOTSTRAP = a file, or GRPC_XDS_BOOTSTRAP_CONFIG =
the JSON itself) says where the control plane is and how to authenticate to it.
Nothing here speaks xDS; this script only makes calls and reports who answered.

Every call prints one JSON line to stdout, flushed at once:
  {"seq": 3, "ok": true, "server": "greeter-1"}
  {"seq": 4, "ok": false, "code": "UNAVAILABLE", "details": "..."}

Modes:
  --calls N     make N calls, then exit (0 if all succeeded, 1 otherwise)
  --stdin       read one integer per stdin line and make that many calls; exit on EOF
  --forever     call until killed (--interval-ms between calls, default 0)

Debugging: GRPC_TRACE=xds_client,xds_resolver GRPC_VERBOSITY=debug shows on
stderr what the xDS client asked for and received.
"""

import argparse
import json
import os
import sys
import time

import grpc

METHOD = "/meshlink.interop.Greeter/SayHello"


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Caller:
    def __init__(self, target, timeout, extra=None, sessions=0):
        self.channel = grpc.insecure_channel(target)
        self.say_hello = self.channel.unary_unary(
            METHOD,
            request_serializer=lambda o: json.dumps(o).encode(),
            response_deserializer=lambda b: json.loads(b.decode()),
        )
        self.timeout = timeout
        self.extra = extra or {}
        self.seq = 0
        self.failures = 0
        self.sessions = sessions

    def call(self):
        self.seq += 1
        # With --sessions N, call k carries x-session-id s<k mod N>.
        session = f"s{self.seq % self.sessions}" if self.sessions else None
        metadata = (("x-session-id", session),) if session else None
        tag = {"session": session} if session else {}
        try:
            reply = self.say_hello(
                {"name": f"call-{self.seq}", **self.extra}, timeout=self.timeout, metadata=metadata
            )
            emit({"seq": self.seq, "ok": True, "server": reply.get("server"), **tag})
        except grpc.RpcError as e:
            self.failures += 1
            emit({"seq": self.seq, "ok": False, "code": e.code().name, "details": e.details(), **tag})


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", default="xds:///greeter", help="channel target (default: %(default)s)")
    p.add_argument("--timeout", type=float, default=5.0, help="per-call deadline, seconds")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--calls", type=int, metavar="N", help="make N calls and exit")
    mode.add_argument("--stdin", action="store_true", help="make as many calls as each stdin line says")
    mode.add_argument("--forever", action="store_true", help="call until killed")
    p.add_argument("--interval-ms", type=int, default=0, help="pause between calls in --forever mode")
    p.add_argument(
        "--request",
        default="{}",
        help='JSON fields added to every request, e.g. {"fail": 2} or {"delay_ms": 3000} (see greeter_server.py)',
    )
    p.add_argument(
        "--sessions",
        type=int,
        default=0,
        help="send x-session-id s<k mod N> on call k (a header a hash policy can use)",
    )
    args = p.parse_args()

    if args.target.startswith("xds:") and not (
        os.environ.get("GRPC_XDS_BOOTSTRAP") or os.environ.get("GRPC_XDS_BOOTSTRAP_CONFIG")
    ):
        sys.exit(
            "xds_client: set GRPC_XDS_BOOTSTRAP (a bootstrap file) or GRPC_XDS_BOOTSTRAP_CONFIG "
            "(its JSON); see tests/interop/README.md for the meshlink bootstrap"
        )

    caller = Caller(args.target, args.timeout, json.loads(args.request), args.sessions)
    emit({"event": "channel", "target": args.target, "grpc": grpc.__version__})
    if args.calls is not None:
        for _ in range(args.calls):
            caller.call()
        sys.exit(1 if caller.failures else 0)
    if args.stdin:
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                n = int(line)
            except ValueError:
                emit({"event": "error", "details": f"expected a number of calls, got {line!r}"})
                continue
            for _ in range(n):
                caller.call()
        return
    while True:
        caller.call()
        if args.interval_ms:
            time.sleep(args.interval_ms / 1000)


if __name__ == "__main__":
    try:
        main()
    except (KeyboardInterrupt, BrokenPipeError):
        pass
