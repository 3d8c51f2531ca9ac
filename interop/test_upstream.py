"""fake-upstream (a real process) against Sentry's own code: a client that
plays Relay with sentry_relay keys registers, pulls configs and forwards a
signed zstd envelope; every served config passes sentry_relay's own
normalization with nothing dropped; sentry-sdk sends straight to
fake-upstream and /stats counts every item exactly."""

import gzip
import json
import struct
import time
import uuid

import procs
import pytest
import sentry_relay
import sentry_sdk
import sentry_sdk.crons
import sentry_sdk.logger
from sentry_relay import generate_key_pair
from sentry_sdk.envelope import Envelope, Item, PayloadRef
from sentry_sdk.transport import HttpTransport

RELAY_VERSION = "26.6.0"
PROJECTS, SEED = 12, 5


@pytest.fixture(scope="module")
def binary(fake_upstream_bin):
    return fake_upstream_bin


def Upstream(binary, *args):
    return procs.Upstream(binary, *args, projects=PROJECTS, seed=SEED)


@pytest.fixture
def upstream(binary):
    u = Upstream(binary)
    yield u
    u.stop()


class FakeRelay:
    """Signs requests the way Relay does, with sentry_relay's keys."""

    def __init__(self, up):
        self.up = up
        self.sk, self.pk = generate_key_pair()
        self.id = str(uuid.uuid4())

    def post_signed(self, path, body, sign_with=None, signature=None, relay_id=None):
        raw = json.dumps(body, separators=(",", ":")).encode()
        headers = {"Content-Type": "application/json", "X-Sentry-Relay-Id": relay_id or self.id}
        sig = signature if signature is not None else (sign_with or self.sk).sign(raw)
        if sig:
            headers["X-Sentry-Relay-Signature"] = sig
        return self.up.request("POST", path, raw, headers)

    def register(self):
        status, _, body = self.post_signed(
            "/api/0/relays/register/challenge/", {"relay_id": self.id, "public_key": str(self.pk), "version": RELAY_VERSION}
        )
        assert status == 200, body
        challenge = json.loads(body)
        assert challenge["relay_id"] == self.id and challenge["token"]
        status, _, body = self.post_signed(
            "/api/0/relays/register/response/", {"relay_id": self.id, "token": challenge["token"], "version": RELAY_VERSION}
        )
        assert status == 200, body
        assert json.loads(body) == {"relay_id": self.id}

    def configs(self, body):
        status, _, raw = self.post_signed("/api/0/relays/projectconfigs/?version=3", body)
        assert status == 200, raw
        return json.loads(raw)


def zstd_raw_frame(data: bytes) -> bytes:
    """A valid zstd frame made of raw (stored) blocks: the venv has no zstd
    library, and the format needs none for stored blocks (RFC 8878 §3.1.1)."""
    out = bytearray(struct.pack("<I", 0xFD2FB528))
    out.append(0b1010_0000)  # FCS field 4 bytes, single segment, no checksum, no dictionary
    out += struct.pack("<I", len(data))
    chunks = [data[i : i + (128 << 10)] for i in range(0, len(data), 128 << 10)] or [b""]
    for i, chunk in enumerate(chunks):
        last = 1 if i == len(chunks) - 1 else 0
        header = last | (0 << 1) | (len(chunk) << 3)  # block type 0 = raw
        out += header.to_bytes(3, "little") + chunk
    return bytes(out)


def envelope_bytes(project, items):
    env = Envelope(headers={"dsn": f"http://{project['public_key']}@127.0.0.1:3000/{project['id']}", "sent_at": "2026-01-01T00:00:00Z"})
    for ty, payload in items:
        env.add_item(Item(payload=PayloadRef(json=payload), type=ty))
    return env.serialize()


def test_relay_registers_fetches_configs_and_forwards(upstream):
    relay = FakeRelay(upstream)
    relay.register()
    projects = upstream.get_json("/projects")
    assert len(projects) == PROJECTS

    glob = relay.configs({"global": True, "publicKeys": []})
    assert glob["globalStatus"] == "ready" and "measurements" in glob["global"]

    keys = [p["public_key"] for p in projects[:3]] + ["f" * 32]
    answer = relay.configs({"publicKeys": keys, "revisions": [None] * 4, "fullConfig": False, "noCache": False})
    assert set(answer["configs"]) == set(keys[:3])  # the unknown key is omitted
    state = answer["configs"][keys[0]]
    assert state["projectId"] == projects[0]["id"] and state["publicKeys"][0]["publicKey"] == keys[0]
    # The current revision is answered as unchanged.
    again = relay.configs({"publicKeys": [keys[0]], "revisions": [state["rev"]]})
    assert again["unchanged"] == [keys[0]] and again["configs"] == {}

    # Forward a zstd envelope the way Relay does: signature over empty data.
    p = projects[1]
    raw = envelope_bytes(p, [("event", {"message": "from interop"}), ("session", {"sid": str(uuid.uuid4()), "status": "ok"})])
    headers = {
        "Content-Type": "application/x-sentry-envelope",
        "Content-Encoding": "zstd",
        "X-Sentry-Auth": f"Sentry sentry_key={p['public_key']}, sentry_version=7, sentry_client=sentry.relay/{RELAY_VERSION}",
        "X-Sentry-Relay-Id": relay.id,
        "X-Sentry-Relay-Signature": relay.sk.sign(b""),
    }
    status, _, body = upstream.request("POST", f"/api/{p['id']}/envelope/", zstd_raw_frame(raw), headers)
    assert status == 200, body
    # gzip as well (http.encoding: gzip).
    headers.update({"Content-Encoding": "gzip", "X-Sentry-Relay-Signature": relay.sk.sign(b"")})
    status, _, body = upstream.request("POST", f"/api/{p['id']}/envelope/", gzip.compress(raw), headers)
    assert status == 200, body

    st = upstream.get_json("/stats")
    assert st["registrations"]["challenges"] == 1 and st["registrations"]["responses"] == 1
    assert st["envelopes_by_sender"]["relay"] == 2
    assert st["items_by_type"] == {"event": 2, "session": 2}
    assert st["bytes_by_encoding"]["zstd"]["decoded"] == len(raw)
    assert st["config_requests"]["unknown"] == 1 and st["config_requests"]["unchanged"] == 1
    # challenge, response, three config queries, two envelopes: every signature verified in full.
    assert st["signatures"] == {"verified": 7, "not_checked": 0}
    assert st["errors"] == {} and st["registrations"]["failures"] == {}


def error_of(body):
    doc = json.loads(body)
    assert isinstance(doc["detail"], str) and isinstance(doc["causes"], list)
    return doc


def test_bad_signatures_are_rejected(upstream, binary):
    relay = FakeRelay(upstream)
    relay.register()
    q = {"global": True, "publicKeys": []}
    path = "/api/0/relays/projectconfigs/?version=3"
    other_sk, _ = generate_key_pair()

    status, _, body = relay.post_signed(path, q, sign_with=other_sk)
    assert status == 401 and error_of(body)["detail"] == "invalid relay signature"
    status, _, body = relay.post_signed(path, q, signature="")
    assert status == 401 and error_of(body)["detail"] == "missing X-Sentry-Relay-Signature header"
    status, _, body = relay.post_signed(path, q, relay_id=str(uuid.uuid4()))
    assert status == 403 and error_of(body)["detail"] == "relay not registered"
    # A signature made for other data.
    sig = relay.sk.sign(b'{"global":false}')
    status, _, body = relay.post_signed(path, q, signature=sig)
    assert status == 401 and error_of(body)["detail"] == "invalid relay signature"
    # Forged registration: the challenge signed with a key other than the one in the body.
    rogue = FakeRelay(upstream)
    status, _, body = rogue.post_signed(
        "/api/0/relays/register/challenge/",
        {"relay_id": rogue.id, "public_key": str(rogue.pk), "version": RELAY_VERSION},
        sign_with=other_sk,
    )
    assert status == 401 and error_of(body)["detail"] == "invalid relay signature"
    # Forged envelope signature.
    p = upstream.get_json("/projects")[0]
    raw = envelope_bytes(p, [("event", {"message": "x"})])
    headers = {
        "Content-Encoding": "zstd",
        "X-Sentry-Auth": f"Sentry sentry_key={p['public_key']}, sentry_version=7",
        "X-Sentry-Relay-Id": relay.id,
        "X-Sentry-Relay-Signature": other_sk.sign(b""),
    }
    status, _, body = upstream.request("POST", f"/api/{p['id']}/envelope/", zstd_raw_frame(raw), headers)
    assert status == 401 and error_of(body)["detail"] == "invalid relay signature"

    st = upstream.get_json("/stats")
    assert st["errors"]["bad_signature"] == 4
    assert st["errors"]["missing_signature"] == 1 and st["errors"]["unknown_relay"] == 1
    assert st["envelopes"] == 0


def test_stale_signature_is_rejected(binary):
    up = Upstream(binary, "--signature-max-age", "2s")
    try:
        relay = FakeRelay(up)
        relay.register()
        body = json.dumps({"global": True}).encode()
        sig = relay.sk.sign(body)
        time.sleep(2.5)
        status, _, raw = up.request(
            "POST",
            "/api/0/relays/projectconfigs/?version=3",
            body,
            {"X-Sentry-Relay-Id": relay.id, "X-Sentry-Relay-Signature": sig},
        )
        assert status == 401 and error_of(raw)["detail"] == "relay signature expired"
        assert up.get_json("/stats")["errors"]["expired_signature"] == 1
    finally:
        up.stop()


# Keys that Relay's serializer omits when they hold their default value: an
# omission there is not a drop.
OMITTED_DEFAULTS = {("datascrubbingSettings", "scrubIpAddresses"): False, ("filters", "filters"): []}


def assert_kept(ours, normalized, path=()):
    """Everything we set survives normalization with the same value."""
    if isinstance(ours, dict):
        assert isinstance(normalized, dict), f"{'.'.join(path)}: {normalized!r}"
        for k, v in ours.items():
            if k not in normalized and OMITTED_DEFAULTS.get(path[-1:] + (k,), object()) == v:
                continue
            assert k in normalized, f"{'.'.join(path + (k,))} was dropped"
            assert_kept(v, normalized[k], path + (k,))
    elif isinstance(ours, list):
        assert isinstance(normalized, list) and len(normalized) == len(ours), f"{'.'.join(path)}: {normalized!r}"
        for i, (a, b) in enumerate(zip(ours, normalized)):
            assert_kept(a, b, path + (str(i),))
    else:
        assert ours == normalized, f"{'.'.join(path)}: {ours!r} became {normalized!r}"


@pytest.mark.parametrize(
    "flags",
    [[], ["--inbound-filters"], ["--quota", "error;transaction:0:interop", "--quota", "all"]],
    ids=["defaults", "inbound-filters", "quotas"],
)
def test_configs_pass_sentry_relay_normalization(binary, flags):
    up = Upstream(binary, *flags)
    try:
        relay = FakeRelay(up)
        relay.register()
        keys = [p["public_key"] for p in up.get_json("/projects")]
        answer = relay.configs({"global": True, "publicKeys": keys})
        assert len(answer["configs"]) == PROJECTS
        glob = answer["global"]
        assert_kept(glob, sentry_relay.normalize_global_config(glob))
        for key, state in answer["configs"].items():
            config = state["config"]
            normalized = sentry_relay.normalize_project_config(config)
            assert_kept(config, normalized)
            ds = normalized["datascrubbingSettings"]
            assert ds["scrubData"] is True and ds["scrubDefaults"] is True
            assert "organizations:ourlogs-ingestion" in normalized["features"]
            # The datascrubbing settings convert to a PII config that applies the defaults.
            pii = sentry_relay.convert_datascrubbing_config(config["datascrubbingSettings"])
            assert "@common:filter" in json.dumps(pii)
        if "--inbound-filters" in flags:
            assert set(config["filterSettings"]) == {"webCrawlers", "legacyBrowsers", "localhost", "browserExtensions"}
        else:
            assert "filterSettings" not in config
        if "--quota" in flags:
            assert [q["categories"] for q in config["quotas"]] == [["error", "transaction"], []]
            assert all(q["limit"] == 0 for q in config["quotas"])
        else:
            assert "quotas" not in config
    finally:
        up.stop()


def test_sentry_sdk_sends_straight_to_fake_upstream(upstream):
    projects = upstream.get_json("/projects?origin=" + upstream.url)
    dsn = projects[2]["dsn"]
    assert dsn == f"http://{projects[2]['public_key']}@{upstream.addr}/{projects[2]['id']}"

    sent = []  # item types of every envelope the SDK put on the wire

    class RecordingTransport(HttpTransport):
        def _send_envelope(self, envelope):
            sent.append([(item.type, item.headers.get("item_count")) for item in envelope.items])
            return super()._send_envelope(envelope)

    sentry_sdk.init(
        dsn=dsn,
        transport=RecordingTransport,
        release="interop@1.0.0",
        environment="interop",
        traces_sample_rate=1.0,
        enable_logs=True,
        send_client_reports=False,
        auto_session_tracking=False,
        default_integrations=False,
    )
    try:
        try:
            raise ValueError("interop error")
        except ValueError:
            sentry_sdk.capture_exception()
        with sentry_sdk.start_transaction(name="interop-transaction", op="task"):
            with sentry_sdk.start_span(op="db", name="select 1"):
                pass
        scope = sentry_sdk.get_isolation_scope()
        scope.start_session(session_mode="application")
        scope.end_session()
        sentry_sdk.crons.capture_checkin(monitor_slug="interop-cron", status="ok", duration=1.5)
        for i in range(3):
            sentry_sdk.logger.info("interop log {n}", n=i)
        sentry_sdk.flush(timeout=10)
    finally:
        sentry_sdk.get_client().close(timeout=5)

    types = {}
    records = {}
    for env in sent:
        for ty, count in env:
            types[ty] = types.get(ty, 0) + 1
            records[ty] = records.get(ty, 0) + (count or 1)
    for want in ("event", "transaction", "session", "check_in", "log"):
        assert types.get(want), f"the SDK sent no {want} item: {sent}"
    assert records["log"] == 3

    st = upstream.get_json("/stats")
    assert st["envelopes"] == len(sent) and st["envelopes_by_sender"]["sdk"] == len(sent)
    assert st["items_by_type"] == types
    assert st["records_by_type"] == records
    assert st["errors"] == {}, st["errors"]
    assert st["top_projects"] == [{"id": projects[2]["id"], "envelopes": len(sent), "items": sum(types.values())}]


def test_allow_list_and_deny_with_sentry_relay_credentials(binary, tmp_path):
    """--relay-credentials takes a credentials.json holding sentry_relay keys:
    that relay registers, any other gets 403; --deny-relays stops everyone."""
    listed = FakeRelay(None)
    creds = tmp_path / "credentials.json"
    creds.write_text(json.dumps({"secret_key": str(listed.sk), "public_key": str(listed.pk), "id": listed.id}, indent=2))
    up = Upstream(binary, "--relay-credentials", str(creds))
    try:
        listed.up = up
        listed.register()
        stranger = FakeRelay(up)
        status, _, body = stranger.post_signed(
            "/api/0/relays/register/challenge/", {"relay_id": stranger.id, "public_key": str(stranger.pk), "version": RELAY_VERSION}
        )
        assert status == 403 and error_of(body)["detail"] == "relay not allowed to register"
        st = up.get_json("/stats")
        assert st["registrations"]["failures"] == {"unknown_relay": 1} and st["registrations"]["responses"] == 1
    finally:
        up.stop()
    up = Upstream(binary, "--deny-relays")
    try:
        relay = FakeRelay(up)
        status, _, body = relay.post_signed(
            "/api/0/relays/register/challenge/", {"relay_id": relay.id, "public_key": str(relay.pk), "version": RELAY_VERSION}
        )
        assert status == 403 and error_of(body)["relay"] == "stop"
    finally:
        up.stop()
