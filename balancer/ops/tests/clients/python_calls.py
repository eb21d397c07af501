#!/usr/bin/env python3
"""The official Python search clients' everyday calls, made through the balancer, each
checked against the balancer's /metrics: a call expected to be routed by the policy must
add exactly one answer to ballot_requests_total, with a reason in {vote, home, overflow,
stall-guard}, and must not grow ballot_client_errors_total; a call expected to be
forwarded blind must add exactly one answer with reason `fallback`. Where the client
exposes the answer's headers (elasticsearch-py's resp.meta.headers, requests), the
x-ballot-reason header must agree with the metrics.

    python3 python_calls.py --lb http://127.0.0.1:PORT --admin http://127.0.0.1:APORT
    python3 python_calls.py --lb http://127.0.0.1:STANDIN_PORT --no-metrics   # clients only

Prints one JSON line per case:
  {"client", "call" (the Python source that ran), "route" (always "": the Rust side adds
   it from the access log), "expect" ("policy" | "fallback"), "reason" (from the metrics,
   or the header without metrics), "ok", "why", "counted", "client_errors"}
Exits 0 when every case met its expectation, 1 otherwise. An exception is never hidden:
the case is printed with ok=false and the exception text.
"""

import argparse
import json
import sys
import time
import traceback
import urllib.request

import pysolr
import requests
from elasticsearch import Elasticsearch
from opensearchpy import OpenSearch
from prometheus_client.parser import text_string_to_metric_families

POLICY_REASONS = {"vote", "home", "overflow", "stall-guard"}
REQUESTS = "ballot_requests_total"
CLIENT_ERRORS = "ballot_client_errors_total"

# (client, call, expect). `call` is a Python expression, evaluated as written, in a
# namespace holding the clients below and LB.
CASES = [
    # -- elasticsearch-py ------------------------------------------------------------------
    ("elasticsearch-py", 'es.search(index="books", q="red fox")', "policy"),
    ("elasticsearch-py", 'es.search(index="books", query={"match": {"title": "red fox"}})', "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"match": {"title": {"query": "red fox", "operator": "and"}}})',
     "policy"),
    ("elasticsearch-py", 'es.search(index="books", query={"match_phrase": {"title": "red fox"}})', "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"multi_match": {"query": "red fox", "fields": ["title", "body"]}})',
     "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"query_string": {"query": "title:(red AND fox)", "default_field": "body"}})',
     "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"simple_query_string": {"query": "red + fox", "fields": ["title"]}})',
     "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"bool": {'
     '"must": [{"match": {"title": "red"}}], '
     '"should": [{"match": {"body": "fox"}}], '
     '"filter": [{"term": {"lang": "en"}}], '
     '"must_not": [{"match": {"title": "dog"}}]}})',
     "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"function_score": {"query": {"match": {"title": "red fox"}}, '
     '"field_value_factor": {"field": "year", "missing": 1}}})',
     "policy"),
    ("elasticsearch-py",
     'es.search(index="books", query={"constant_score": {"filter": {"term": {"title": "fox"}}}})',
     "policy"),
    ("elasticsearch-py", 'es.search(index="books", query={"terms": {"title": ["red", "fox"]}})', "policy"),
    ("elasticsearch-py", 'es.search(query={"match": {"title": "red fox"}})', "policy"),
    ("elasticsearch-py", 'es.count(index="books", query={"match": {"title": "red fox"}})', "policy"),
    ("elasticsearch-py",
     'es.msearch(searches=[{"index": "books"}, {"query": {"match": {"title": "red"}}}, '
     '{"index": "books"}, {"query": {"match": {"title": "fox"}}}])',
     "policy"),
    ("elasticsearch-py",
     'es.msearch(index="books", searches=[{}, {"query": {"match": {"title": "red fox"}}}])',
     "policy"),
    ("elasticsearch-py", 'es_gz.search(index="books", query={"match": {"title": "red fox"}})', "policy"),
    ("elasticsearch-py", 'es_gz.search(index="books", q="red fox")', "policy"),
    ("elasticsearch-py",
     'es_gz.msearch(searches=[{"index": "books"}, {"query": {"match": {"title": "red fox"}}}])',
     "policy"),
    # not searches: forwarded blind
    ("elasticsearch-py", "es.cluster.health()", "fallback"),
    ("elasticsearch-py",
     'es.search_template(index="books", id="books-by-title", params={"title": "red fox"})',
     "fallback"),
    # -- opensearch-py -----------------------------------------------------------------------
    ("opensearch-py", 'osc.search(index="books", q="red fox")', "policy"),
    ("opensearch-py", 'osc.search(index="books", body={"query": {"match": {"title": "red fox"}}})', "policy"),
    ("opensearch-py",
     'osc.msearch(body=[{"index": "books"}, {"query": {"match": {"title": "red"}}}, '
     '{"index": "books"}, {"query": {"match": {"title": "fox"}}}])',
     "policy"),
    ("opensearch-py", 'osc.count(index="books", body={"query": {"match": {"title": "red fox"}}})', "policy"),
    ("opensearch-py", 'osc_gz.search(index="books", body={"query": {"match": {"title": "red fox"}}})', "policy"),
    # -- pysolr ------------------------------------------------------------------------------
    ("pysolr", 'solr.search("red fox")', "policy"),
    ("pysolr", 'solr.search("title:fox", **{"defType": "edismax", "qf": "title body"})', "policy"),
    ("pysolr", 'solr.search("red fox", fq="year:[2000 TO *]")', "policy"),
    # pysolr POSTs a form once the url-encoded parameters reach 1024 bytes
    ("pysolr", 'solr.search(" ".join(["red fox"] * 150))', "policy"),
    # -- requests: the Solr JSON Request API, and q.alt -----------------------------------
    ("requests",
     'requests.post(LB + "/solr/books/query", json={"query": "red fox", "params": {"defType": "edismax"}})',
     "policy"),
    ("requests",
     'requests.post(LB + "/solr/books/query", json={"query": {"edismax": {"query": "red fox", "qf": "title"}}})',
     "policy"),
    ("requests",
     'requests.get(LB + "/solr/books/select", params={"q.alt": "title:fox", "defType": "dismax"})',
     "policy"),
]


def scrape(admin):
    """ballot_requests_total by reason and ballot_client_errors_total by kind, as counts."""
    with urllib.request.urlopen(admin.rstrip("/") + "/metrics", timeout=10) as r:
        text = r.read().decode("utf-8")
    reasons, kinds = {}, {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if s.name == REQUESTS:
                key = s.labels.get("reason", "")
                reasons[key] = reasons.get(key, 0) + s.value
            elif s.name == CLIENT_ERRORS:
                key = s.labels.get("kind", "")
                kinds[key] = kinds.get(key, 0) + s.value
    return reasons, kinds


def delta(before, after):
    d = {k: after.get(k, 0) - before.get(k, 0) for k in set(before) | set(after)}
    return {k: int(v) for k, v in sorted(d.items()) if v}


def settle(admin, before, timeout=3.0):
    """Scrapes until at least one answer was counted (the balancer may count it just after
    the answer is relayed), then once more after a short pause, to catch any extra one."""
    deadline = time.monotonic() + timeout
    while True:
        after = scrape(admin)
        if sum(delta(before[0], after[0]).values()) >= 1 or time.monotonic() >= deadline:
            break
        time.sleep(0.02)
    time.sleep(0.1)
    return scrape(admin)


def header_reason(result):
    """(exposed, x-ballot-reason) of the answer, where the client exposes its headers."""
    meta = getattr(result, "meta", None)
    if meta is not None and hasattr(meta, "headers"):
        return True, meta.headers.get("x-ballot-reason")
    if isinstance(result, requests.Response):
        return True, result.headers.get("x-ballot-reason")
    return False, None


def check_result(result):
    """Raises if the answer is not a well-formed success (requests does not raise itself)."""
    if isinstance(result, requests.Response):
        result.raise_for_status()
        body = result.json()
        if body.get("response", {}).get("numFound") is None:
            raise ValueError("no response.numFound in the answer: %r" % (body,))


def run_case(client, call, expect, ns, args):
    out = {"client": client, "call": call, "route": "", "expect": expect,
           "reason": None, "ok": False, "why": ""}
    problems = []
    try:
        before = None if args.no_metrics else scrape(args.admin)
    except Exception as e:
        out["why"] = "scraping /metrics before the call: %s: %s" % (type(e).__name__, e)
        return out
    result, raised = None, None
    try:
        result = eval(call, ns)  # noqa: S307 -- the call text is the case
        check_result(result)
    except Exception as e:
        raised = e
        problems.append("%s: %s" % (type(e).__name__, e))
        if args.verbose:
            traceback.print_exc(file=sys.stderr)
    exposed, hreason = header_reason(result) if raised is None else (False, None)

    if args.no_metrics:
        out["reason"] = hreason
    else:
        try:
            after = settle(args.admin, before)
        except Exception as e:
            problems.append("scraping /metrics after the call: %s: %s" % (type(e).__name__, e))
            after = None
        if after is not None:
            counted = delta(before[0], after[0])
            errors = delta(before[1], after[1])
            out["counted"], out["client_errors"] = counted, errors
            total = sum(counted.values())
            if total == 1:
                out["reason"] = next(iter(counted))
            if expect == "policy":
                if total != 1:
                    problems.append("expected exactly 1 answer counted, got %d %s" % (total, counted))
                elif out["reason"] not in POLICY_REASONS:
                    problems.append("routed as %r, not by the policy" % out["reason"])
                if errors:
                    problems.append("ballot_client_errors_total grew: %s" % errors)
            else:
                if total != 1 or out["reason"] != "fallback":
                    problems.append("expected exactly 1 answer counted as fallback, got %s" % counted)
            if exposed and not args.no_headers:
                if hreason is None:
                    problems.append("the answer has no x-ballot-reason header")
                elif hreason != out["reason"]:
                    problems.append("x-ballot-reason %r but the metrics say %r" % (hreason, out["reason"]))
    out["ok"] = not problems
    out["why"] = "; ".join(problems)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lb", required=True, help="base URL of the balancer (or of a stand-in)")
    ap.add_argument("--admin", help="base URL of the balancer's admin listener (/metrics)")
    ap.add_argument("--no-metrics", action="store_true",
                    help="skip the metrics check: only require every call to succeed")
    ap.add_argument("--no-headers", action="store_true",
                    help="do not require x-ballot-reason on the answers that expose headers")
    ap.add_argument("--only", default="", help="run only the cases whose call contains this text")
    ap.add_argument("--engine", choices=["es", "solr"],
                    help="run only the Elasticsearch/OpenSearch cases, or only the Solr ones")
    ap.add_argument("--timeout", type=float, default=10.0, help="per-request timeout, seconds")
    ap.add_argument("--verbose", action="store_true", help="tracebacks on stderr")
    args = ap.parse_args()
    if not args.no_metrics and not args.admin:
        ap.error("--admin is required unless --no-metrics")

    lb = args.lb.rstrip("/")
    # No client-side retries: one call must be one request, so the counts are exact.
    common = dict(request_timeout=args.timeout, max_retries=0, retry_on_timeout=False)
    os_common = dict(timeout=args.timeout, max_retries=0, retry_on_timeout=False)
    ns = {
        "LB": lb,
        "requests": requests,
        "es": Elasticsearch(lb, **common),
        "es_gz": Elasticsearch(lb, http_compress=True, **common),
        "osc": OpenSearch(hosts=[lb], **os_common),
        "osc_gz": OpenSearch(hosts=[lb], http_compress=True, **os_common),
        "solr": pysolr.Solr(lb + "/solr/books", timeout=args.timeout),
    }

    failed = 0
    for client, call, expect in CASES:
        if args.only and args.only not in call:
            continue
        solr_case = client == "pysolr" or "/solr/" in call
        if args.engine and (args.engine == "solr") != solr_case:
            continue
        out = run_case(client, call, expect, ns, args)
        failed += not out["ok"]
        print(json.dumps(out), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
