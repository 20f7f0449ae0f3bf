#!/usr/bin/env python3
"""Writes the worked example's data: requests.jsonl and three answer files
(orders-small, -medium, -large: 1, 10 and 50 orders a page), each line one
message in the proto3 JSON mapping. Deterministic: the same files every run.

    python3 examples/shop/make-data.py
"""
import json
import os
import random

HERE = os.path.dirname(os.path.abspath(__file__))
STATUSES = ["ORDER_STATUS_PENDING", "ORDER_STATUS_PAID", "ORDER_STATUS_SHIPPED", "ORDER_STATUS_DELIVERED"]
PRODUCTS = [
    ("KB-ERGO-DE", "Ergonomic keyboard, German layout", 89, 990000000),
    ("MS-WL-02", "Wireless mouse", 24, 500000000),
    ("USB-C-2M", "USB-C cable, 2 m", 9, 990000000),
    ("MON-27-4K", "27-inch 4K monitor", 349, 0),
    ("HD-NC-700", "Noise-cancelling headphones", 199, 950000000),
    ("DOCK-TB4", "Thunderbolt 4 dock", 229, 0),
]
CITIES = [("Berlin", "10115", "DE"), ("Lyon", "69001", "FR"), ("Leeds", "LS1 4AP", "GB"), ("Porto", "4000-322", "PT")]
STREETS = ["Torstraße 12", "Rue de la République 3", "Briggate 81", "Rua das Flores 40"]


def timestamp(rng):
    day = rng.randrange(1, 28)
    return f"2026-11-{day:02d}T{rng.randrange(24):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}Z"


def money(units, nanos):
    m = {"currencyCode": "EUR"}
    if units:
        m["units"] = str(units)
    if nanos:
        m["nanos"] = nanos
    return m


def order(rng, customer):
    items = []
    total = 0
    for sku, title, units, nanos in rng.sample(PRODUCTS, rng.randrange(1, 4)):
        qty = rng.randrange(1, 4)
        items.append({"sku": sku, "title": title, "quantity": qty, "unitPrice": money(units, nanos)})
        total += qty * (units * 10**9 + nanos)
    city, postal, country = rng.choice(CITIES)
    o = {
        "id": str(rng.randrange(10**15, 10**16)),
        "customerId": str(customer),
        "status": rng.choice(STATUSES),
        "items": items,
        "total": money(total // 10**9, total % 10**9),
        "shippingAddress": {"line1": rng.choice(STREETS), "city": city, "postalCode": postal, "country": country},
        "attributes": {"channel": rng.choice(["web", "ios", "android"])},
        "createdAt": timestamp(rng),
        "updatedAt": timestamp(rng),
    }
    if rng.random() < 0.3:
        o["attributes"]["campaign"] = rng.choice(["black-friday", "newsletter-48"])
    return o


def main():
    rng = random.Random(7)
    customers = [rng.randrange(10**9, 10**10) for _ in range(8)]
    with open(os.path.join(HERE, "requests.jsonl"), "w") as f:
        for i, c in enumerate(customers):
            req = {"customerId": str(c), "pageSize": [10, 25, 50][i % 3]}
            if i % 2:
                req["pageToken"] = f"cursor-{rng.randrange(10**8):08d}"
            if i % 4 == 3:
                req["status"] = "ORDER_STATUS_SHIPPED"
            f.write(json.dumps(req, separators=(",", ":"), ensure_ascii=False) + "\n")
    for name, per_page in [("small", 1), ("medium", 10), ("large", 50)]:
        with open(os.path.join(HERE, f"orders-{name}.jsonl"), "w") as f:
            for c in customers:
                page = {"orders": [order(rng, c) for _ in range(per_page)], "totalSize": per_page * 3}
                page["nextPageToken"] = f"cursor-{rng.randrange(10**8):08d}"
                f.write(json.dumps(page, separators=(",", ":"), ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
