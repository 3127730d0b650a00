"""confluent-kafka (librdkafka) against Sluice's secure listeners.

The driver (interop/driver/security.go) gives the single broker a SASL_SSL
listener (SCRAM-SHA-512) and an SSL listener that requires client
certificates, and passes SLUICE_SASL_SSL_BOOTSTRAP, SLUICE_MTLS_BOOTSTRAP and
SLUICE_TLS_DIR (ca.pem, and client.pem holding the client's key and
certificate). The scenario makes its SCRAM user with AdminClient on the
PLAINTEXT listener, moves records over both secure listeners, and checks
that a wrong password, a missing certificate and a deleted user get the
right error and no record. Prints the result lines interop/driver reads.
"""

import os
import sys
import time

import confluent_kafka
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (
    AdminClient,
    NewTopic,
    OffsetSpec,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import interop_report  # noqa: E402
from interop_report import check, report  # noqa: E402

PLAIN = os.environ.get("SLUICE_BOOTSTRAP", "127.0.0.1:9092")
SASL_SSL = os.environ.get("SLUICE_SASL_SSL_BOOTSTRAP")
MTLS = os.environ.get("SLUICE_MTLS_BOOTSTRAP")
TLS_DIR = os.environ.get("SLUICE_TLS_DIR")
DEBUG = os.environ.get("INTEROP_DEBUG")
NAME = "confluent-kafka"
USER, PASSWORD = f"{NAME}-user", f"{NAME}-secret"
RECORDS, PARTITIONS, ITERATIONS = 50, 3, 8192
# How long a refused client is given to deliver anything (or say why not).
REFUSED_WAIT = 15


def conf(bootstrap, **extra):
    c = {"bootstrap.servers": bootstrap}
    if DEBUG:
        c["debug"] = DEBUG
    c.update(extra)
    return c


def scram(password):
    return conf(SASL_SSL, **{"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                             "sasl.username": USER, "sasl.password": password,
                             "ssl.ca.location": os.path.join(TLS_DIR, "ca.pem")})


def mutual_tls(with_cert):
    c = conf(MTLS, **{"security.protocol": "SSL", "ssl.ca.location": os.path.join(TLS_DIR, "ca.pem")})
    if with_cert:
        pem = os.path.join(TLS_DIR, "client.pem")  # key, certificate and CA in one file
        c.update({"ssl.certificate.location": pem, "ssl.key.location": pem})
    return c


def round_trip(c, topic):
    """Creates topic through c, produces RECORDS with acks=all, consumes them in a group, exactly."""
    admin = AdminClient(c)
    for f in admin.create_topics([NewTopic(topic, PARTITIONS, 1)], request_timeout=15).values():
        f.result()
    md = admin.list_topics(topic, timeout=10)
    if len(md.topics[topic].partitions) != PARTITIONS:
        raise AssertionError(f"metadata of {topic}: {len(md.topics[topic].partitions)} partitions")
    p = Producer(dict(c, **{"acks": "all", "linger.ms": 5}))
    told, errors = {}, []

    def delivered(err, msg):
        if err is not None:
            errors.append(str(err))
        else:
            told[msg.value()] = (msg.partition(), msg.offset())

    sent = [(f"key-{i % 13:02d}".encode(), f"{topic}-{i:05d}".encode()) for i in range(RECORDS)]
    for k, v in sent:
        p.produce(topic, key=k, value=v, on_delivery=delivered)
        p.poll(0)
    left = p.flush(30)
    if left or errors:
        raise AssertionError(f"{left} records undelivered after 30s, {len(errors)} delivery errors {errors[:1]}")
    cons = Consumer(dict(c, **{"group.id": f"{topic}-group", "auto.offset.reset": "earliest",
                               "enable.auto.commit": False}))
    got = []
    try:
        cons.subscribe([topic])
        deadline = time.time() + 30
        while len(got) < RECORDS and time.time() < deadline:
            msgs = cons.consume(num_messages=100, timeout=0.5)
            for m in msgs:
                if m.error():
                    raise KafkaException(m.error())
                got.append((m.key(), m.value(), m.partition(), m.offset()))
            if msgs:
                cons.commit(asynchronous=False)
    finally:
        cons.close()
    want = {v: k for k, v in sent}
    last, problems = {}, []
    for k, v, part, off in got:
        if want.get(v) != k or told.get(v) != (part, off):
            problems.append(f"{v!r} with key {k!r} at {part}/{off}, producer was told {told.get(v)}")
        if off <= last.get(part, -1):
            problems.append(f"partition {part}: offset {off} after {last[part]}")
        last[part] = off
    if len(got) != RECORDS or len({g[1] for g in got}) != RECORDS:
        problems.append(f"consumed {len(got)} records ({len({g[1] for g in got})} distinct), produced {RECORDS}")
    if problems:
        raise AssertionError("; ".join(problems[:5]))
    return f"topic of {PARTITIONS} partitions created, {RECORDS} records produced (acks=all) and consumed in a group, exactly"


def auth_error(e):
    return e.code() == KafkaError._AUTHENTICATION


def refused(c, topic):
    """A client with credentials the broker refuses: its producer and its consumer are told
    of the authentication failure, and nothing is written or read."""
    seen = []
    c = dict(c, error_cb=seen.append)
    p = Producer(dict(c, **{"acks": "all", "message.timeout.ms": REFUSED_WAIT * 1000}))
    delivered = []
    for i in range(5):
        p.produce(topic, value=f"{topic}-refused-{i}".encode(),
                  on_delivery=lambda err, msg: err is None and delivered.append(msg.offset()))
    # Poll until librdkafka reports the failure (or the wait ends), then drop what is queued.
    deadline = time.time() + REFUSED_WAIT
    while time.time() < deadline and not any(auth_error(e) for e in seen):
        p.poll(0.2)
    p.purge()
    p.flush(5)
    if delivered:
        raise AssertionError(f"the producer was served: {len(delivered)} records delivered")
    perr = next((e for e in seen if auth_error(e)), None)
    if perr is None:
        raise AssertionError(f"the producer was not told of the authentication failure: {seen[:3]}")
    seen.clear()
    cons = Consumer(dict(c, **{"group.id": f"{topic}-refused", "auto.offset.reset": "earliest"}))
    got = 0
    try:
        cons.subscribe([topic])
        deadline, told_at = time.time() + REFUSED_WAIT, None
        while time.time() < deadline and (told_at is None or time.time() < told_at + 3):
            for m in cons.consume(num_messages=100, timeout=0.5):
                if m.error():
                    seen.append(m.error())
                else:
                    got += 1
            if told_at is None and any(auth_error(e) for e in seen):
                told_at = time.time()
    finally:
        cons.close()
    if got:
        raise AssertionError(f"the consumer read {got} records")
    cerr = next((e for e in seen if auth_error(e)), None)
    if cerr is None:
        raise AssertionError(f"the consumer read nothing, but was not told of the authentication failure: {seen[:3]}")
    return f"producer: {perr.str()}; consumer: no record, {cerr.str()}"


def expect_records(topic, n):
    """Through the PLAINTEXT listener: topic holds exactly n records (the refused producer wrote none)."""
    admin = AdminClient(conf(PLAIN))
    tps = [TopicPartition(topic, p) for p in range(PARTITIONS)]
    futs = admin.list_offsets({tp: OffsetSpec.latest() for tp in tps}, request_timeout=15)
    total = sum(f.result().offset for f in futs.values())
    if total != n:
        raise AssertionError(f"{topic} holds {total} records, want the {n} produced with the right password")


def no_certificate(topic):
    """Without a certificate on the mutual-TLS listener: told so (the TLS alert), no record."""
    seen = []
    c = dict(mutual_tls(False), error_cb=seen.append)
    cons = Consumer(dict(c, **{"group.id": f"{topic}-no-cert", "auto.offset.reset": "earliest"}))
    got, told = 0, None
    try:
        cons.subscribe([topic])
        deadline, told_at = time.time() + REFUSED_WAIT, None
        while time.time() < deadline and (told_at is None or time.time() < told_at + 3):
            for m in cons.consume(num_messages=100, timeout=0.5):
                if m.error():
                    seen.append(m.error())
                else:
                    got += 1
            told = next((e for e in seen if "certificate" in e.str()), None)
            if told is not None and told_at is None:
                told_at = time.time()
    finally:
        cons.close()
    if got:
        raise AssertionError(f"a client without a certificate read {got} records")
    if told is None:
        raise AssertionError(f"read nothing, but no error names the certificate: {[e.str() for e in seen[:3]]}")
    return f"consumer: no record, {told.str()}"


def main():
    lib = confluent_kafka.libversion()[0]
    print(f"##interop version confluent-kafka {confluent_kafka.__version__} (librdkafka {lib})", flush=True)
    if not (SASL_SSL and MTLS and TLS_DIR):
        report("fail", "scram-user", "the driver gave no secure listeners")
        return 1
    admin = AdminClient(conf(PLAIN))

    def scram_user():
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, ITERATIONS)
        for f in admin.alter_user_scram_credentials(
                [UserScramCredentialUpsertion(USER, info, PASSWORD.encode())], request_timeout=15).values():
            f.result()
        desc = admin.describe_user_scram_credentials([USER], request_timeout=15)[USER].result()
        infos = [(i.mechanism, i.iterations) for i in desc.scram_credential_infos]
        if infos != [(ScramMechanism.SCRAM_SHA_512, ITERATIONS)]:
            raise AssertionError(f"described {USER} as {infos}")
        return f"{USER} has SCRAM-SHA-512/{ITERATIONS}"

    def wrong_password():
        detail = refused(scram("not-" + PASSWORD), f"{NAME}-sasl-ssl")
        expect_records(f"{NAME}-sasl-ssl", RECORDS)
        return detail

    def deleted_user():
        for f in admin.alter_user_scram_credentials(
                [UserScramCredentialDeletion(USER, ScramMechanism.SCRAM_SHA_512)], request_timeout=15).values():
            f.result()
        return "credential deleted; " + refused(scram(PASSWORD), f"{NAME}-sasl-ssl")

    check("scram-user", scram_user)
    check("sasl-ssl", lambda: round_trip(scram(PASSWORD), f"{NAME}-sasl-ssl"))
    check("wrong-password", wrong_password)
    check("mtls", lambda: round_trip(mutual_tls(True), f"{NAME}-mtls"))
    check("mtls-no-cert", lambda: no_certificate(f"{NAME}-mtls"))
    check("deleted-user", deleted_user)
    return 1 if interop_report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
