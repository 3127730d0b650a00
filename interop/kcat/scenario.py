"""kcat (librdkafka's command-line client) against Sluice.

Python standard library only: it runs the kcat binary (Debian package kcat)
and checks its JSON output. kcat has no admin API, so topics are created with
Kafka's own kafka-topics (TopicCommand from interop/java's copied jars), as a
kcat user would. kcat sets no per-record timestamps or per-record headers, so
records carry run-wide headers and the broker-assigned CreateTime is checked
to lie inside the produce window. INTEROP_DEBUG=protocol,broker adds
librdkafka's protocol trace to the log.
"""

import json
import os
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import interop_cluster  # noqa: E402
import interop_report  # noqa: E402
from interop_cluster import PARTITIONS, PER_PHASE, ask_driver  # noqa: E402
from interop_report import check, one_line, report  # noqa: E402

BOOTSTRAP = os.environ.get("SLUICE_BOOTSTRAP", "127.0.0.1:9092")
DEBUG = os.environ.get("INTEROP_DEBUG")
HERE = os.path.dirname(os.path.abspath(__file__))
JAVA_CP = os.path.join(HERE, "..", "java", "target", "classes") + ":" + os.path.join(HERE, "..", "java", "target", "deps", "*")
NAME = "kcat"
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_PARTITIONS, GROUP_PARTITIONS = 3, 4
CODEC_RECORDS, GROUP_RECORDS = 120, 100
REJOIN_WAIT = 4


def kcat_args(*args):
    a = ["kcat", "-b", BOOTSTRAP] + list(args)
    if DEBUG:
        a += ["-d", DEBUG]
    return a


def run(argv, stdin=None, timeout=60):
    sys.stderr.write("$ " + " ".join(argv) + "\n")
    # Never the scenario's own stdin: in the cluster scenario it carries the driver's replies.
    p = subprocess.run(argv, input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=timeout)
    sys.stderr.write(p.stderr)
    if p.returncode != 0:
        raise AssertionError(f"`{' '.join(argv[:6])} …` exited {p.returncode}: {one_line(p.stderr)[-600:]}")
    return p.stdout


def create_topic(topic, partitions, rf=1, *configs):
    out = run(["java", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", JAVA_CP,
               "org.apache.kafka.tools.TopicCommand", "--bootstrap-server", BOOTSTRAP, "--create", "--topic", topic,
               "--partitions", str(partitions), "--replication-factor", str(rf)]
              + [a for c in configs for a in ("--config", c)], timeout=90)
    if f"Created topic {topic}" not in out:
        raise AssertionError(f"kafka-topics --create {topic}: {one_line(out)}")


def partition_count(topic):
    md = json.loads(run(kcat_args("-L", "-t", topic, "-J")))
    for t in md["topics"]:
        if t["topic"] == topic:
            if t.get("error"):
                raise AssertionError(f"metadata of {topic}: {t['error']}")
            return len(t["partitions"])
    raise AssertionError(f"{topic} not in metadata")


def make_lines(tag, n):
    payload = "sluice interop payload " * 8
    return [(f"key-{i % 13:02d}", f"{tag}-{i:05d}|{payload}") for i in range(n)]


def produce(topic, codec, lines, idempotent=False):
    """Produces key:value lines with run-wide headers; returns the (start, end) ms window."""
    start = int(time.time() * 1000)
    run(kcat_args("-P", "-t", topic, "-K", ":", "-z", codec, "-X", "acks=all",
                  "-X", f"enable.idempotence={'true' if idempotent else 'false'}",
                  "-H", f"tag={topic}", "-H", f"codec={codec}"),
        stdin="".join(f"{k}:{v}\n" for k, v in lines))
    return start, int(time.time() * 1000)


def consume(topic):
    out = run(kcat_args("-C", "-t", topic, "-o", "beginning", "-e", "-J", "-q", "-X", "check.crcs=true"))
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def verify(topic, codec, lines, got, window):
    want = {v.split("|", 1)[0]: (i, k, v) for i, (k, v) in enumerate(lines)}
    seen, last, key_part, problems = set(), {}, {}, []
    for m in got:
        rid = m["payload"].split("|", 1)[0]
        if rid not in want:
            problems.append(f"unexpected record {rid} at {m['partition']}/{m['offset']}")
            continue
        i, k, v = want[rid]
        if rid in seen:
            problems.append(f"record {rid} read twice")
        seen.add(rid)
        if m["key"] != k or m["payload"] != v:
            problems.append(f"record {rid}: key or value differs")
        if m["headers"] != ["tag", topic, "codec", codec]:
            problems.append(f"record {rid}: headers {m['headers']}")
        if m["tstype"] != "create" or not window[0] <= m["ts"] <= window[1]:
            problems.append(f"record {rid}: {m['tstype']} timestamp {m['ts']} outside the produce window {window}")
        p = m["partition"]
        if key_part.setdefault(k, p) != p:
            problems.append(f"key {k} in partitions {key_part[k]} and {p}")
        if p in last and (i < last[p][0] or m["offset"] <= last[p][1] or m["ts"] < last[p][2]):
            problems.append(f"partition {p}: record {rid} out of order")
        last[p] = (i, m["offset"], m["ts"])
    if len(got) != len(lines) or len(seen) != len(lines):
        problems.append(f"read {len(got)} records ({len(seen)} distinct), produced {len(lines)}")
    if problems:
        raise AssertionError("; ".join(problems[:5]))


class Member:
    """A `kcat -G` balanced consumer (auto-commit) whose JSON output is read as it comes."""

    def __init__(self, name, group, topic, assignor, got):
        self.name, self.count, self.got = name, 0, got
        self.proc = subprocess.Popen(
            kcat_args("-G", group, "-J", "-u", "-q", "-X", "auto.offset.reset=earliest",
                      "-X", f"partition.assignment.strategy={assignor}",
                      "-X", "auto.commit.interval.ms=100", "-X", "session.timeout.ms=10000", topic),
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for line in self.proc.stdout:
            if line.startswith("{"):
                self.count += 1
                self.got(json.loads(line))

    def exited(self):
        return self.proc.poll()

    def close(self):
        """SIGINT: kcat closes the consumer, which commits and leaves the group."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError(f"{self.name} did not exit within 30s of SIGINT")
        self.reader.join(5)


def await_phase(counts, prefix, *members):
    deadline = time.time() + 90
    while True:
        n = sum(1 for k in list(counts) if k.startswith(prefix))
        if n == GROUP_RECORDS:
            return
        for m in members:
            if m.exited() is not None:
                raise AssertionError(f"{m.name} exited {m.exited()}")
        if time.time() > deadline:
            raise AssertionError(f"only {n} of {GROUP_RECORDS} records of {prefix} consumed within 90s")
        time.sleep(0.05)


def group_scenario(topic, group, assignor):
    counts, redelivered, phase = {}, [], [f"{topic}-p1"]
    lock = threading.Lock()

    def got(m):
        rid = m["payload"].split("|", 1)[0]
        with lock:
            counts[rid] = counts.get(rid, 0) + 1
            if not rid.startswith(phase[0]):
                redelivered.append(f"{rid} at {m['partition']}/{m['offset']}")

    produce(topic, "none", make_lines(f"{topic}-p1", GROUP_RECORDS))
    a = Member(f"{group}-a", group, topic, assignor, got)
    b = Member(f"{group}-b", group, topic, assignor, got)
    try:
        await_phase(counts, f"{topic}-p1", a, b)
        split1 = f"phase 1 split {a.count}/{b.count}"
        b_before = b.count
        a.close()
        phase[0] = f"{topic}-p2"
        p2 = make_lines(f"{topic}-p2", GROUP_RECORDS)
        produce(topic, "none", p2[:GROUP_RECORDS // 2])
        a2 = Member(f"{group}-a2", group, topic, assignor, got)
        try:
            time.sleep(REJOIN_WAIT)
            produce(topic, "none", p2[GROUP_RECORDS // 2:])
            await_phase(counts, f"{topic}-p2", a2, b)
            time.sleep(0.5)
        finally:
            a2.close()
        if redelivered:
            raise AssertionError(f"did not resume from the committed offsets: {len(redelivered)} phase-1 records "
                                 f"delivered again after restart, e.g. {redelivered[0]}")
        dups = sum(1 for n in counts.values() if n > 1)
        if dups:
            raise AssertionError(f"{dups} records delivered twice")
        return f"kcat -G, auto-commit, {assignor}: {split1}; phase 2 split {a2.count}/{b.count - b_before} after restart"
    finally:
        a.close()
        b.close()


def query(topic, partition, ts):
    out = run(kcat_args("-Q", "-t", f"{topic}:{partition}:{ts}"))
    # "<topic> [<partition>] offset <n>"
    parts = out.split()
    if len(parts) < 4 or parts[2] != "offset":
        raise AssertionError(f"kcat -Q {topic}:{partition}:{ts} printed {out!r}")
    return int(parts[3])


def check_offsets(topic, got):
    by_part = {}
    for m in sorted(got, key=lambda m: (m["partition"], m["offset"])):
        by_part.setdefault(m["partition"], []).append(m)
    for p in range(CODEC_PARTITIONS):
        ms = by_part.get(p, [])
        earliest, latest = query(topic, p, -2), query(topic, p, -1)
        want_latest = ms[-1]["offset"] + 1 if ms else 0
        if earliest != 0 or latest != want_latest:
            raise AssertionError(f"partition {p}: earliest {earliest}, latest {latest}; want 0 and {want_latest}")
        if ms:
            mid = ms[len(ms) // 2]
            want = next(m["offset"] for m in ms if m["ts"] >= mid["ts"])
            got_off = query(topic, p, mid["ts"])
            if got_off != want:
                raise AssertionError(f"partition {p} by time {mid['ts']}: offset {got_off}, want {want}")
    return f"kcat -Q earliest (-2), latest (-1) and by time of {CODEC_PARTITIONS} partitions"


def print_version():
    ver = subprocess.run(["kcat", "-V"], stdin=subprocess.DEVNULL, capture_output=True, text=True).stdout
    line = next((l for l in ver.splitlines() if l.startswith("Version")), "Version ?")
    print(f"##interop version kcat {line.split()[1]} (librdkafka {line.split('librdkafka ')[-1].split()[0]})", flush=True)


def main():
    print_version()

    def topic(s):
        return f"{NAME}-{s}"

    codec_topics = [topic(f"codec-{c}") for c in CODECS + ["idempotent"]]
    group_topics = {"eager": topic("group-eager"), "cooperative": topic("group-cooperative")}

    def create():
        for t in codec_topics:
            create_topic(t, CODEC_PARTITIONS)
        for t in group_topics.values():
            create_topic(t, GROUP_PARTITIONS)
        for t in codec_topics + list(group_topics.values()):
            want = GROUP_PARTITIONS if t in group_topics.values() else CODEC_PARTITIONS
            if partition_count(t) != want:
                raise AssertionError(f"kcat -L shows {partition_count(t)} partitions of {t}, created with {want}")
        return f"{len(codec_topics) + 2} topics with kafka-topics (kcat has no admin API), kcat -L shows their partitions"

    check("create-topic", create)

    none_got = []
    for codec in CODECS + ["idempotent"]:
        def step(codec=codec):
            t = topic(f"codec-{codec}")
            real = "none" if codec == "idempotent" else codec
            lines = make_lines(t, CODEC_RECORDS)
            window = produce(t, real, lines, idempotent=codec == "idempotent")
            got = consume(t)
            verify(t, real, lines, got, window)
            if codec == "none":
                none_got.extend(got)
            return f"{len(lines)} records, acks=all{', enable.idempotence=true' if codec == 'idempotent' else ''}, " \
                   f"compression {real}, read back exactly"
        check("idempotence" if codec == "idempotent" else f"codec-{codec}", step)
    for family, assignor in (("eager", "range"), ("cooperative", "cooperative-sticky")):
        check(f"group-{family}", lambda family=family, assignor=assignor:
              group_scenario(group_topics[family], f"{NAME}-{family}", assignor))
    if none_got:
        check("list-offsets", lambda: check_offsets(topic("codec-none"), none_got))
    else:
        report("fail", "list-offsets", "not run: the uncompressed produce step failed")
    report("skip", "describe-config", "kcat has no config API (kafka-configs is covered under Kafka tools)")
    report("skip", "alter-config", "kcat has no config API (kafka-configs is covered under Kafka tools)")
    return 1 if interop_report.failed else 0


def cluster_main():
    """The cluster scenario: an RF=3 topic with min.insync.replicas=2 (created with
    kafka-topics), one `kcat -G` member consuming what idempotent acks=all `kcat -P` runs
    write, before, while and after the driver restarts the group's coordinator (SIGTERM)."""
    print_version()
    t, group = f"{NAME}-rf3", f"{NAME}-rf3-group"

    def create():
        create_topic(t, PARTITIONS, 3, "min.insync.replicas=2")
        deadline, last = time.time() + 30, None
        while time.time() < deadline:
            md = json.loads(run(kcat_args("-L", "-t", t, "-J")))
            parts = next((x["partitions"] for x in md["topics"] if x["topic"] == t), [])
            last = parts
            if len(parts) == PARTITIONS and all(
                    len({r["id"] for r in p["replicas"]}) == 3 and {r["id"] for r in p["isrs"]} == {r["id"] for r in p["replicas"]}
                    and p["leader"] in {r["id"] for r in p["replicas"]} for p in parts):
                p0 = min(parts, key=lambda p: p["partition"])
                return (f"kafka-topics --create --replication-factor 3; kcat -L: {PARTITIONS} partitions, replicas "
                        f"{[r['id'] for r in p0['replicas']]}, ISR {[r['id'] for r in p0['isrs']]}, "
                        f"leaders on {len({p['leader'] for p in parts})} brokers")
            time.sleep(0.2)
        raise AssertionError(f"not three in-sync replicas per partition: {last}")

    if not check("rf3-topic", create):
        return 1
    deliveries, lock = [], threading.Lock()

    def got(m):
        with lock:
            deliveries.append((m["payload"].split("|", 1)[0], m["partition"]))

    member = Member("member", group, t, "range", got)

    def phase(tag):
        produce(t, "none", make_lines(f"{t}-{tag}", PER_PHASE), idempotent=True)
        deadline = time.time() + 45
        while True:
            with lock:
                n = sum(1 for rid, _ in deliveries if rid.startswith(f"{t}-{tag}-"))
            if n >= PER_PHASE:
                return PER_PHASE
            if member.exited() is not None:
                raise AssertionError(f"kcat -G exited {member.exited()}")
            if time.time() > deadline:
                raise AssertionError(f"consumed {n} of {PER_PHASE} records of {tag} within 45s")
            time.sleep(0.05)

    try:
        if not check("acks-all", lambda: f"kcat -P: {phase('p1')} records, acks=all, idempotent, consumed by kcat -G"):
            return 1
        if not check("broker-down", lambda: f"{ask_driver('stop ' + group)}: {phase('p2')} more records, acks=all, "
                                            "idempotent, consumed by the same kcat -G"):
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
