"""A small app that sends real Sentry traffic with the pinned sentry-sdk.

    python sdk_app.py --dsn DSN [--out FILE]

It raises and captures errors (stack traces with local variables, one with
an attachment, one dropped by before_send so that the SDK owes a client
report), runs transactions with nested child spans, records release health
sessions in application and request mode, sends a cron check-in
(in_progress, then ok), structured logs and trace metrics, then flushes and
exits. It prints, or writes to FILE, a JSON report of what the SDK's
transport put on the wire: envelopes, items by type, records by type (an
item's item_count, else 1), each envelope's item types and the HTTP status
of each answer. Exit status: 0 every envelope was answered 2xx, 1 one was
not (the report is written all the same), 2 bad usage.

The numbers are fixed by construction: sampling is 1.0, default
integrations (which add traffic of their own) are off, and everything is
flushed once at the end, well within the SDK's batching and client-report
intervals.
"""

import argparse
import json
import sys
import threading

import sentry_sdk
import sentry_sdk.crons
import sentry_sdk.logger
import sentry_sdk.metrics
from sentry_sdk.transport import HttpTransport

REQUEST_SESSIONS = 3  # aggregated by the SDK into one `sessions` item


class Recorder:
    """What the transport sent, filled in from the transport's worker thread."""

    def __init__(self):
        self.lock = threading.Lock()
        self.envelopes = []  # [{"items": [[type, item_count]], "status": int|None}]

    def sent(self, envelope):
        entry = {"items": [[item.type, item.headers.get("item_count")] for item in envelope.items], "status": None}
        with self.lock:
            self.envelopes.append(entry)
        return entry

    def report(self, sdk):
        items, records, statuses = {}, {}, {}
        with self.lock:
            envelopes = [dict(e) for e in self.envelopes]
        for env in envelopes:
            for ty, count in env["items"]:
                items[ty] = items.get(ty, 0) + 1
                records[ty] = records.get(ty, 0) + (count if isinstance(count, int) and count > 0 else 1)
            key = str(env["status"])
            statuses[key] = statuses.get(key, 0) + 1
        return {
            "sdk": sdk,
            "envelopes": len(envelopes),
            "items": items,
            "records": records,
            "statuses": statuses,
            "per_envelope": [[ty for ty, _ in e["items"]] for e in envelopes],
        }


def counting_transport(recorder):
    """An HttpTransport that records each envelope as it goes on the wire."""

    class CountingTransport(HttpTransport):
        # _send_request gets the envelope after rate limits and client
        # reports were applied: exactly what the request body holds.
        def _send_request(self, body, headers, endpoint_type, envelope=None):
            self._entry = recorder.sent(envelope) if envelope is not None else None
            try:
                return super()._send_request(body, headers, endpoint_type, envelope)
            finally:
                self._entry = None

        def _handle_response(self, response, envelope):
            if getattr(self, "_entry", None) is not None:
                self._entry["status"] = response.status
            return super()._handle_response(response, envelope)

    return CountingTransport


def before_send(event, hint):
    if event.get("tags", {}).get("drop") == "yes":
        return None
    return event


# Errors raised through a few frames, each with locals worth sending.


def check_quantity(sku, quantity):
    limit = 10
    if quantity > limit:
        raise ValueError(f"quantity {quantity} over limit {limit} for {sku}")
    return quantity


def parse_order(order):
    lines = order["lines"]
    total = 0
    for line in lines:
        total += check_quantity(line["sku"], line["qty"])
    return total


def lookup_user(users, user_id):
    cache_hit = False
    return users[user_id], cache_hit


def load_profile(user_id):
    users = {"u1": {"name": "Ada"}, "u2": {"name": "Grace"}}
    user, _ = lookup_user(users, user_id)
    return user


def ratio(done, total):
    return done / total


def progress(job):
    done, total = job["done"], job["total"]
    return round(100 * ratio(done, total), 1)


def capture(fn, *args):
    try:
        fn(*args)
    except Exception:
        sentry_sdk.capture_exception()
    else:
        raise AssertionError(f"{fn.__name__} did not raise")


def send_errors():
    with sentry_sdk.new_scope() as scope:
        scope.set_tag("component", "orders")
        scope.add_attachment(bytes=b'{"order": 17, "lines": 2}', filename="order.json", content_type="application/json")
        capture(parse_order, {"id": 17, "lines": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 40}]})
    with sentry_sdk.new_scope() as scope:
        scope.set_user({"id": "u9"})
        capture(load_profile, "u9")
    capture(progress, {"name": "reindex", "done": 3, "total": 0})
    with sentry_sdk.new_scope() as scope:
        scope.set_tag("drop", "yes")
        capture(progress, {"name": "dropped", "done": 1, "total": 0})


def send_transactions():
    with sentry_sdk.start_transaction(name="POST /checkout", op="http.server") as tx:
        tx.set_tag("route", "checkout")
        with sentry_sdk.start_span(op="db", name="SELECT * FROM carts WHERE id = %s") as span:
            span.set_data("db.system", "postgresql")
        with sentry_sdk.start_span(op="function", name="price_cart"):
            with sentry_sdk.start_span(op="db", name="SELECT price FROM products WHERE sku = ANY(%s)") as span:
                span.set_data("db.system", "postgresql")
            with sentry_sdk.start_span(op="cache.get", name="prices:A-1"):
                pass
        with sentry_sdk.start_span(op="http.client", name="POST https://payments.example/charge") as span:
            span.set_data("http.request.method", "POST")
            span.set_data("url", "https://payments.example/charge")
            span.set_http_status(201)
    with sentry_sdk.start_transaction(name="nightly-report", op="task"):
        with sentry_sdk.start_span(op="db", name="SELECT count(*) FROM orders"):
            pass
        with sentry_sdk.start_span(op="http.client", name="GET https://storage.example/report") as span:
            span.set_data("http.request.method", "GET")
            span.set_http_status(200)


def send_sessions():
    scope = sentry_sdk.get_isolation_scope()
    # One application session with an error in it (errored), one clean (exited).
    scope.start_session(session_mode="application")
    capture(ratio, 1, 0)
    scope.end_session()
    scope.start_session(session_mode="application")
    scope.end_session()
    for _ in range(REQUEST_SESSIONS):
        scope.start_session(session_mode="request")
        scope.end_session()


def send_checkin():
    slug = "nightly-report"
    check_in_id = sentry_sdk.crons.capture_checkin(monitor_slug=slug, status="in_progress")
    sentry_sdk.crons.capture_checkin(monitor_slug=slug, check_in_id=check_in_id, status="ok", duration=0.25)


def send_logs_and_metrics():
    # Emitted back to back right before the flush, so each batcher sends one item.
    sentry_sdk.logger.info("order {order_id} placed", order_id=17)
    sentry_sdk.logger.info("cart {cart_id} priced in {ms} ms", cart_id="c-3", ms=12)
    sentry_sdk.logger.warning("payment retry {attempt}", attempt=2)
    sentry_sdk.logger.error("user {user_id} not found", user_id="u9")
    sentry_sdk.logger.debug("cache miss for {key}", key="prices:A-1")
    sentry_sdk.metrics.count("orders.placed", 1, attributes={"region": "eu"})
    sentry_sdk.metrics.gauge("queue.depth", 7)
    sentry_sdk.metrics.distribution("checkout.duration", 184.5, unit="millisecond")


def main(argv=None):
    ap = argparse.ArgumentParser(description="Send real Sentry traffic with sentry-sdk and report what was sent.")
    ap.add_argument("--dsn", required=True, help="the DSN to send to")
    ap.add_argument("--out", help="write the JSON report to this file instead of stdout")
    args = ap.parse_args(argv)

    recorder = Recorder()
    sentry_sdk.init(
        dsn=args.dsn,
        transport=counting_transport(recorder),
        release="sdk-app@1.0.0",
        environment="interop",
        server_name="sdk-app",
        sample_rate=1.0,
        traces_sample_rate=1.0,
        include_local_variables=True,
        send_default_pii=False,
        enable_logs=True,
        enable_metrics=True,
        send_client_reports=True,
        default_integrations=False,
        auto_enabling_integrations=False,
        before_send=before_send,
    )
    try:
        send_errors()
        send_transactions()
        send_sessions()
        send_checkin()
        send_logs_and_metrics()
        sentry_sdk.flush(timeout=10)
    finally:
        sentry_sdk.get_client().close(timeout=10)

    report = recorder.report(f"sentry.python/{sentry_sdk.VERSION}")
    text = json.dumps(report, indent=2, sort_keys=True)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    else:
        print(text)
    ok = report["envelopes"] > 0 and all(s.startswith("2") for s in report["statuses"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
