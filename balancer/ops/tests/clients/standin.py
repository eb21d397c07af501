#!/usr/bin/env python3
"""A stand-in search engine for the client tests: answers Elasticsearch/OpenSearch and
Solr search requests in each engine's own format, enough for the official clients to parse
them without error. Standard library only.

    python3 standin.py --port P --name NAME [--host 127.0.0.1] [--trace]

With `--port 0` the chosen port is printed on stdout (one line) once listening.
It keeps no state and logs to stderr only on errors (an unknown path, an unreadable body),
unless `--trace` asks for one JSON line per request on stderr (method, path, query,
content-type, content-encoding, accept, body bytes) -- used to see what the clients send.
"""

import argparse
import gzip
import json
import sys
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

ES_VERSION = "9.1.0"


def es_shards():
    return {"total": 1, "successful": 1, "skipped": 0, "failed": 0}


def es_search(name, index):
    return {
        "took": 1,
        "timed_out": False,
        "_shards": es_shards(),
        "hits": {
            "total": {"value": 1, "relation": "eq"},
            "max_score": 1.0,
            "hits": [
                {
                    "_index": index,
                    "_id": "1",
                    "_score": 1.0,
                    "_source": {"title": name},
                }
            ],
        },
    }


def es_info(name):
    return {
        "name": name,
        "cluster_name": "ballot-standin",
        "cluster_uuid": "standin-0000000000000000",
        "version": {
            "number": ES_VERSION,
            "build_flavor": "default",
            "build_type": "tar",
            "build_hash": "0000000000000000000000000000000000000000",
            "build_date": "2025-01-01T00:00:00.000Z",
            "build_snapshot": False,
            "lucene_version": "10.2.2",
            "minimum_wire_compatibility_version": "8.19.0",
            "minimum_index_compatibility_version": "8.0.0",
        },
        "tagline": "You Know, for Search",
    }


def es_health():
    return {
        "cluster_name": "ballot-standin",
        "status": "green",
        "timed_out": False,
        "number_of_nodes": 1,
        "number_of_data_nodes": 1,
        "active_primary_shards": 1,
        "active_shards": 1,
        "relocating_shards": 0,
        "initializing_shards": 0,
        "unassigned_shards": 0,
        "unassigned_primary_shards": 0,
        "delayed_unassigned_shards": 0,
        "number_of_pending_tasks": 0,
        "number_of_in_flight_fetch": 0,
        "task_max_waiting_in_queue_millis": 0,
        "active_shards_percent_as_number": 100.0,
    }


def solr_select(name):
    return {
        "responseHeader": {"status": 0, "QTime": 1, "params": {}},
        "response": {
            "numFound": 1,
            "start": 0,
            "numFoundExact": True,
            "docs": [{"id": "1", "title": name}],
        },
    }


def ndjson_searches(body):
    """The number of searches in an _msearch body: header and body lines, in pairs."""
    lines = [ln for ln in body.split(b"\n") if ln.strip()]
    return max(1, (len(lines) + 1) // 2)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "ballot-standin"

    def version_string(self):
        return self.server_version

    # -- plumbing ----------------------------------------------------------------------

    def log_message(self, fmt, *args):  # no access log
        pass

    def log_error(self, fmt, *args):
        sys.stderr.write("standin %s: %s\n" % (self.server.name, fmt % args))

    def read_body(self):
        """Reads the whole request body (Content-Length or chunked) and decodes a gzip or
        deflate Content-Encoding. Returns the decoded bytes."""
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            raw = bytearray()
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                raw += self.rfile.read(size)
                self.rfile.readline(3)
            raw = bytes(raw)
        else:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        enc = (self.headers.get("Content-Encoding") or "").strip().lower()
        if raw and enc == "gzip":
            return gzip.decompress(raw)
        if raw and enc == "deflate":
            try:
                return zlib.decompress(raw)
            except zlib.error:
                return zlib.decompress(raw, -zlib.MAX_WBITS)  # raw deflate
        return raw

    def send(self, status, payload, content_type, extra=None):
        data = payload if isinstance(payload, bytes) else payload.encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def send_json(self, status, obj, extra=None):
        self.send(status, json.dumps(obj), "application/json", extra)

    def send_es(self, status, obj):
        # elasticsearch-py raises UnsupportedProductError on a 2xx answer without
        # `X-Elastic-Product: Elasticsearch`; plain application/json is accepted even when
        # the request asked for application/vnd.elasticsearch+json; compatible-with=9.
        self.send_json(status, obj, {"X-Elastic-Product": "Elasticsearch"})

    def not_found(self, path):
        self.log_error("no such endpoint: %s %s", self.command, path)
        self.send_json(404, {"error": "no such endpoint", "method": self.command, "path": path})

    # -- dispatch ----------------------------------------------------------------------

    def handle_any(self):
        url = urlsplit(self.path)
        path = url.path
        try:
            body = self.read_body()
        except Exception as e:  # unreadable body: answer 400, keep serving
            self.log_error("unreadable body on %s %s: %r", self.command, path, e)
            self.close_connection = True
            self.send_json(400, {"error": "unreadable body: %r" % (e,)})
            return
        if self.server.trace:
            sys.stderr.write(
                json.dumps(
                    {
                        "standin": self.server.name,
                        "method": self.command,
                        "path": path,
                        "query": url.query,
                        "content_type": self.headers.get("Content-Type"),
                        "content_encoding": self.headers.get("Content-Encoding"),
                        "accept": self.headers.get("Accept"),
                        "body_bytes": len(body),
                    }
                )
                + "\n"
            )
            sys.stderr.flush()
        method = self.command
        name = self.server.name
        parts = [p for p in path.split("/") if p]

        if path == "/healthz" and method in ("GET", "HEAD"):
            self.send(200, "ok", "text/plain; charset=utf-8")
            return

        # Solr's health check: /solr/<core>/admin/ping
        if len(parts) == 4 and parts[0] == "solr" and parts[2:] == ["admin", "ping"]:
            self.send(200, json.dumps({"status": "OK"}), "application/json;charset=utf-8")
            return

        # Solr: /solr/<core>/select[/], /solr/<core>/query[/]
        if len(parts) == 3 and parts[0] == "solr" and parts[2] in ("select", "query"):
            if method not in ("GET", "POST"):
                self.send_json(405, {"error": "method not allowed"})
                return
            wt = parse_qs(url.query).get("wt", [])
            ctype = (self.headers.get("Content-Type") or "").lower()
            if method == "POST" and ctype.startswith("application/x-www-form-urlencoded"):
                wt += parse_qs(body.decode("utf-8", "replace")).get("wt", [])
            if any(w != "json" for w in wt):
                self.log_error("unsupported wt=%s", wt)
                self.send_json(400, {"error": "this stand-in answers wt=json only"})
                return
            self.send(200, json.dumps(solr_select(name)), "application/json;charset=utf-8")
            return

        # Elasticsearch / OpenSearch
        if path == "/" and method in ("GET", "HEAD"):
            self.send_es(200, es_info(name))
            return
        if parts[:2] == ["_cluster", "health"] and method == "GET":
            self.send_es(200, es_health())
            return
        if parts and method in ("GET", "POST"):
            endpoint = parts[-1]
            index = parts[0] if len(parts) >= 2 and not parts[0].startswith("_") else "books"
            if endpoint == "_search" and len(parts) <= 2:
                self.send_es(200, es_search(name, index))
                return
            if parts[-2:] == ["_search", "template"] and len(parts) <= 3:
                self.send_es(200, es_search(name, index))
                return
            if endpoint == "_count" and len(parts) <= 2:
                self.send_es(200, {"count": 1, "_shards": es_shards()})
                return
            if endpoint == "_msearch" and len(parts) <= 2:
                n = ndjson_searches(body)
                responses = []
                for _ in range(n):
                    r = es_search(name, index)
                    r["status"] = 200
                    responses.append(r)
                self.send_es(200, {"took": 1, "responses": responses})
                return
        self.not_found(path)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = handle_any


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # A client (the balancer's pool, at its end) closing a kept-alive connection is
        # not an error of the stand-in.
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--trace", action="store_true", help="one JSON line per request on stderr")
    args = ap.parse_args()
    srv = Server((args.host, args.port), Handler)
    srv.name = args.name
    srv.trace = args.trace
    if args.port == 0:
        print(srv.server_address[1], flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
