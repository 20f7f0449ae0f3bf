"""The built-in contract (bench.v1) in Python: the records a request asks for,
generated exactly as crates/payload generates them (SplitMix64 seeded with the
FNV-1a hash of the request id, the same draws in the same order), their JSON
form (camelCase, RFC 3339 timestamps with milliseconds) and their protobuf
form, and the limits every tier enforces. Shared by downstream.py and caller.py.
"""

import base64
import datetime
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def use_venv():
    """Re-executes this script with .venv's Python when started with another,
    so `python3 downstream.py ...` works as the harness writes it."""
    venv_python = os.path.join(HERE, ".venv", "bin", "python")
    if os.path.realpath(sys.prefix) == os.path.realpath(os.path.join(HERE, ".venv")):
        sys.path.insert(0, os.path.join(HERE, "gen"))
        return
    if not os.path.exists(venv_python):
        sys.exit(f"{HERE}/.venv is missing: run {HERE}/setup.sh first")
    os.execv(venv_python, [venv_python, *sys.argv])


MASK64 = (1 << 64) - 1
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
MAX_SAFE_ID = (1 << 53) - 1
EPOCH_2024_MS = 1_704_067_200_000

MAX_ITEMS = 10_000
MAX_BODY_BYTES = 1024 * 1024
MAX_REQUEST_ID_BYTES = 256

FIRST_NAMES = ["ada", "grace", "alan", "edsger", "barbara", "donald", "margaret", "ken", "radia", "leslie",
               "frances", "john", "katherine", "dennis", "sophie", "linus"]
LAST_NAMES = ["lovelace", "hopper", "turing", "dijkstra", "liskov", "knuth", "hamilton", "thompson", "perlman",
              "lamport", "allen", "backus", "johnson", "ritchie", "wilson", "torvalds"]
PRODUCTS = ["Widget", "Gadget", "Sprocket", "Gizmo", "Bracket", "Flange", "Valve", "Bearing", "Coupler", "Spindle",
            "Actuator", "Sensor"]
DOMAINS = ["example.com", "example.org", "example.net", "corp.example"]
CURRENCIES = ["EUR", "USD", "GBP", "CHF"]
TAGS = ["new", "sale", "bulk", "fragile", "eco", "imported", "limited", "gift", "premium", "clearance"]


def fnv1a(seed, data):
    h = seed
    for b in data:
        h = ((h ^ b) * FNV_PRIME) & MASK64
    return h


class SplitMix64:
    """Steele, Lea, Flood (2014), as crates/payload's `SplitMix64`."""

    def __init__(self, state):
        self.state = state

    def next(self):
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)

    def below(self, n):
        return self.next() % max(n, 1)

    def unit(self):
        return (self.next() >> 11) / float(1 << 53)

    def pick(self, words):
        return words[self.below(len(words))]


def records(request_id, items):
    """The order records of a request: dicts with the protobuf field names."""
    rng = SplitMix64(fnv1a(FNV_OFFSET, request_id.encode()))
    out = []
    for index in range(items):
        first = rng.below(16)
        last = rng.below(16)
        product = rng.pick(PRODUCTS)
        rid = rng.next() & MAX_SAFE_ID
        tags = [rng.pick(TAGS) for _ in range(rng.below(4))]
        sku_hex = rng.below(0x10000)
        name_number = rng.below(1000)
        domain = rng.pick(DOMAINS)
        out.append({
            "id": rid,
            "sku": f"SKU-{index:05d}-{sku_hex:04X}",
            "name": f"{product} {name_number}",
            "email": f"{FIRST_NAMES[first]}.{LAST_NAMES[last]}@{domain}",
            "price_cents": 99 + rng.below(500_000),
            "currency": rng.pick(CURRENCIES),
            "quantity": 1 + rng.below(250),
            "tags": tags,
            "created_at_ms": EPOCH_2024_MS + rng.below(63_072_000_000),
            "active": rng.below(4) != 0,
        })
    return out


def points(request_id, items):
    """The time-series points of a request: dicts with the protobuf field names."""
    rng = SplitMix64(fnv1a(FNV_OFFSET, request_id.encode()))
    series = [rng.next() & MAX_SAFE_ID for _ in range(1 + rng.below(4))]
    start_ms = EPOCH_2024_MS + rng.below(63_072_000_000)
    n = len(series)
    out = []
    for i in range(items):
        value = rng.unit() * 1000.0
        below, above = rng.unit() * 50.0, rng.unit() * 50.0
        count = 1 + rng.below(600)
        out.append({
            "series_id": series[i % n],
            "timestamp_ms": start_ms + (i // n) * 10_000,
            "value": value,
            "min": value - below,
            "max": value + above,
            "sum": value * float(count),
            "count": count,
        })
    return out


def upload_body(request_id, length):
    """`length` opaque bytes of upload for `request_id` (crates/payload's `upload_body`)."""
    rng = SplitMix64(fnv1a(FNV_OFFSET ^ 0x5BD1E995, request_id.encode()))
    chunks = bytearray()
    while len(chunks) < length:
        chunks += rng.next().to_bytes(8, "little")
    return bytes(chunks[:length])


class Invalid(Exception):
    """A request refused for its content (400, INVALID_ARGUMENT) or, with
    too_large, for its size (413, RESOURCE_EXHAUSTED)."""

    def __init__(self, reason, too_large=False):
        super().__init__(reason)
        self.reason = reason
        self.too_large = too_large


def validate(request_id, items, body_len, max_items=MAX_ITEMS, max_body_bytes=MAX_BODY_BYTES):
    """crates/payload's `validate`: the same checks, the same reasons."""
    if not request_id:
        raise Invalid("requestId must not be empty")
    if len(request_id.encode()) > MAX_REQUEST_ID_BYTES:
        raise Invalid(f"requestId is {len(request_id.encode())} bytes; the limit is {MAX_REQUEST_ID_BYTES}")
    if items > max_items:
        raise Invalid(f"items is {items}; the limit is {max_items} (start the service with a larger --max-items)")
    if body_len > max_body_bytes:
        raise Invalid(f"body is {body_len} bytes; the limit is {max_body_bytes}", too_large=True)


def parse_fetch_json(data):
    """A `FetchRequest` from its JSON form: (request_id, items, body, shape)."""
    if not isinstance(data, dict):
        raise Invalid("malformed JSON request: the body must be a JSON object")
    request_id, items = data.get("requestId"), data.get("items")
    if not isinstance(request_id, str):
        raise Invalid("malformed JSON request: field requestId is missing or not a string")
    if not isinstance(items, int) or isinstance(items, bool) or not 0 <= items <= 0xFFFFFFFF:
        raise Invalid("malformed JSON request: field items is missing or not a 32-bit unsigned integer")
    shape = data.get("shape", "order")
    if shape not in ("order", "timeseries"):
        raise Invalid(f"malformed JSON request: {shape!r} is not a shape; use order or timeseries")
    try:
        body = base64.b64decode(data.get("body", ""), validate=True)
    except (ValueError, TypeError):
        raise Invalid("malformed JSON request: body is not standard base64") from None
    return request_id, items, body, shape


def rfc3339_millis(ms):
    t = datetime.datetime.fromtimestamp(ms // 1000, tz=datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ms % 1000:03d}Z"


def parse_rfc3339_millis(text):
    t = datetime.datetime.strptime(text[:19], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=datetime.timezone.utc)
    fraction = text[19:].rstrip("Z").lstrip(".")
    return int(t.timestamp()) * 1000 + int((fraction + "000")[:3] or 0)


def record_json(r):
    return {
        "id": r["id"], "sku": r["sku"], "name": r["name"], "email": r["email"], "priceCents": r["price_cents"],
        "currency": r["currency"], "quantity": r["quantity"], "tags": r["tags"],
        "createdAt": rfc3339_millis(r["created_at_ms"]), "active": r["active"],
    }


def point_json(p):
    return {
        "seriesId": p["series_id"], "timestampMs": p["timestamp_ms"], "value": p["value"], "min": p["min"],
        "max": p["max"], "sum": p["sum"], "count": p["count"],
    }


def answer_json(request_id, recs, pts):
    """A `FetchResponse`'s JSON form: an empty list is left out, as serde does."""
    out = {"requestId": request_id}
    if recs:
        out["records"] = recs
    if pts:
        out["points"] = pts
    return out


def record_pb(pb2, r):
    ms = r["created_at_ms"]
    rec = pb2.Record(id=r["id"], sku=r["sku"], name=r["name"], email=r["email"], price_cents=r["price_cents"],
                     currency=r["currency"], quantity=r["quantity"], tags=r["tags"], active=r["active"])
    rec.created_at.seconds = ms // 1000
    rec.created_at.nanos = (ms % 1000) * 1_000_000
    return rec


def record_from_pb(rec):
    """A protobuf `Record` in its JSON form, as the caller forwards it."""
    ms = rec.created_at.seconds * 1000 + rec.created_at.nanos // 1_000_000
    return {
        "id": rec.id, "sku": rec.sku, "name": rec.name, "email": rec.email, "priceCents": rec.price_cents,
        "currency": rec.currency, "quantity": rec.quantity, "tags": list(rec.tags),
        "createdAt": rfc3339_millis(ms), "active": rec.active,
    }


def point_from_pb(p):
    return {
        "seriesId": p.series_id, "timestampMs": p.timestamp_ms, "value": p.value, "min": p.min, "max": p.max,
        "sum": p.sum, "count": p.count,
    }
