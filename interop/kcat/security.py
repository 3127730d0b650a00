"""kcat (librdkafka's command-line client) against Sluice's secure listeners.

The driver (interop/driver/security.go) gives the single broker a SASL_SSL
listener (SCRAM-SHA-512) and an SSL listener that requires client
certificates. kcat has no admin API, so, as a kcat user would, the SCRAM
user is made with Kafka's kafka-configs and the topics with kafka-topics
(over the same secure listener, with a client properties file); records go
through kcat -P and come back through a kcat -G group consumer. A wrong
password, a missing certificate and a deleted user must get the right
error and no record. Python standard library only.
"""

import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "pylib"))
import interop_report  # noqa: E402
from interop_report import check, one_line, report  # noqa: E402

PLAIN = os.environ.get("SLUICE_BOOTSTRAP", "127.0.0.1:9092")
SASL_SSL = os.environ.get("SLUICE_SASL_SSL_BOOTSTRAP")
MTLS = os.environ.get("SLUICE_MTLS_BOOTSTRAP")
TLS_DIR = os.environ.get("SLUICE_TLS_DIR", "")
DEBUG = os.environ.get("INTEROP_DEBUG")
HERE = os.path.dirname(os.path.abspath(__file__))
JAVA_CP = os.path.join(HERE, "..", "java", "target", "classes") + ":" + os.path.join(HERE, "..", "java", "target", "deps", "*")
NAME = "kcat"
USER, PASSWORD = f"{NAME}-user", f"{NAME}-secret"
RECORDS, PARTITIONS, ITERATIONS = 50, 3, 8192
# How long a refused kcat is given to deliver anything (or say why not).
REFUSED_WAIT = 15
CA = os.path.join(TLS_DIR, "ca.pem")
CLIENT_PEM = os.path.join(TLS_DIR, "client.pem")  # key, certificate and CA in one file


def scram(password):
    """librdkafka properties for the SASL_SSL listener."""
    return {"security.protocol": "SASL_SSL", "sasl.mechanisms": "SCRAM-SHA-512", "sasl.username": USER,
            "sasl.password": password, "ssl.ca.location": CA}


def mutual_tls(with_cert):
    p = {"security.protocol": "SSL", "ssl.ca.location": CA}
    if with_cert:
        p.update({"ssl.certificate.location": CLIENT_PEM, "ssl.key.location": CLIENT_PEM})
    return p


def kcat(bootstrap, props, *args):
    a = ["kcat", "-b", bootstrap]
    for k, v in props.items():
        a += ["-X", f"{k}={v}"]
    a += list(args)
    if DEBUG:
        a += ["-d", DEBUG]
    return a


def redacted(argv):
    return " ".join("sasl.password=…" if a.startswith("sasl.password=") else a for a in argv)


def run_for(argv, stdin=None, timeout=60):
    """Runs argv for at most timeout seconds; returns (exit code or None if it had to be killed, stdout, stderr)."""
    sys.stderr.write("$ " + redacted(argv) + "\n")
    p = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = p.communicate(stdin, timeout=timeout)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
        rc = None
    sys.stderr.write(err)
    return rc, out, err


def run(argv, stdin=None, timeout=60):
    rc, out, err = run_for(argv, stdin, timeout)
    if rc != 0:
        raise AssertionError(f"`{redacted(argv[:8])} …` exited {rc}: {one_line(err)[-600:]}")
    return out


def tool(cls, *args):
    return run(["java", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", JAVA_CP,
                cls] + list(args), timeout=90)


def java_props(bootstrap_props):
    """A client properties file for Kafka's tools equal to a librdkafka property set."""
    lines = ["ssl.truststore.type=PEM", f"ssl.truststore.location={CA}",
             f"security.protocol={bootstrap_props['security.protocol']}"]
    if "sasl.username" in bootstrap_props:
        lines += ["sasl.mechanism=SCRAM-SHA-512",
                  "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                  f'username="{USER}" password="{bootstrap_props["sasl.password"]}";']
    if "ssl.certificate.location" in bootstrap_props:
        lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={CLIENT_PEM}"]
    f = tempfile.NamedTemporaryFile("w", suffix=".properties", delete=False)
    f.write("\n".join(lines) + "\n")
    f.close()
    return f.name


def round_trip(bootstrap, props, topic):
    """kafka-topics creates topic over the secure listener; kcat -P produces RECORDS with acks=all;
    a kcat -G group consumer reads them back, exactly."""
    out = tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", bootstrap, "--command-config",
               java_props(props), "--create", "--topic", topic, "--partitions", str(PARTITIONS),
               "--replication-factor", "1")
    if f"Created topic {topic}" not in out:
        raise AssertionError(f"kafka-topics --create {topic}: {one_line(out)}")
    lines = [(f"key-{i % 13:02d}", f"{topic}-{i:05d}") for i in range(RECORDS)]
    run(kcat(bootstrap, props, "-P", "-t", topic, "-K", ":", "-X", "acks=all"),
        stdin="".join(f"{k}:{v}\n" for k, v in lines))
    # -e: exit once every assigned partition reached its end.
    out = run(kcat(bootstrap, props, "-G", f"{topic}-group", "-J", "-q", "-e",
                   "-X", "auto.offset.reset=earliest", topic), timeout=60)
    got = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    want, last, problems = dict((v, k) for k, v in lines), {}, []
    for m in got:
        if want.get(m["payload"]) != m["key"]:
            problems.append(f"unexpected record {m['key']}:{m['payload']}")
        if m["offset"] <= last.get(m["partition"], -1):
            problems.append(f"partition {m['partition']}: offset {m['offset']} after {last[m['partition']]}")
        last[m["partition"]] = m["offset"]
    distinct = len({m["payload"] for m in got})
    if len(got) != RECORDS or distinct != RECORDS:
        problems.append(f"consumed {len(got)} records ({distinct} distinct), produced {RECORDS}")
    if problems:
        raise AssertionError("; ".join(problems[:5]))
    return (f"kafka-topics --command-config created {topic}; kcat -P produced {RECORDS} records (acks=all), "
            f"kcat -G read them back exactly")


def told(err, phrase):
    """The first librdkafka error line of err containing phrase."""
    return next((one_line(l) for l in err.splitlines() if phrase in l), None)


def refused(props, topic):
    """kcat with credentials the broker refuses: its producer and consumer are told of the
    authentication failure, and nothing is written or read."""
    rc, _, err = run_for(kcat(SASL_SSL, props, "-P", "-t", topic, "-X", "acks=all",
                              "-X", f"message.timeout.ms={REFUSED_WAIT * 1000}"),
                         stdin="".join(f"refused-{i}\n" for i in range(5)), timeout=REFUSED_WAIT + 10)
    if rc == 0:
        raise AssertionError("kcat -P exited 0: the producer was served")
    perr = told(err, "SASL authentication error")
    if perr is None:
        raise AssertionError(f"kcat -P failed (exit {rc}), but not with the SASL authentication error: {one_line(err)[-400:]}")
    # No -q: it silences the librdkafka log lines that say why.
    rc, out, err = run_for(kcat(SASL_SSL, props, "-C", "-t", topic, "-o", "beginning", "-e", "-J"),
                           timeout=REFUSED_WAIT)
    got = [line for line in out.splitlines() if line.startswith("{")]
    if got:
        raise AssertionError(f"kcat -C read {len(got)} records")
    cerr = told(err, "SASL authentication error")
    if cerr is None:
        raise AssertionError(f"kcat -C read nothing, but was not told of the authentication failure: {one_line(err)[-400:]}")
    return f"kcat -P exited {rc}: {perr[:200]}; kcat -C: no record, {cerr[:200]}"


def expect_records(topic, n):
    """Through the PLAINTEXT listener: topic holds exactly n records (the refused producer wrote none)."""
    total = 0
    for p in range(PARTITIONS):
        out = run(kcat(PLAIN, {}, "-Q", "-t", f"{topic}:{p}:-1"))
        parts = out.split()
        if len(parts) < 4 or parts[2] != "offset":
            raise AssertionError(f"kcat -Q {topic}:{p}:-1 printed {out!r}")
        total += int(parts[3])
    if total != n:
        raise AssertionError(f"{topic} holds {total} records, want the {n} produced with the right password")


def no_certificate(topic):
    rc, out, err = run_for(kcat(MTLS, mutual_tls(False), "-C", "-t", topic, "-o", "beginning", "-e", "-J"),
                           timeout=REFUSED_WAIT)
    got = [line for line in out.splitlines() if line.startswith("{")]
    if got:
        raise AssertionError(f"kcat -C without a certificate read {len(got)} records")
    cert = told(err, "certificate")
    if cert is None:
        raise AssertionError(f"kcat -C read nothing, but no error names the certificate: {one_line(err)[-400:]}")
    return f"kcat -C: no record, {cert[:300]}"


# librdkafka before 2.6.1 (Debian bookworm's kcat has 2.0.2) repeats its client nonce in the
# SCRAM client-final message (confluentinc/librdkafka#4895). Kafka 4.4, like Sluice, holds the
# nonce to RFC 5802 (String.equals in ScramSaslServer) and refuses it.
SCRAM_NONCE_BUG = ("this librdkafka repeats the client nonce in SCRAM's client-final message "
                   "(librdkafka#4895, fixed in 2.6.1), which Kafka 4.4 refuses too")


class ClientBug(Exception):
    """A step the client cannot pass against any Kafka 4 broker; reported as a skip."""


skipped = []


def check_or_skip(cap, fn):
    """check(), except that a ClientBug is reported as a skip."""
    try:
        detail = fn()
    except ClientBug as e:
        skipped.append(cap)
        report("skip", cap, str(e))
        return
    except Exception as e:  # noqa: BLE001 - every failure is reported
        traceback.print_exc()
        report("fail", cap, f"{type(e).__name__}: {e}")
        return
    report("pass", cap, detail)


def librdkafka_version():
    line = next(line for line in run(["kcat", "-V"]).splitlines() if line.startswith("Version"))
    v = line.split("librdkafka ")[-1].split()[0]
    return tuple(int(x) for x in v.split(".")[:3] if x.isdigit())


def configs(*args):
    return tool("org.apache.kafka.tools.ConfigCommand", "--bootstrap-server", PLAIN, "--entity-type", "users",
                "--entity-name", USER, *args)


def main():
    line = next(line for line in run(["kcat", "-V"]).splitlines() if line.startswith("Version"))
    print(f"##interop version kcat {line.split()[1]} (librdkafka {line.split('librdkafka ')[-1].split()[0]})", flush=True)
    if not (SASL_SSL and MTLS and TLS_DIR):
        report("fail", "scram-user", "the driver gave no secure listeners")
        return 1

    def scram_user():
        configs("--alter", "--add-config", f"SCRAM-SHA-512=[iterations={ITERATIONS},password={PASSWORD}]")
        out = configs("--describe")
        if f"SCRAM-SHA-512=iterations={ITERATIONS}" not in out:
            raise AssertionError(f"kafka-configs --describe: {one_line(out)}")
        return f"kafka-configs --add-config: {USER} has SCRAM-SHA-512/{ITERATIONS}"

    def wrong_password():
        detail = refused(scram("not-" + PASSWORD), f"{NAME}-sasl-ssl")
        expect_records(f"{NAME}-sasl-ssl", RECORDS)
        return detail

    def deleted_user():
        configs("--alter", "--delete-config", "SCRAM-SHA-512")
        return "kafka-configs --delete-config; " + refused(scram(PASSWORD), f"{NAME}-sasl-ssl")

    def sasl_ssl():
        try:
            return round_trip(SASL_SSL, scram(PASSWORD), f"{NAME}-sasl-ssl")
        except AssertionError as e:
            if "invalid SCRAM client-final message" in str(e) and librdkafka_version() < (2, 6, 1):
                raise ClientBug(SCRAM_NONCE_BUG + f"; the broker: {str(e).split('SASL authentication error: ')[-1].split(' (after')[0][:160]}")
            raise

    check("scram-user", scram_user)
    check_or_skip("sasl-ssl", sasl_ssl)
    # Where SCRAM cannot succeed, a refused wrong password proves nothing.
    not_run = "not run: " + SCRAM_NONCE_BUG
    if skipped:
        report("skip", "wrong-password", not_run)
    else:
        check("wrong-password", wrong_password)
    check("mtls", lambda: round_trip(MTLS, mutual_tls(True), f"{NAME}-mtls"))
    check("mtls-no-cert", lambda: no_certificate(f"{NAME}-mtls"))
    if skipped:
        report("skip", "deleted-user", not_run)
    else:
        check("deleted-user", deleted_user)
    return 1 if interop_report.failed else 0


if __name__ == "__main__":
    sys.exit(main())
