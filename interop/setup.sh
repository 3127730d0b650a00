#!/usr/bin/env bash
# Installs every client of the compatibility matrix, each from its own
# registry at a pinned version, caching downloads in the usual per-user
# caches (~/.m2, ~/.npm, ~/.cache/pip, Go's module cache) so reruns are fast:
#   kcat            Debian package (apt-get; needs root on a fresh machine)
#   confluent-kafka PyPI, into interop/python/.venv (requirements.txt)
#   kafkajs         npm, interop/node (package-lock.json)
#   Kafka 4.4.0     Maven Central: kafka-clients, kafka-tools, kafka_2.13,
#                   copied to interop/java/target/deps (pom.xml)
#   Go clients      Go module proxy, interop/go (go.mod)
set -euo pipefail
cd "$(dirname "$0")"

step() { echo "interop setup: $*" >&2; }

if ! command -v kcat >/dev/null 2>&1; then
	step "kcat (apt)"
	if [ "$(id -u)" != 0 ]; then
		echo "interop setup: kcat is missing; install the Debian package kcat (as root: apt-get update && apt-get install -y kcat)" >&2
		exit 1
	fi
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat >/dev/null
fi

for tool in java mvn node npm python3 go; do
	command -v "$tool" >/dev/null 2>&1 || { echo "interop setup: $tool not found" >&2; exit 1; }
done
java_major=$(java -XshowSettings:properties -version 2>&1 | sed -n 's/^ *java.specification.version = //p')
if [ "${java_major%%.*}" -lt 17 ]; then
	echo "interop setup: Java 17 or newer needed, found $java_major" >&2
	exit 1
fi

step "confluent-kafka (pip)"
[ -x python/.venv/bin/python ] || python3 -m venv python/.venv
python/.venv/bin/pip install -q --disable-pip-version-check -r python/requirements.txt

step "kafkajs (npm ci)"
(cd node && npm ci --prefer-offline --no-audit --no-fund --loglevel=error >/dev/null)

step "Apache Kafka 4.4.0 jars (mvn)"
(cd java && mvn -B -q -Dstyle.color=never compile dependency:copy-dependencies)

step "Go clients (go mod download)"
(cd go && go mod download && go vet .)
