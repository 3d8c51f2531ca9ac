"""envelope/ against sentry_sdk's Envelope, in the SDK → Go direction.

sentry_sdk serializes envelopes of every kind the pool sends (and a few it
does not: binary attachments, client reports, unknown item types, an empty
envelope); Go's envelope.Parse and envelope.Scan (via interop-helper
parse-envelope) must see the same item types, headers and payload bytes.
The Go → SDK direction is in test_pool.py (every pool envelope deserializes).
"""

import base64
import json
import os
import uuid

import pytest
from sentry_sdk.envelope import Envelope, Item, PayloadRef


def sdk_envelopes():
    eid = uuid.uuid4().hex
    now = 1767225600.125
    event = {
        "event_id": eid,
        "timestamp": now,
        "platform": "python",
        "level": "error",
        "message": "line one\nline two \u00fc\u2603 \"quoted\"",
        "exception": {"values": [{"type": "ValueError", "value": "bad\r\nvalue"}]},
    }
    transaction = {
        "event_id": uuid.uuid4().hex,
        "type": "transaction",
        "transaction": "/api/orders/{id}",
        "start_timestamp": now - 0.5,
        "timestamp": now,
        "contexts": {"trace": {"trace_id": uuid.uuid4().hex, "span_id": uuid.uuid4().hex[:16]}},
        "spans": [],
    }
    logs = {
        "items": [
            {"timestamp": now, "trace_id": uuid.uuid4().hex, "level": "info", "body": f"log {i}",
             "attributes": {"n": {"value": i, "type": "integer"}}}
            for i in range(3)
        ]
    }

    e1 = Envelope(headers={"event_id": eid, "sent_at": "2026-01-01T00:00:00Z",
                           "sdk": {"name": "sentry.python", "version": "2.75.0"}})
    e1.add_event(event)
    e1.add_item(Item(payload=bytes(range(256)) * 4 + b"\n\n\r\n", type="attachment",
                     filename="blob.bin", content_type="application/octet-stream"))
    e1.add_item(Item(payload=PayloadRef(json={"timestamp": now, "discarded_events": [
        {"reason": "queue_overflow", "category": "error", "quantity": 2}]}), type="client_report"))

    e2 = Envelope(headers={"event_id": transaction["event_id"],
                           "trace": {"trace_id": transaction["contexts"]["trace"]["trace_id"],
                                     "public_key": "31a5a894b4524f74a9a8d0e27e21ba91"}})
    e2.add_transaction(transaction)

    e3 = Envelope(headers={})
    e3.add_session({"sid": uuid.uuid4().hex, "init": True, "started": "2026-01-01T00:00:00Z",
                    "status": "ok", "attrs": {"release": "app@1.0.0"}})
    e3.add_sessions({"aggregates": [{"started": "2026-01-01T00:00:00Z", "exited": 3}],
                     "attrs": {"release": "app@1.0.0"}})

    e4 = Envelope()
    e4.add_checkin({"check_in_id": uuid.uuid4().hex, "monitor_slug": "nightly", "status": "in_progress"})

    e5 = Envelope()
    e5.add_item(Item(payload=PayloadRef(json=logs), type="log",
                     content_type="application/vnd.sentry.items.log+json",
                     headers={"item_count": len(logs["items"])}))

    e6 = Envelope(headers={"sent_at": "2026-01-01T00:00:00Z"})
    e6.add_item(Item(payload=b"", type="something_new"))

    e7 = Envelope(headers={"event_id": uuid.uuid4().hex})
    return {"event+attachment+client_report": e1, "transaction": e2, "sessions": e3,
            "check_in": e4, "logs": e5, "unknown+empty_payload": e6, "header_only": e7}


@pytest.fixture(scope="module")
def serialized(tmp_path_factory):
    d = tmp_path_factory.mktemp("sdk-envelopes")
    out = {}
    for name, env in sdk_envelopes().items():
        path = os.path.join(d, name + ".envelope")
        with open(path, "wb") as f:
            f.write(env.serialize())
        out[name] = (env, path)
    return out


def test_sdk_envelopes_parse_in_go(helper, serialized):
    paths = [p for _, p in serialized.values()]
    parsed = json.loads(helper("parse-envelope", *paths).stdout)
    for name, (env, path) in serialized.items():
        go = parsed[path]
        items, scan_types = go["items"] or [], go["scan_types"] or []
        assert go["header"] == env.headers, name
        assert len(items) == len(env.items) == len(scan_types), name
        for sdk_item, gi, scan_type in zip(env.items, items, scan_types):
            want = sdk_item.get_bytes()
            assert base64.b64decode(gi["payload"]) == want, (name, gi["type"])
            assert gi["type"] == sdk_item.type == scan_type, name
            headers = dict(sdk_item.headers)
            headers["length"] = len(want)
            assert gi["header"] == headers, name
            assert gi["content_type"] == headers.get("content_type", ""), name
            assert gi["item_count"] == headers.get("item_count", 0), name


def test_go_rejects_what_relay_rejects(helper, tmp_path):
    """The SDK's bytes with one framing rule broken must not parse in Go."""
    env = sdk_envelopes()["check_in"].serialize()
    header, item_header, payload, _ = env.split(b"\n")
    cases = {
        "crlf": env.replace(b"\n", b"\r\n", 1),
        "second_trailing_lf": env + b"\n",
        "short_length": header + b"\n" + item_header.replace(
            b'"length":', b'"length":1', 1) + b"\n" + payload + b"\n",
        "no_type": header + b"\n" + json.dumps({"length": len(payload)}).encode() + b"\n" + payload + b"\n",
        "header_not_object": b"[]\n" + item_header + b"\n" + payload + b"\n",
    }
    for name, body in cases.items():
        path = tmp_path / (name + ".envelope")
        path.write_bytes(body)
        proc = helper("parse-envelope", path, ok=False)
        assert proc.returncode == 1, (name, proc.stdout, proc.stderr)
        assert proc.stdout.startswith("malformed:"), (name, proc.stdout)
