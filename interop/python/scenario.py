"""confluent-kafka (Python, librdkafka inside) against Sluice.

The same script as interop/go and interop/java; prints the result lines
interop/driver reads. Set INTEROP_DEBUG=protocol,broker to get librdkafka's
protocol trace on stderr when chasing a failure.
"""

import os
import sys
import threading
import time
import traceback

import confluent_kafka
from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import interop_cluster  # noqa: E402
import interop_report  # noqa: E402
from interop_cluster import PARTITIONS, PER_PHASE, ask_driver  # noqa: E402
from interop_report import check, report  # noqa: E402

BOOTSTRAP = os.environ.get("SLUICE_BOOTSTRAP", "127.0.0.1:9092")
DEBUG = os.environ.get("INTEROP_DEBUG")
NAME = "confluent-kafka"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_PARTITIONS, GROUP_PARTITIONS = 3, 4
CODEC_RECORDS, GROUP_RECORDS = 120, 100
REJOIN_WAIT = 4
# Commit errors that mean "the group moved on", not a broken broker.
REBALANCING = {
    confluent_kafka.KafkaError.REBALANCE_IN_PROGRESS,
    confluent_kafka.KafkaError.ILLEGAL_GENERATION,
    confluent_kafka.KafkaError.UNKNOWN_MEMBER_ID,
    confluent_kafka.KafkaError._ASSIGNMENT_LOST,
}  # seconds for a restarted member to join before the rest of phase 2

def conf(**extra):
    c = {"bootstrap.servers": BOOTSTRAP}
    if DEBUG:
        c["debug"] = DEBUG
    c.update(extra)
    return c


class Rec:
    __slots__ = ("key", "value", "headers", "ts", "partition", "offset")

    def __init__(self, key, value, headers, ts, partition=-1, offset=-1):
        self.key, self.value, self.headers, self.ts = key, value, headers, ts
        self.partition, self.offset = partition, offset

    def id(self):
        return self.value.split(b"|", 1)[0].decode()


def make_records(tag, n, t0):
    payload = "sluice interop payload " * 8
    return [
        Rec(
            f"key-{i % 13:02d}".encode(),
            f"{tag}-{i:05d}|{payload}".encode(),
            [("seq", str(i).encode()), ("tag", tag.encode())],
            t0 + i,
        )
        for i in range(n)
    ]


def from_msg(m):
    return Rec(m.key(), m.value(), list(m.headers() or []), m.timestamp()[1], m.partition(), m.offset())


def verify_exact(sent, got):
    by_id = {r.id(): (i, r) for i, r in enumerate(sent)}
    seen, last, key_part, problems = set(), {}, {}, []
    for g in got:
        i, want = by_id.get(g.id(), (None, None))
        if want is None:
            problems.append(f"unexpected record {g.id()} at {g.partition}/{g.offset}")
            continue
        if g.id() in seen:
            problems.append(f"record {g.id()} read twice")
        seen.add(g.id())
        if g.key != want.key:
            problems.append(f"record {g.id()}: key {g.key!r}, want {want.key!r}")
        if g.value != want.value:
            problems.append(f"record {g.id()}: value differs")
        if g.headers != want.headers:
            problems.append(f"record {g.id()}: headers {g.headers}, want {want.headers}")
        if g.ts != want.ts:
            problems.append(f"record {g.id()}: timestamp {g.ts}, want {want.ts}")
        if want.partition >= 0 and (g.partition, g.offset) != (want.partition, want.offset):
            problems.append(
                f"record {g.id()} read at {g.partition}/{g.offset}, producer was told {want.partition}/{want.offset}"
            )
        if key_part.setdefault(g.key, g.partition) != g.partition:
            problems.append(f"key {g.key!r} in partitions {key_part[g.key]} and {g.partition}")
        if g.partition in last and i < last[g.partition]:
            problems.append(f"partition {g.partition}: record {g.id()} read after a later-produced one")
        last[g.partition] = i
    if len(got) != len(sent) or len(seen) != len(sent):
        problems.append(f"read {len(got)} records ({len(seen)} distinct), produced {len(sent)}")
    if problems:
        raise AssertionError("; ".join(problems[:5]))


def produce(topic, codec, idempotent, recs):
    p = Producer(
        conf(**{"acks": "all", "compression.type": codec, "enable.idempotence": idempotent, "linger.ms": 5})
    )
    errors = []

    def delivered(err, msg, rec):
        if err is not None:
            errors.append(f"{rec.id()}: {err}")
        else:
            rec.partition, rec.offset = msg.partition(), msg.offset()

    for r in recs:
        p.produce(topic, key=r.key, value=r.value, headers=r.headers, timestamp=r.ts,
                  on_delivery=lambda err, msg, r=r: delivered(err, msg, r))
        p.poll(0)
    left = p.flush(30)
    if left:
        raise AssertionError(f"{left} records not delivered within 30s")
    if errors:
        raise AssertionError(f"{len(errors)} delivery errors, first: {errors[0]}")


def consume(topic, n):
    c = Consumer(conf(**{"group.id": f"{topic}-reader", "enable.auto.commit": False, "check.crcs": True}))
    try:
        md = c.list_topics(topic, timeout=10)
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in md.topics[topic].partitions])
        out, deadline = [], time.time() + 30
        while len(out) < n and time.time() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                if m.error():
                    raise KafkaException(m.error())
                out.append(from_msg(m))
        if len(out) < n:
            raise AssertionError(f"consumed {len(out)} of {n} records within 30s")
        return out
    finally:
        c.close()


def produce_consume(topic, codec, idempotent, t0):
    sent = make_records(topic, CODEC_RECORDS, t0)
    produce(topic, codec, idempotent, sent)
    verify_exact(sent, consume(topic, len(sent)))
    return sent


class Member(threading.Thread):
    """One group member polling in its own thread; commits synchronously before reporting."""

    def __init__(self, name, group, topic, assignor, got):
        super().__init__(name=name, daemon=True)
        self.group, self.topic, self.assignor, self.got = group, topic, assignor, got
        self.stop, self.count, self.error = False, 0, None
        self.start()

    def run(self):
        settings = {"group.id": self.group, "enable.auto.commit": False, "auto.offset.reset": "earliest"}
        if self.assignor is None:
            # KIP-848: the broker assigns and sets the session timeout.
            settings["group.protocol"] = "consumer"
        else:
            settings.update({"partition.assignment.strategy": self.assignor, "session.timeout.ms": 10000})
        c = Consumer(conf(**settings))
        try:
            c.subscribe([self.topic])
            while not self.stop:
                msgs = c.consume(num_messages=20, timeout=0.2)
                msgs = [m for m in msgs if not self._error(m)]
                if not msgs:
                    continue
                try:
                    c.commit(asynchronous=False)
                except KafkaException as e:
                    if e.args[0].code() not in REBALANCING:
                        raise
                    # The group moved on before the commit: rewind what is still ours to the
                    # committed offsets, so these records come again, from us or the new owner.
                    print(f"{self.name}: commit during a rebalance: {e}", file=sys.stderr)
                    firsts = {}
                    for m in msgs:
                        firsts.setdefault(m.partition(), m.offset())
                    owned = {tp.partition for tp in c.assignment()}
                    for p, off in firsts.items():
                        if p in owned:
                            c.seek(TopicPartition(self.topic, p, off))
                    continue
                for m in msgs:
                    self.count += 1
                    self.got(from_msg(m))
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            self.error = e
        finally:
            c.close()

    def _error(self, m):
        if m.error() is None:
            return False
        if m.error().code() == confluent_kafka.KafkaError._PARTITION_EOF:
            return True
        raise KafkaException(m.error())

    def close(self):
        self.stop = True
        self.join(60)
        if self.error:
            raise AssertionError(f"{self.name} failed: {self.error}")


def await_phase(counts, prefix, *members):
    deadline = time.time() + 90
    while True:
        n = sum(1 for k in list(counts) if k.startswith(prefix))
        if n == GROUP_RECORDS:
            return
        for m in members:
            if m.error:
                raise AssertionError(f"{m.name} failed: {m.error}")
        if time.time() > deadline:
            raise AssertionError(f"only {n} of {GROUP_RECORDS} records of {prefix} consumed within 90s")
        time.sleep(0.05)


def group_scenario(topic, group, assignor, t0):
    counts, redelivered = {}, []
    phase = [f"{topic}-p1"]
    lock = threading.Lock()

    def got(r):
        with lock:
            counts[r.id()] = counts.get(r.id(), 0) + 1
            if not r.id().startswith(phase[0]):
                redelivered.append(f"{r.id()} at {r.partition}/{r.offset}")

    produce(topic, "none", False, make_records(f"{topic}-p1", GROUP_RECORDS, t0))
    a = Member(f"{group}-a", group, topic, assignor, got)
    b = Member(f"{group}-b", group, topic, assignor, got)
    try:
        await_phase(counts, f"{topic}-p1", a, b)
        split1 = f"phase 1 split {a.count}/{b.count}"
        b_before = b.count
        a.close()
        phase[0] = f"{topic}-p2"
        # Half of phase 2 before the restarted member joins (the survivor takes over the
        # leaver's partitions from their committed offsets), half once it has had time to
        # get partitions of its own (it resumes from the survivor's commits).
        p2 = make_records(f"{topic}-p2", GROUP_RECORDS, t0 + 1000)
        produce(topic, "none", False, p2[:GROUP_RECORDS // 2])
        a2 = Member(f"{group}-a2", group, topic, assignor, got)
        try:
            time.sleep(REJOIN_WAIT)
            produce(topic, "none", False, p2[GROUP_RECORDS // 2:])
            await_phase(counts, f"{topic}-p2", a2, b)
            time.sleep(0.5)
        finally:
            a2.close()
        if redelivered:
            raise AssertionError(
                f"did not resume from the committed offsets: {len(redelivered)} phase-1 records delivered "
                f"again after restart, e.g. {redelivered[0]}")
        dups = sum(1 for n in counts.values() if n > 1)
        if dups:
            raise AssertionError(f"{dups} records delivered twice though every delivery was committed first")
        how = assignor if assignor is not None else "group.protocol=consumer"
        return f"{how}: {split1}; phase 2 split {a2.count}/{b.count - b_before} after restart"
    finally:
        a.stop = True
        b.close()


def check_offsets(admin, topic, sent, t0):
    want_latest, by_part = {}, {}
    for r in sent:
        want_latest[r.partition] = max(want_latest.get(r.partition, 0), r.offset + 1)
        by_part.setdefault(r.partition, []).append(r)

    def listed(specs):
        futs = admin.list_offsets(specs, request_timeout=15)
        return {tp.partition: f.result().offset for tp, f in futs.items()}

    tps = [TopicPartition(topic, p) for p in range(CODEC_PARTITIONS)]
    earliest = listed({tp: OffsetSpec.earliest() for tp in tps})
    latest = listed({tp: OffsetSpec.latest() for tp in tps})
    for p in range(CODEC_PARTITIONS):
        if earliest[p] != 0:
            raise AssertionError(f"partition {p}: earliest {earliest[p]}, want 0")
        if latest[p] != want_latest.get(p, 0):
            raise AssertionError(f"partition {p}: latest {latest[p]}, want {want_latest.get(p, 0)}")
    for p, rs in sorted(by_part.items()):
        mid = rs[len(rs) // 2]
        for ts, want in ((t0 - 3600_000, rs[0].offset), (mid.ts, mid.offset)):
            got = listed({TopicPartition(topic, p): OffsetSpec.for_timestamp(ts)})[p]
            if got != want:
                raise AssertionError(f"partition {p} by time {ts}: offset {got}, want {want}")
    return f"AdminClient.list_offsets earliest, latest and by-time of {CODEC_PARTITIONS} partitions"


def describe(admin, topic, key):
    res = ConfigResource(ResourceType.TOPIC, topic)
    entries = admin.describe_configs([res], request_timeout=15)[res].result()
    return entries.get(key)


TXN_PARTITIONS, TXN_RECORDS = 3, 30


def transactions(admin, topic):
    """Commits one transaction, aborts another, commits an END per
    partition; read_committed must read exactly the committed values."""
    for f in admin.create_topics([NewTopic(topic, TXN_PARTITIONS, 1)], request_timeout=15).values():
        f.result()
    p = Producer(conf(**{"transactional.id": f"{topic}-id", "acks": "all"}))
    p.init_transactions(30)
    want = set()
    for prefix, commit in (("c", True), ("a", False)):
        p.begin_transaction()
        for i in range(TXN_RECORDS):
            p.produce(topic, value=f"{prefix}-{i}".encode(), partition=i % TXN_PARTITIONS)
            if commit:
                want.add(f"{prefix}-{i}")
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    p.begin_transaction()
    for part in range(TXN_PARTITIONS):
        p.produce(topic, value=b"END", partition=part)
    p.commit_transaction(30)
    c = Consumer(conf(**{"group.id": f"{topic}-reader", "enable.auto.commit": False,
                         "isolation.level": "read_committed"}))
    try:
        c.assign([TopicPartition(topic, part, OFFSET_BEGINNING) for part in range(TXN_PARTITIONS)])
        got, ended, deadline = [], set(), time.time() + 30
        while len(ended) < TXN_PARTITIONS and time.time() < deadline:
            for m in c.consume(num_messages=100, timeout=0.5):
                if m.error():
                    raise KafkaException(m.error())
                if m.value() == b"END":
                    ended.add(m.partition())
                else:
                    got.append(m.value().decode())
    finally:
        c.close()
    if len(ended) < TXN_PARTITIONS or sorted(got) != sorted(want):
        raise AssertionError(f"read_committed read {sorted(got)} ({len(ended)} partitions ended), "
                             f"want the {len(want)} committed values")
    return (f"{TXN_RECORDS} committed, {TXN_RECORDS} aborted (unseen) over {TXN_PARTITIONS} partitions; "
            "read_committed read exactly the committed ones")


def main():
    lib = confluent_kafka.libversion()[0]
    print(f"##interop version confluent-kafka {confluent_kafka.__version__} (librdkafka {lib})", flush=True)
    admin = AdminClient(conf())
    t0 = int(time.time() * 1000) - 5 * 60 * 1000

    def topic(s):
        return f"{NAME}-{s}"

    codec_topics = [topic(f"codec-{c}") for c in CODECS + ["idempotent"]]
    group_topics = {"eager": topic("group-eager"), "cooperative": topic("group-cooperative"),
                    "kip848": topic("group-kip848")}

    def create():
        new = [NewTopic(t, CODEC_PARTITIONS, 1) for t in codec_topics] + \
            [NewTopic(t, GROUP_PARTITIONS, 1) for t in group_topics.values()]
        for t, f in admin.create_topics(new, request_timeout=15).items():
            f.result()
        md = admin.list_topics(timeout=10)
        for t in codec_topics + list(group_topics.values()):
            want = GROUP_PARTITIONS if t in group_topics.values() else CODEC_PARTITIONS
            got = len(md.topics[t].partitions) if t in md.topics else 0
            if got != want:
                raise AssertionError(f"metadata of {t}: {got} partitions, created with {want}")
        return f"{len(new)} topics, metadata shows their partitions"

    check("create-topic", create)

    none_sent = []
    for codec in CODECS:
        def step(codec=codec):
            sent = produce_consume(topic(f"codec-{codec}"), codec, False, t0)
            if codec == "none":
                none_sent.extend(sent)
            return f"{len(sent)} records, acks=all, compression {codec}, read back exactly"
        check(f"codec-{codec}", step)
    check("idempotence", lambda: f"{len(produce_consume(topic('codec-idempotent'), 'none', True, t0))} records, "
                                 "enable.idempotence=true, read back exactly")
    for family, assignor in (("eager", "range"), ("cooperative", "cooperative-sticky"), ("kip848", None)):
        check(f"group-{family}", lambda family=family, assignor=assignor:
              group_scenario(group_topics[family], f"{NAME}-{family}", assignor, t0))
    if none_sent:
        check("list-offsets", lambda: check_offsets(admin, topic("codec-none"), none_sent, t0))
    else:
        report("fail", "list-offsets", "not run: the uncompressed produce step failed")

    def describe_step():
        e = describe(admin, topic("codec-none"), "retention.ms")
        if e is None:
            raise AssertionError("retention.ms missing from DescribeConfigs")
        return f"retention.ms={e.value} source={e.source}"

    def alter_step():
        v = "86400000"
        res = ConfigResource(ResourceType.TOPIC, topic("codec-none"), incremental_configs=[
            ConfigEntry("retention.ms", v, incremental_operation=AlterConfigOpType.SET)])
        for f in admin.incremental_alter_configs([res], request_timeout=15).values():
            f.result()
        e = describe(admin, topic("codec-none"), "retention.ms")
        if e is None or e.value != v:
            raise AssertionError(f"after altering retention.ms to {v}, DescribeConfigs says {e}")
        return f"incremental_alter_configs retention.ms={v} read back"

    check("describe-config", describe_step)
    check("alter-config", alter_step)
    check("transactions", lambda: transactions(admin, topic("txn")))
    return 1 if interop_report.failed else 0


def cluster_main():
    """The cluster scenario: an RF=3 topic with min.insync.replicas=2, one group member
    consuming what an idempotent acks=all producer writes, before, while and after the
    driver restarts the group's coordinator (SIGTERM)."""
    lib = confluent_kafka.libversion()[0]
    print(f"##interop version confluent-kafka {confluent_kafka.__version__} (librdkafka {lib})", flush=True)
    admin = AdminClient(conf())
    t, group = f"{NAME}-rf3", f"{NAME}-rf3-group"

    def create():
        for f in admin.create_topics([NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"})],
                                     request_timeout=15).values():
            f.result()
        deadline, last = time.time() + 30, None
        while time.time() < deadline:
            parts = admin.list_topics(t, timeout=10).topics[t].partitions.values()
            last = [(p.id, p.leader, p.replicas, p.isrs) for p in parts]
            if len(parts) == PARTITIONS and all(
                    len(set(p.replicas)) == 3 and set(p.isrs) == set(p.replicas) and p.leader in p.replicas
                    for p in parts):
                p0 = min(parts, key=lambda p: p.id)
                return (f"{PARTITIONS} partitions, replicas {p0.replicas}, ISR {p0.isrs}, "
                        f"leaders on {len({p.leader for p in parts})} brokers")
            time.sleep(0.2)
        raise AssertionError(f"not three in-sync replicas per partition: {last}")

    if not check("rf3-topic", create):
        return 1
    deliveries, lock = [], threading.Lock()

    def got(r):
        with lock:
            deliveries.append((r.id(), r.partition))

    member = Member("member", group, t, "range", got)
    producer = Producer(conf(**{"acks": "all", "enable.idempotence": True, "linger.ms": 5}))

    def phase(tag):
        errors = []
        for r in make_records(f"{t}-{tag}", PER_PHASE, int(time.time() * 1000)):
            producer.produce(t, key=r.key, value=r.value, headers=r.headers, timestamp=r.ts,
                             on_delivery=lambda err, msg: err and errors.append(str(err)))
            producer.poll(0)
        left = producer.flush(30)
        if left or errors:
            raise AssertionError(f"{left} records undelivered after 30s, {len(errors)} delivery errors {errors[:1]}")
        deadline = time.time() + 45
        while True:
            with lock:
                n = sum(1 for rid, _ in deliveries if rid.startswith(f"{t}-{tag}-"))
            if n >= PER_PHASE:
                return PER_PHASE
            if member.error:
                raise AssertionError(f"member failed: {member.error}")
            if time.time() > deadline:
                raise AssertionError(f"consumed {n} of {PER_PHASE} records of {tag} within 45s")
            time.sleep(0.05)

    try:
        if not check("acks-all", lambda: f"{phase('p1')} records, acks=all, idempotent, consumed by the group member"):
            return 1
        if not check("broker-down", lambda: f"{ask_driver('stop ' + group)}: {phase('p2')} more records, acks=all, "
                                            "idempotent, consumed by the same member"):
            return 1

        def back():
            started = ask_driver("start")
            n = phase("p3")
            time.sleep(0.5)  # late duplicates
            with lock:
                interop_cluster.exactly_once_in_order(list(deliveries), t, 3 * PER_PHASE)
            return f"{started}: {n} more records; all {3 * PER_PHASE} consumed exactly once, in produce order per partition"

        check("broker-back", back)
    finally:
        member.close()
    return 1 if interop_report.failed else 0


if __name__ == "__main__":
    sys.exit(cluster_main() if sys.argv[1:] == ["cluster"] else main())
