#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (fuzz/corpus/<target>/seed-*) from the demo bundle, the
documentation's examples and hand-made requests. Run again after the API table changes; the
fuzzers add their own finds beside the seeds (`scripts/fuzz.sh` keeps them minimised)."""
import json
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEMO = os.path.join(ROOT, "data", "demo")
CORPUS = os.path.join(ROOT, "fuzz", "corpus")
API = open(os.path.join(ROOT, "src", "api.rs"), encoding="utf-8").read()

# The loader targets' selector: the table's whole-file and streamed endpoints, in table order,
# then bundle.toml and one payment's detail file (src/fuzzing.rs, `loadable`).
entries = re.findall(r'Endpoint \{\s*key: "([^"]+)",\s*path: "([^"]+)",\s*methods: &\[([^\]]*)\],\s*feed: Feed::(\w+)', API)
loadable = [k for k, _, _, feed in entries if feed in ("File", "Stream")] + ["bundle", "payment_details/PG2026000104"]


def put(target, name, data):
    folder = os.path.join(CORPUS, target)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, f"seed-{name}"), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def demo_file(name):
    for ext in ("json", "toml"):
        path = os.path.join(DEMO, f"{name}.{ext}")
        if os.path.exists(path):
            return ext, open(path, "rb").read()
    return None, None


for i, name in enumerate(loadable):
    ext, data = demo_file(name)
    if data is None:
        continue
    safe = name.replace("/", "-")
    if ext == "json":
        put("load_json", safe, bytes([i]) + data)
        put("upstream", safe, data)
    else:
        put("load_toml", safe, bytes([i]) + data)

# TOML twins of a few JSON files, so the TOML target starts from every shape.
def to_toml(value, prefix=""):
    lines, tables = [], []
    for k, v in value.items():
        key = json.dumps(k) if not re.fullmatch(r"[A-Za-z0-9_-]+", k) else k
        if isinstance(v, dict):
            tables.append((key, v))
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            tables.append((key, v))
        else:
            lines.append(f"{key} = {json.dumps(v, ensure_ascii=False) if not isinstance(v, bool) else str(v).lower()}")
    out = "\n".join(lines) + "\n"
    for key, v in tables:
        name = f"{prefix}{key}"
        if isinstance(v, dict):
            out += f"\n[{name}]\n" + to_toml(v, name + ".")
        else:
            for item in v:
                out += f"\n[[{name}]]\n" + to_toml(item, name + ".")
    return out


for i, name in enumerate(loadable[:-2]):
    ext, data = demo_file(name)
    if ext != "json":
        continue
    value = json.loads(data)
    if isinstance(value, dict) and all(x is not None for x in value.values()):
        try:
            put("load_toml", name, bytes([i]) + to_toml(value).encode())
        except (TypeError, ValueError):
            pass

TOKEN = "demo-token"
for key, path, methods, feed in entries:
    concrete = path.replace("{id}", "1")
    for method in re.findall(r'\("([A-Z]+)"', methods):
        body = ""
        if method == "POST":
            body = "{}"
        req = (f"{method} {concrete}?page=1&per_page=2&reference=PG2026000104 HTTP/1.1\r\nHost: x\r\n"
               f"Authorization-Token: {TOKEN}\r\nAuthorization-App: demo-app\r\nAccept-Encoding: gzip, br\r\n"
               f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n{body}")
        put("request", f"{key}-{method.lower()}", req)
put("request", "pipelined", "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nAuthorization-Token: demo-token\r\n\r\n"
    "GET /api/v1/event HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"0\"\r\nAuthorization-Token: demo-token\r\n\r\n")
put("request", "chunked", "POST /api/v1/checkin/attendees HTTP/1.1\r\nHost: x\r\nAuthorization-Token: demo-token\r\n"
    "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n[]\r\n0\r\n\r\n")
put("request", "options", "OPTIONS /api/v1/event HTTP/1.1\r\nHost: x\r\nOrigin: http://a\r\n"
    "Access-Control-Request-Method: GET\r\n\r\n")
put("request", "operations", "GET /status HTTP/1.1\r\nHost: x\r\n\r\nGET /_journal?method=GET HTTP/1.1\r\nHost: x\r\n\r\n"
    "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\nGET /openapi.json HTTP/1.1\r\nHost: x\r\n\r\n")
put("request", "http2", b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x00\x04\x00\x00\x00\x00\x00")

writes = [k for k, _, _, feed in entries if feed == "Write"]
bodies = {
    "attendee_create": ['{"name": "Ana Souza", "email": "ana.souza@example.org", "registration_confirmed": true, '
                        '"registration": {"id_ticket_price": 30417, "price": 0}}',
                        '{"attendee": {"name": "Bia", "email": "bia@example.org"}}'],
    "checkin_attendees": [open(os.path.join(ROOT, "tests", "fixtures", "apidocs", "models-checkin-attendees.json")).read(),
                          '{"attendees": [{"checkin_code": "11", "checkin": 0, "checkin_date": "2020-01-01T09:30:00"}]}'],
    "checkin_sessions": [open(os.path.join(ROOT, "tests", "fixtures", "apidocs", "models-checkin-sessions.json")).read()],
}
for i, key in enumerate(writes):
    for n, body in enumerate(bodies.get(key, ["{}"])):
        put("write", f"{key}-{n}", bytes([i]) + body.encode())
    put("write", f"{key}-form", bytes([i | 0x80]) + b"name=Ana&email=ana%40x.org&checkin_code=11&checkin=1")
