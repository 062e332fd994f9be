"""HTTP helpers of the viewer tests: a request to a running `videoseek view` server, JSON in and out."""

from __future__ import annotations

import http.client
import json


def request(server, path: str, method: str = "GET", body: dict | None = None, headers: dict | None = None):
    """(status, content type, body bytes); the path is sent exactly as given."""
    host, port = server.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    data = None if body is None else json.dumps(body).encode()
    hdrs = {"Content-Type": "application/json", **(headers or {})}
    conn.request(method, path, body=data, headers=hdrs)
    resp = conn.getresponse()
    out = resp.status, resp.getheader("Content-Type", ""), resp.read()
    conn.close()
    return out


def get_json(server, path: str, status: int = 200) -> dict:
    code, ctype, body = request(server, path)
    assert code == status, body
    assert ctype.startswith("application/json")
    return json.loads(body)


def post_json(server, path: str, body: dict, status: int = 200) -> dict:
    code, _, data = request(server, path, "POST", body, {"X-VideoSeek": "1"})
    assert code == status, data
    return json.loads(data)
