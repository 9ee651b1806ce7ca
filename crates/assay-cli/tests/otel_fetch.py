"""Every span a real OpenTelemetry receiver stored, read back through the receiver's own API.

    otel_fetch.py mlflow URL [EXPERIMENT_ID ...]   (MLflow's client; default experiment "0")
    otel_fetch.py phoenix URL                      (Phoenix's REST API, every project)

Prints one JSON array of spans, each normalised to
    {"trace_id": 32 hex, "span_id": 16 hex, "parent_span_id": 16 hex or null, "name",
     "status": "OK" | "ERROR" | "UNSET", "project", "attributes": {...},
     "events": [{"name", "attributes": {...}}]}
Used by crates/assay-cli/tests/it/otel_backends.rs.

What each backend does to a span (found by experiment, MLflow 3.17.2, Phoenix 20.26.1):
- MLflow stores every span attribute value JSON-encoded (12 -> "12", "chat" -> "\"chat\""); they
  are decoded here. A string attribute whose text is itself JSON (a list, an object or a string)
  loses that layer too: '[{"id":"a"}]' comes back as the list. Event attributes are kept as sent.
  It adds attributes of its own (mlflow.traceRequestId, mlflow.spanType, mlflow.chat.tokenUsage,
  mlflow.llm.model). Ids come back base64 from Span.to_dict(); converted to hex here.
- Phoenix keeps attribute values as sent (strings, ints, doubles, bools), keeps attributes that
  are not OpenInference ones, and adds OpenInference ones of its own (llm.model_name,
  llm.token_count.prompt, retrieval.documents.N.document.id/score, ...). Its /spans endpoint
  keeps events; its /spans/otlpv1 endpoint drops them (events: null), so it is not used.
"""

import base64
import json
import sys
import urllib.parse
import urllib.request

STATUS = {
    "STATUS_CODE_OK": "OK",
    "STATUS_CODE_ERROR": "ERROR",
    "STATUS_CODE_UNSET": "UNSET",
    "OK": "OK",
    "ERROR": "ERROR",
    "UNSET": "UNSET",
}


def b64_hex(value):
    return base64.b64decode(value).hex() if value else None


def decoded(value):
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def mlflow(url, experiments):
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=url)
    out = []
    for experiment in experiments:
        token = None
        while True:
            page = client.search_traces(
                locations=[experiment], max_results=100, page_token=token, include_spans=True
            )
            for trace in page:
                for span in trace.data.spans:
                    d = span.to_dict()
                    out.append({
                        "trace_id": b64_hex(d["trace_id"]),
                        "span_id": b64_hex(d["span_id"]),
                        "parent_span_id": b64_hex(d.get("parent_span_id")),
                        "name": d["name"],
                        "status": STATUS.get((d.get("status") or {}).get("code"), "UNSET"),
                        "project": experiment,
                        "attributes": {k: decoded(v) for k, v in (d.get("attributes") or {}).items()},
                        "events": [
                            {"name": e["name"], "attributes": e.get("attributes") or {}}
                            for e in d.get("events") or []
                        ],
                    })
            token = page.token
            if not token:
                break
    return out


def get(url):
    with urllib.request.urlopen(url, timeout=60) as r:
        return json.load(r)


def pages(url):
    cursor = None
    while True:
        sep = "&" if "?" in url else "?"
        body = get(url + (sep + "cursor=" + urllib.parse.quote(cursor) if cursor else ""))
        yield from body["data"]
        cursor = body.get("next_cursor")
        if not cursor:
            return


def phoenix(url):
    out = []
    for project in pages(url + "/v1/projects"):
        name = project["name"]
        spans_url = f"{url}/v1/projects/{urllib.parse.quote(name, safe='')}/spans?limit=1000"
        for s in pages(spans_url):
            out.append({
                "trace_id": s["context"]["trace_id"],
                "span_id": s["context"]["span_id"],
                "parent_span_id": s.get("parent_id") or None,
                "name": s["name"],
                "status": STATUS.get(s.get("status_code"), "UNSET"),
                "project": name,
                "attributes": s.get("attributes") or {},
                "events": [
                    {"name": e["name"], "attributes": e.get("attributes") or {}}
                    for e in s.get("events") or []
                ],
            })
    return out


def main():
    kind, url = sys.argv[1], sys.argv[2].rstrip("/")
    if kind == "mlflow":
        spans = mlflow(url, sys.argv[3:] or ["0"])
    elif kind == "phoenix":
        spans = phoenix(url)
    else:
        sys.exit(f"unknown backend {kind!r}")
    spans.sort(key=lambda s: (s["trace_id"], s["span_id"]))
    json.dump(spans, sys.stdout)


if __name__ == "__main__":
    main()
