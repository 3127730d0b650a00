"""The cluster scenario's shared parts (confluent-kafka, kcat): talking to the
driver, and judging what a group member consumed across a broker restart.

A cluster scenario asks the driver to stop or start a broker by printing
"##interop broker stop <group>" / "##interop broker start" and reads the
driver's one-line reply on stdin (see interop/driver/cluster.go).
"""

import sys

PARTITIONS, PER_PHASE = 3, 100


def ask_driver(req):
    print(f"##interop broker {req}", flush=True)
    reply = sys.stdin.readline().strip()
    if not reply or reply.startswith("error"):
        raise AssertionError(f"driver: {reply or 'no reply'}")
    print(f"driver: {reply}", file=sys.stderr, flush=True)
    return reply


def exactly_once_in_order(deliveries, topic, want):
    """deliveries: (record id, partition) in the order consumed. Every id once,
    and within each partition in produce order (pN-NNNNN sorts that way)."""
    problems, last, seen = [], {}, set()
    for rid, part in deliveries:
        rid = rid[len(topic) + 1:]
        if rid in seen:
            problems.append(f"{rid} delivered twice")
        seen.add(rid)
        if part in last and rid <= last[part]:
            problems.append(f"partition {part}: {rid} after {last[part]}")
        last[part] = rid
    if len(deliveries) != want or len(seen) != want:
        problems.append(f"{len(deliveries)} deliveries of {len(seen)} distinct records, produced {want}")
    if problems:
        raise AssertionError("; ".join(problems[:5]))
