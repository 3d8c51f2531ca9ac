"""relayauth (Go, via interop-helper) against sentry_relay, Sentry's own
binding of Relay's relay-auth crate: keys, request signatures and
registration tokens must be accepted and rejected identically both ways."""

import base64
import json
import os
import secrets
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import sentry_relay
from sentry_relay import (
    KeyParseErrorBadEncoding,
    KeyParseErrorBadKey,
    PublicKey,
    SecretKey,
    UnpackErrorBadSignature,
    UnpackErrorSignatureExpired,
    create_register_challenge,
    generate_key_pair,
    validate_register_response,
)

VECTORS = json.loads(
    (Path(__file__).parent.parent / "relayauth" / "testdata" / "vectors.json").read_text()
)
UPSTREAM_SECRET = "interop upstream secret"
RELAY_VERSION = "26.6.0"


def b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def unb64(s: str) -> bytes:
    return base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))


@pytest.fixture
def go_creds(helper):
    """Fresh credentials from relayauth.GenerateCredentials."""
    return json.loads(helper("keygen").stdout)


@pytest.fixture
def write(tmp_path):
    counter = iter(range(10**6))

    def write(data: bytes) -> Path:
        p = tmp_path / f"data-{next(counter)}"
        p.write_bytes(data)
        return p

    return write


PAYLOADS = [
    pytest.param(b"", id="empty"),
    pytest.param(b'{"global":true,"publicKeys":[]}', id="json"),
    pytest.param(bytes(range(256)) * 4, id="binary-with-nul"),
    pytest.param("ünïcödé ✓".encode(), id="utf8"),
    pytest.param(os.urandom(1 << 20), id="1MiB"),
]


# --- keys and credentials -------------------------------------------------


def test_go_credentials_load_in_sentry_relay(helper, tmp_path):
    path = tmp_path / "credentials.json"
    printed = json.loads(helper("keygen", "--out", path).stdout)
    raw = path.read_text()
    creds = json.loads(raw)
    assert creds == printed
    # Layout Relay writes: fields in this order, 2-space indent, newline, 0600.
    assert list(creds) == ["secret_key", "public_key", "id"]
    assert raw == json.dumps(creds, indent=2) + "\n"
    assert path.stat().st_mode & 0o777 == 0o600
    assert str(uuid.UUID(creds["id"])) == creds["id"]
    assert uuid.UUID(creds["id"]).version == 4

    sk = SecretKey.parse(creds["secret_key"])
    pk = PublicKey.parse(creds["public_key"])
    assert str(sk) == creds["secret_key"]
    assert str(pk) == creds["public_key"]
    # The pair belongs together: sentry_relay's signature checks out under it.
    assert pk.verify(b"pairing", sk.sign(b"pairing"))
    # And Go reads back what it wrote.
    assert json.loads(helper("load-credentials", "--file", path).stdout) == creds


def test_sentry_relay_credentials_load_in_go(helper, tmp_path):
    sk, pk = generate_key_pair()
    creds = {"secret_key": str(sk), "public_key": str(pk), "id": str(uuid.uuid4())}
    path = tmp_path / "credentials.json"
    path.write_text(json.dumps(creds, indent=2) + "\n")
    assert json.loads(helper("load-credentials", "--file", path).stdout) == creds

    other_sk, other_pk = generate_key_pair()
    path.write_text(json.dumps({**creds, "public_key": str(other_pk)}))
    proc = helper("load-credentials", "--file", path, ok=False)
    assert proc.returncode == 1 and proc.stdout.startswith("malformed")


def sentry_parse(cls, s):
    try:
        return "ok " + str(cls.parse(s))
    except KeyParseErrorBadEncoding:
        return "bad_encoding"
    except KeyParseErrorBadKey:
        return "bad_key"


def key_candidates_public():
    out = [b64(os.urandom(32)) for _ in range(400)]  # ~half are off the curve
    for y in range(0, 24):
        out.append(b64(y.to_bytes(32, "little")))
        out.append(b64((y | (1 << 255)).to_bytes(32, "little")))  # sign bit set
    p = 2**255 - 19
    for y in (p, p + 1, p + 2, 2**255 - 1):  # non-canonical y (>= p)
        out.append(b64(y.to_bytes(32, "little")))
    good = VECTORS["keys"]["public"]
    out += [
        good,
        good + "=",
        good[:42],
        good + "A",
        good[:42] + "V",  # non-zero trailing bits
        "+/" + good[2:],  # standard alphabet
        "",
        "bad data",
        VECTORS["keys"]["secret_keypair"],
        b64(os.urandom(33)),
        b64(os.urandom(31)),
    ]
    return out


def key_candidates_secret():
    seed, keypair = VECTORS["keys"]["secret_seed"], VECTORS["keys"]["secret_keypair"]
    out = [b64(os.urandom(32)) for _ in range(100)]
    for _ in range(50):
        sk, pk = generate_key_pair()
        out.append(b64(unb64(str(sk)) + unb64(str(pk))))  # valid keypair form
        out.append(b64(unb64(str(sk)) + os.urandom(32)))  # mismatched halves
    out += [
        seed,
        keypair,
        seed + "=",
        seed[:42] + "V",
        keypair[:85],
        keypair + "A",
        "+/" + seed[2:],
        "",
        "OvXF",
        b64(os.urandom(48)),
    ]
    return out


@pytest.mark.parametrize(
    "kind,cls,candidates",
    [
        ("public", PublicKey, key_candidates_public),
        ("secret", SecretKey, key_candidates_secret),
    ],
)
def test_key_parsing_agrees(helper, kind, cls, candidates):
    keys = candidates()
    go = helper("parse-keys", "--kind", kind, input="\n".join(keys) + "\n").stdout.splitlines()
    assert len(go) == len(keys)
    accepted = 0
    for key, go_answer in zip(keys, go):
        want = sentry_parse(cls, key)
        if want.startswith("ok"):
            accepted += 1
            assert go_answer == want, f"{kind} key {key!r}: sentry_relay {want}, Go {go_answer}"
        else:
            assert go_answer == "malformed", f"{kind} key {key!r}: sentry_relay {want}, Go {go_answer}"
    # Both outcomes were exercised in quantity.
    assert 50 < accepted < len(keys) - 10


# --- request signatures ---------------------------------------------------


@pytest.mark.parametrize("data", PAYLOADS)
def test_go_signature_verifies_in_sentry_relay(helper, go_creds, write, data):
    sig = helper("sign", "--secret", go_creds["secret_key"], "--data-file", write(data)).stdout.strip()
    pk = PublicKey.parse(go_creds["public_key"])
    assert pk.verify(data, sig)
    assert pk.verify(data, sig, max_age=60)  # verify_timestamp
    assert pk.unpack(b'{"a":1}', pk_sign_json(helper, go_creds, write), max_age=60) == {"a": 1}
    # Tampering is detected.
    assert not pk.verify(data + b"x", sig)
    assert not pk.verify(data, flip(sig, 5))
    other = PublicKey.parse(json.loads(helper("keygen").stdout)["public_key"])
    assert not other.verify(data, sig)


def pk_sign_json(helper, creds, write):
    return helper("sign", "--secret", creds["secret_key"], "--data-file", write(b'{"a":1}')).stdout.strip()


def flip(sig: str, i: int) -> str:
    c = "B" if sig[i] == "A" else "A"
    return sig[:i] + c + sig[i + 1 :]


@pytest.mark.parametrize("data", PAYLOADS)
def test_sentry_relay_signature_verifies_in_go(helper, write, data):
    sk, pk = generate_key_pair()
    sig = sk.sign(data)
    path = write(data)
    proc = helper("verify", "--public", pk, "--data-file", path, "--sig", sig, "--max-age", "60s")
    assert proc.stdout.strip() == "ok"

    cases = {
        "bad_signature": [
            (write(data + b"x"), sig),
            (path, flip(sig, 5)),
            (path, sig.split(".")[0] + "." + b64(b'{"t":"2030-01-01T00:00:00Z"}')),
        ],
        "malformed": [
            (path, sig.split(".")[0]),  # no header part
            (path, sig + "="),
            (path, ""),
        ],
    }
    for cls, variants in cases.items():
        for p, s in variants:
            proc = helper("verify", "--public", pk, "--data-file", p, "--sig", s, ok=False)
            assert proc.returncode == 1, (s, proc.stdout, proc.stderr)
            assert proc.stdout.startswith(cls + ":"), (s, proc.stdout)


def test_signature_age_agrees(helper, go_creds, write):
    """An old Go signature fails sentry_relay's verify_timestamp and Go's age check alike."""
    path = write(b"aged")
    pk = PublicKey.parse(go_creds["public_key"])
    ten_min_ago = (datetime.now(timezone.utc) - timedelta(minutes=10)).isoformat()
    sig = helper("sign", "--secret", go_creds["secret_key"], "--data-file", path, "--time", ten_min_ago).stdout.strip()
    assert pk.verify(b"aged", sig)  # no age check
    assert pk.verify(b"aged", sig, max_age=900)
    assert not pk.verify(b"aged", sig, max_age=300)
    assert helper("verify", "--public", pk, "--data-file", path, "--sig", sig, "--max-age", "15m").returncode == 0
    proc = helper("verify", "--public", pk, "--data-file", path, "--sig", sig, "--max-age", "5m", ok=False)
    assert proc.returncode == 1 and proc.stdout.startswith("expired:")

    proc = helper("verify", "--public", pk, "--data-file", path, "--sig", sig, "--max-age", "0s")
    assert proc.returncode == 0, proc.stdout


def chrono(dt: datetime, sep="T", z="Z") -> str:
    return dt.astimezone(timezone.utc).strftime(f"%Y-%m-%d{sep}%H:%M:%S.%f") + z


def header_cases():
    """Signature headers (made relative to now) and whether they must verify
    without an age check. Expectations were measured on sentry_relay 0.10.1
    and agree with current relay-auth: "t" is required, "a" may be v0 or v1,
    timestamps may be at most 15 s in the future."""
    now = datetime.now(timezone.utc)
    t = chrono(now)
    return [
        ("regular", json.dumps({"t": t}), True),
        ("no t", "{}", False),
        ("null t", '{"t":null}', False),
        ("uppercase T key", json.dumps({"T": t}), False),
        ("unknown field", json.dumps({"t": t, "x": 1}), True),
        ("a v0", json.dumps({"t": t, "a": "v0"}), True),
        ("a v1 (Go signs pre-hashed)", json.dumps({"t": t, "a": "v1"}), True),
        ("a v2", json.dumps({"t": t, "a": "v2"}), False),
        ("a only", '{"a":"v0"}', False),
        ("offset +01:00", json.dumps({"t": (now + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%S+01:00")}), True),
        ("space separator", json.dumps({"t": chrono(now, sep=" ")}), True),
        ("lowercase t and z", json.dumps({"t": chrono(now, sep="t", z="z")}), True),
        ("no zone", json.dumps({"t": chrono(now, z="")}), False),
        ("t is a number", json.dumps({"t": int(now.timestamp())}), False),
        ("array", json.dumps([t]), False),
        ("not json", "not json", False),
        ("1970", '{"t":"1970-01-01T00:00:00Z"}', True),
        ("10 s ahead", json.dumps({"t": chrono(now + timedelta(seconds=10))}), True),
        ("25 s ahead", json.dumps({"t": chrono(now + timedelta(seconds=25))}), False),
        ("1 day ahead", json.dumps({"t": chrono(now + timedelta(days=1))}), False),
    ]


def test_signature_header_handling_agrees(helper, go_creds, write):
    path = write(b"header cases")
    pk = PublicKey.parse(go_creds["public_key"])
    for name, header, want in header_cases():
        sig = helper("sign", "--secret", go_creds["secret_key"], "--data-file", path, "--header", header).stdout.strip()
        assert pk.verify(b"header cases", sig) is want, f"sentry_relay, {name}: {header}"
        proc = helper("verify", "--public", pk, "--data-file", path, "--sig", sig, ok=False)
        assert (proc.returncode == 0) is want, f"Go, {name}: {header}: {proc.stdout}"
        if want:
            # Tampering the data breaks every algorithm in both.
            assert not pk.verify(b"header cases!", sig), name
            proc = helper("verify", "--public", pk, "--data-file", write(b"header cases!"), "--sig", sig, ok=False)
            assert proc.stdout.startswith("bad_signature:"), (name, proc.stdout)


def test_future_signature_with_age_check_agrees(helper, go_creds, write):
    path = write(b"future")
    pk = PublicKey.parse(go_creds["public_key"])
    now = datetime.now(timezone.utc)
    for ahead, want in ((10, True), (25, False)):
        sig = helper(
            "sign", "--secret", go_creds["secret_key"], "--data-file", path,
            "--time", (now + timedelta(seconds=ahead)).isoformat(),
        ).stdout.strip()
        assert pk.verify(b"future", sig, max_age=300) is want, ahead
        proc = helper("verify", "--public", pk, "--data-file", path, "--sig", sig, "--max-age", "300s", ok=False)
        assert (proc.returncode == 0) is want, (ahead, proc.stdout)
        if not want:
            assert proc.stdout.startswith("expired:"), proc.stdout


def test_keypair_form_secret_key_signs_identically(helper, write):
    sk, pk = generate_key_pair()
    keypair = b64(unb64(str(sk)) + unb64(str(pk)))
    assert str(SecretKey.parse(keypair)) == str(sk)
    path = write(b"keypair form")
    header = '{"t":"2026-07-01T12:00:00.123456Z"}'
    a = helper("sign", "--secret", keypair, "--data-file", path, "--header", header).stdout.strip()
    b = helper("sign", "--secret", str(sk), "--data-file", path, "--header", header).stdout.strip()
    assert a == b
    assert pk.verify(b"keypair form", a)


def test_vectors_verify_in_sentry_relay():
    """The spec's vectors (used by the Go unit tests) are genuine for sentry_relay too."""
    reg = VECTORS["registration"]
    pk = PublicKey.parse(reg["relay_key"])
    assert pk.verify(reg["request"].encode(), reg["request_sig"])
    response = json.dumps(
        {"relay_id": reg["relay_id"], "token": reg["token"], "version": "20.8.0"}, separators=(",", ":")
    ).encode()
    assert pk.verify(response, reg["response_sig"])
    assert not pk.verify(reg["request"].encode() + b" ", reg["request_sig"])
    legacy = VECTORS["legacy_no_header"]
    assert not PublicKey.parse(VECTORS["keys"]["public"]).verify(legacy["data"].encode(), legacy["sig"])
    go_pk = PublicKey.parse(VECTORS["keys"]["public"])
    for g in VECTORS["go_signatures"]:
        assert go_pk.verify(g["data"].encode(), g["sig"])
    # The TOKEN vector validates (max_age=0 means no age check in the binding).
    out = validate_register_response(response, reg["response_sig"], reg["secret"], max_age=0)
    assert str(out["relay_id"]) == reg["relay_id"] and out["public_key"] == reg["relay_key"]


# --- registration ---------------------------------------------------------


def register_request(creds):
    return json.dumps(
        {"relay_id": creds["id"], "public_key": creds["public_key"], "version": RELAY_VERSION},
        separators=(",", ":"),
    ).encode()


def register_response(relay_id, token):
    return json.dumps(
        {"relay_id": relay_id, "token": token, "version": RELAY_VERSION}, separators=(",", ":")
    ).encode()


def test_go_relay_registers_with_sentry_relay_upstream(helper, go_creds, write):
    """Go plays the Relay, sentry_relay plays Sentry (challenge and response)."""
    body = register_request(go_creds)
    sig = helper("sign", "--secret", go_creds["secret_key"], "--data-file", write(body)).stdout.strip()
    challenge = create_register_challenge(body, sig, UPSTREAM_SECRET)  # max_age=60
    assert str(challenge["relay_id"]) == go_creds["id"]
    token = challenge["token"]

    # Go validates Sentry's token with the same secret...
    state = json.loads(helper("validate-token", "--secret", UPSTREAM_SECRET, "--token", token, "--max-age", "60s").stdout)
    assert state["relay_id"] == go_creds["id"]
    assert state["public_key"] == go_creds["public_key"]
    assert abs(state["timestamp"] - time.time()) < 30
    assert len(unb64(state["rand"])) == 64
    # ... and the state JSON has the field order Go writes.
    assert list(json.loads(unb64(token.split(":")[0]))) == ["timestamp", "relay_id", "public_key", "rand"]
    proc = helper("validate-token", "--secret", "wrong", "--token", token, ok=False)
    assert proc.returncode == 1 and proc.stdout.startswith("bad_signature:")
    proc = helper("validate-token", "--secret", UPSTREAM_SECRET, "--token", flip(token, 3), ok=False)
    assert proc.returncode == 1 and proc.stdout.startswith("bad_signature:")

    # Go signs the response; Sentry accepts it.
    resp = register_response(go_creds["id"], token)
    rsig = helper("sign", "--secret", go_creds["secret_key"], "--data-file", write(resp)).stdout.strip()
    out = validate_register_response(resp, rsig, UPSTREAM_SECRET)
    assert str(out["relay_id"]) == go_creds["id"]
    assert out["public_key"] == go_creds["public_key"]
    assert out["version"] == RELAY_VERSION
    with pytest.raises(UnpackErrorBadSignature):
        validate_register_response(resp + b" ", rsig, UPSTREAM_SECRET)


def test_go_upstream_tokens_pass_sentry_relay(helper, write):
    """Go plays Sentry (mints the token), sentry_relay validates the response."""
    sk, pk = generate_key_pair()
    relay_id = str(uuid.uuid4())
    token = helper("mint-token", "--secret", UPSTREAM_SECRET, "--relay-id", relay_id, "--public", pk).stdout.strip()
    resp = register_response(relay_id, token)
    out = validate_register_response(resp, sk.sign(resp), UPSTREAM_SECRET)
    assert str(out["relay_id"]) == relay_id
    assert out["public_key"] == str(pk)
    assert out["token"] == token

    # Wrong secret: the MAC fails in sentry_relay.
    with pytest.raises(UnpackErrorBadSignature):
        validate_register_response(resp, sk.sign(resp), "another secret")
    # Signed by a key other than the one in the token.
    other_sk, _ = generate_key_pair()
    with pytest.raises(UnpackErrorBadSignature):
        validate_register_response(resp, other_sk.sign(resp), UPSTREAM_SECRET)

    # A token minted 120 s ago is expired for max_age=60 in both, fine for 300.
    old = helper(
        "mint-token", "--secret", UPSTREAM_SECRET, "--relay-id", relay_id, "--public", pk,
        "--time", str(int(time.time()) - 120),
    ).stdout.strip()
    old_resp = register_response(relay_id, old)
    with pytest.raises(UnpackErrorSignatureExpired):
        validate_register_response(old_resp, sk.sign(old_resp), UPSTREAM_SECRET, max_age=60)
    assert validate_register_response(old_resp, sk.sign(old_resp), UPSTREAM_SECRET, max_age=300)["token"] == old
    proc = helper("validate-token", "--secret", UPSTREAM_SECRET, "--token", old, "--max-age", "60s", ok=False)
    assert proc.returncode == 1 and proc.stdout.startswith("expired:")
    assert helper("validate-token", "--secret", UPSTREAM_SECRET, "--token", old, "--max-age", "300s").returncode == 0


@pytest.mark.parametrize("ahead,want", [(5, True), (60, False), (3600, False)])
def test_future_token_agrees(helper, ahead, want):
    """Tokens minted ahead of the validator's clock: both allow 15 s of skew."""
    sk, pk = generate_key_pair()
    relay_id = str(uuid.uuid4())
    token = helper(
        "mint-token", "--secret", UPSTREAM_SECRET, "--relay-id", relay_id, "--public", pk,
        "--time", str(int(time.time()) + ahead),
    ).stdout.strip()
    resp = register_response(relay_id, token)
    for max_age in (0, 60):  # 0 = no age check in the binding
        if want:
            validate_register_response(resp, sk.sign(resp), UPSTREAM_SECRET, max_age=max_age)
        else:
            with pytest.raises(UnpackErrorSignatureExpired):
                validate_register_response(resp, sk.sign(resp), UPSTREAM_SECRET, max_age=max_age)
        proc = helper("validate-token", "--secret", UPSTREAM_SECRET, "--token", token, "--max-age", f"{max_age}s", ok=False)
        assert (proc.returncode == 0) is want, proc.stdout
        if not want:
            assert proc.stdout.startswith("expired:"), proc.stdout


def test_sentry_relay_rejects_old_go_registration_signature(helper, go_creds, write):
    """Sentry's 60 s bootstrap age check applies to Go's signature timestamp."""
    body = register_request(go_creds)
    old = (datetime.now(timezone.utc) - timedelta(seconds=120)).isoformat()
    sig = helper("sign", "--secret", go_creds["secret_key"], "--data-file", write(body), "--time", old).stdout.strip()
    with pytest.raises(UnpackErrorSignatureExpired):
        create_register_challenge(body, sig, UPSTREAM_SECRET, max_age=60)
    assert create_register_challenge(body, sig, UPSTREAM_SECRET, max_age=300)["token"]


def test_sentry_relay_version():
    import importlib.metadata

    assert importlib.metadata.version("sentry-relay") == "0.10.1"
    assert hasattr(sentry_relay, "create_register_challenge")
