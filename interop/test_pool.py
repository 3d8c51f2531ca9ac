"""pool/ against Sentry's own code: sentry_sdk parses every dumped envelope
exactly like envelope/ does, Relay's normalization (sentry_relay's
StoreNormalizer) accepts every error event and transaction without errors or
dropped fields, and Relay's default data scrubbing (convert_datascrubbing_config
+ pii_strip_event) removes or masks every planted canary while the Kept
controls survive and nothing else is touched.

Not covered here: log canaries (sentry_relay 0.10.1 scrubs events only; its
Python API has no log/attribute processor) and sessions/check-ins (no
validator in the Python API)."""

import base64
import copy
import datetime
import glob
import json
import os
import re

import pytest
from sentry_relay.processing import StoreNormalizer, convert_datascrubbing_config, pii_strip_event
from sentry_sdk.envelope import Envelope

SIZE = 600
SEED = 42


@pytest.fixture(scope="module")
def dumped(helper, tmp_path_factory):
    d = tmp_path_factory.mktemp("pool")
    # Timestamps must be recent for Relay's clock checks: anchor at the real now.
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    out = json.loads(helper("dump-pool", "--dir", d, "--seed", SEED, "--size", SIZE, "--projects", 10, "--now", now).stdout)
    manifest = json.load(open(os.path.join(d, "manifest.json")))
    assert out["entries"] == SIZE and len(manifest["entries"]) == SIZE
    return {"dir": str(d), "out": out, "manifest": manifest}


@pytest.fixture(scope="module")
def go_parsed(helper, dumped):
    files = [os.path.join(dumped["dir"], e["file"]) for e in dumped["manifest"]["entries"]]
    return json.loads(helper("parse-envelope", *files).stdout)


def entries(dumped, kinds=None):
    for e in dumped["manifest"]["entries"]:
        if kinds is None or e["kind"] in kinds:
            yield e, open(os.path.join(dumped["dir"], e["file"]), "rb").read()


def test_sdk_parses_like_go(dumped, go_parsed):
    kinds = set()
    for e, raw in entries(dumped):
        path = os.path.join(dumped["dir"], e["file"])
        go = go_parsed[path]
        env = Envelope.deserialize(raw)
        assert env.headers == json.loads(json.dumps(go["header"])), e["file"]
        assert len(env.items) == len(go["items"]) == len(go["scan_types"]), e["file"]
        for item, gi, st in zip(env.items, go["items"], go["scan_types"]):
            payload = base64.b64decode(gi["payload"])
            headers = dict(item.headers)
            if "content_type" not in gi["header"]:
                # sentry_sdk's Item labels payloads itself (JSON or octet-stream)
                assert headers.pop("content_type", "application/json") in ("application/json", "application/octet-stream")
            assert headers == gi["header"], e["file"]
            assert headers["type"] == gi["type"] == st
            assert headers.get("content_type", "") == gi["content_type"]
            assert item.headers.get("item_count", 0) == gi["item_count"]
            if item.payload.json is not None:
                # sentry_sdk keeps event and transaction payloads only as parsed JSON
                assert item.payload.json == json.loads(payload), e["file"]
            else:
                assert item.payload.get_bytes() == payload, e["file"]
            assert item.headers["length"] == len(payload)
            json.loads(payload)
        assert env.headers.get("event_id", "") == e.get("event_id", "")
        kinds.add(e["kind"])
    assert kinds == {"errors", "transactions", "sessions", "checkins", "logs"}


def normalizer(e):
    return StoreNormalizer(
        project_id=e["project_id"],
        client_ip=e["forwarded_for"],
        client="relayload-interop/1",
        key_id="1",
        protocol_version="7",
        remove_other=True,
        normalize_user_agent=True,
    )


def payload(raw):
    env = Envelope.deserialize(raw)
    assert len(env.items) == 1
    return json.loads(env.items[0].payload.get_bytes())


def meta_errors(meta, path=""):
    """Yields (path, errors) for every _meta node that records errors."""
    if not isinstance(meta, dict):
        return
    for k, v in meta.items():
        if k == "" and isinstance(v, dict) and v.get("err"):
            yield path, v["err"]
        elif k != "":
            yield from meta_errors(v, f"{path}.{k}" if path else k)


def test_normalization_accepts_everything(dumped):
    n = browsers = with_browser_ctx = 0
    for e, raw in entries(dumped, {"errors", "transactions"}):
        ev = payload(raw)
        out = normalizer(e).normalize_event(copy.deepcopy(ev))
        errs = list(meta_errors(out.get("_meta", {})))
        assert not errs, (e["file"], errs)
        for k in ev:
            if k == "server_name":  # Relay moves it into tags
                assert dict(out["tags"])["server_name"] == ev["server_name"] if isinstance(out["tags"], dict) else \
                    ["server_name", ev["server_name"]] in out["tags"], e["file"]
                continue
            assert k in out, (e["file"], k)
        for k in ev["request"]:
            assert out["request"].get(k) is not None, (e["file"], "request", k)
        for k in ev["contexts"]:
            assert k in out["contexts"], (e["file"], "contexts", k)
        for k in ev.get("extra", {}):
            assert k in out["extra"], (e["file"], "extra", k)
        if e["kind"] == "errors":
            vals, outvals = ev["exception"]["values"], out["exception"]["values"]
            assert len(vals) == len(outvals)
            for a, b in zip(vals, outvals):
                assert len(a["stacktrace"]["frames"]) == len(b["stacktrace"]["frames"]), e["file"]
            assert len(ev["breadcrumbs"]["values"]) == len(out["breadcrumbs"]["values"])
            assert out["level"] == ev["level"] and out["platform"] == ev["platform"]
        else:
            assert out["type"] == "transaction"
            assert [s["span_id"] for s in ev["spans"]] == [s["span_id"] for s in out["spans"]], e["file"]
            for a, b in zip(ev["spans"], out["spans"]):
                assert b["parent_span_id"] == a["parent_span_id"] and b["op"] == a["op"]
                for k in a["data"]:
                    assert k in b["data"], (e["file"], a["span_id"], k)
            for k in ev.get("measurements", {}):
                assert k in out["measurements"], (e["file"], k)
            assert out["contexts"]["trace"]["trace_id"] == ev["contexts"]["trace"]["trace_id"]
        ua = e["user_agent"]
        if re.match(r"Mozilla/5\.0 \((Windows NT 10|Macintosh|X11; Linux|iPhone|Linux; Android 1)", ua) and "bot" not in ua.lower():
            browsers += 1
            with_browser_ctx += "browser" in out["contexts"]
        n += 1
    assert n > 100
    # Relay's UA parser recognises the generated browser agents.
    assert browsers > 50 and with_browser_ctx >= 0.95 * browsers, (browsers, with_browser_ctx)


MARKER = re.compile(rb"rlcnry-([a-z]{2})-([a-z]{5})")


def scan(b, kinds):
    """The marker logic of canary.Scan: yields (kind, index, leaked)."""
    for m in MARKER.finditer(b):
        k = kinds.get(m.group(1).decode())
        if k is None:
            continue
        idx = 0
        for c in m.group(2):
            idx = idx * 26 + (c - ord("a"))
        rest = b[m.end():m.end() + 2]
        if k["expect"] == "removed":
            leaked = True
        elif k["expect"] == "masked":
            leaked = rest != b" ["
        else:
            leaked = False
        yield k, idx, leaked


def scrub_config(ips, sensitive=()):
    return convert_datascrubbing_config({
        "scrubData": True, "scrubDefaults": True, "scrubIpAddresses": ips,
        "sensitiveFields": list(sensitive), "excludeFields": [],
    })


def expected_kinds(kinds, kind):
    want = []
    for k in kinds.values():
        w = k["where"]
        if w.startswith("error/transaction ") or (kind == "errors" and w.startswith("error ")) or \
                (kind == "transactions" and w.startswith("transaction ")):
            want.append(k)
    return want


@pytest.mark.parametrize("ips", [False, True])
def test_default_scrubbing_catches_every_canary(dumped, ips):
    kinds = {k["code"]: k for k in dumped["out"]["canaries"]}
    cfg = scrub_config(ips, ["blast_private"])
    checked = {}
    for e, raw in entries(dumped, {"errors", "transactions"}):
        idx = e["index"]
        want = expected_kinds(kinds, e["kind"])
        before = {}
        for k, i, leaked in scan(raw, kinds):
            assert i == idx and leaked == (k["expect"] != "kept")
            before[k["name"]] = before.get(k["name"], 0) + 1
        assert before == {k["name"]: 1 for k in want}, e["file"]
        out = normalizer(e).normalize_event(payload(raw))
        scrubbed = json.dumps(pii_strip_event(cfg, out)).encode()
        after = {}
        for k, i, leaked in scan(scrubbed, kinds):
            assert not leaked, (e["file"], k["name"], "survived scrubbing")
            after[k["name"]] = after.get(k["name"], 0) + 1
        for k in want:
            if k["expect"] == "kept":
                assert after.get(k["name"]) == 1, (e["file"], k["name"], "control was scrubbed")
            elif k["expect"] == "masked":
                assert after.get(k["name"]) == 1, (e["file"], k["name"], "masked canary lost its marker")
            else:
                assert k["name"] not in after
            checked[k["name"]] = checked.get(k["name"], 0) + 1
    assert set(checked) == {k["name"] for k in kinds.values() if not k["where"].startswith("log ")}


def remark_paths(meta, path=()):
    """Yields the paths of every _meta node carrying scrubbing remarks."""
    if not isinstance(meta, dict):
        return
    for k, v in meta.items():
        if k == "" and isinstance(v, dict) and v.get("rem"):
            yield path
        elif k != "":
            yield from remark_paths(v, path + (k,))


def lookup(v, path):
    for p in path:
        if isinstance(v, list):
            v = v[int(p)]
        elif isinstance(v, dict):
            v = v.get(p)
        else:
            return None
    return v


def test_scrubbing_touches_only_canaries(dumped):
    """With IP scrubbing off, every value Relay's default rules change held a
    canary: benign fields carry none of the words the password rule matches."""
    cfg = scrub_config(False)
    n = 0
    for e, raw in entries(dumped, {"errors", "transactions"}):
        norm = normalizer(e).normalize_event(payload(raw))
        out = pii_strip_event(cfg, copy.deepcopy(norm))
        for path in remark_paths(out.get("_meta", {})):
            orig = lookup(norm, path)
            assert orig is not None and b"rlcnry-" in json.dumps(orig).encode(), (e["file"], path, orig)
            n += 1
    assert n > 0


def test_unique_user_agents_parse_like_browsers(helper, tmp_path):
    """Unique agents (build numbers etc. encode the entry index) still parse
    as their browser family in Relay's UA normalization."""
    now = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    helper("dump-pool", "--dir", tmp_path, "--seed", 7, "--size", 400, "--mix", "errors=1", "--now", now,
           "--unique-user-agents")
    manifest = json.load(open(tmp_path / "manifest.json"))
    agents = [e["user_agent"] for e in manifest["entries"]]
    assert len(set(agents)) == len(agents)
    browsers = parsed = 0
    for e, raw in entries({"dir": str(tmp_path), "manifest": manifest}):
        ua = e["user_agent"]
        if not re.match(r"Mozilla/5\.0 \((Windows NT 10|Macintosh|X11; Linux|iPhone|iPad|Linux; Android 1)", ua) or "bot" in ua.lower():
            continue
        browsers += 1
        out = normalizer(e).normalize_event(payload(raw))
        ctx = out["contexts"].get("browser", {})
        if ctx.get("name") not in (None, "Other"):
            parsed += 1
    assert browsers > 200 and parsed >= 0.95 * browsers, (browsers, parsed)
