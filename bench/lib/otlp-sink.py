#!/usr/bin/env python3
"""A trace collector for the HTTP benchmarks: answers every POST (OTLP/HTTP
protobuf or Zipkin JSON) with 200 after reading its body, and keeps
nothing, so a MeshTrace export costs the proxy what a real collector's
would. Usage: otlp-sink.py PORT (listens on 127.0.0.1)."""
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Sink).serve_forever()
