package sluice.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Kafka's own command-line tools against Sluice, each run as its own JVM from the copied
 * kafka-tools / kafka_2.13 jars, with their output parsed and asserted.
 */
public final class CliScenario {
    static final String TOPICS = "org.apache.kafka.tools.TopicCommand";
    static final String PRODUCER = "org.apache.kafka.tools.ConsoleProducer";
    static final String CONSUMER = "org.apache.kafka.tools.consumer.ConsoleConsumer";
    static final String GROUPS = "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand";
    static final String CONFIGS = "org.apache.kafka.tools.ConfigCommand";
    static final String OFFSETS = "org.apache.kafka.tools.GetOffsetShell";
    static final String VPRODUCER = "org.apache.kafka.tools.VerifiableProducer";
    static final String VCONSUMER = "org.apache.kafka.tools.VerifiableConsumer";
    static final String DELETE_RECORDS = "org.apache.kafka.tools.DeleteRecordsCommand";
    static final String LOG_DIRS = "org.apache.kafka.tools.LogDirsCommand";
    static final String API_VERSIONS = "org.apache.kafka.tools.BrokerApiVersionsCommand";
    static final String CLUSTER = "org.apache.kafka.tools.ClusterTool";
    static final String ACLS = "org.apache.kafka.tools.AclCommand";
    static final String PRODUCER_PERF = "org.apache.kafka.tools.ProducerPerformance";
    static final String CONSUMER_PERF = "org.apache.kafka.tools.ConsumerPerformance";
    static final String TRANSACTIONS = "org.apache.kafka.tools.TransactionsCommand";

    static final String TOPIC = "cli-topic";
    static final String GROUP = "cli-group";
    static final int PARTITIONS = 3;
    static final int RECORDS = 60;

    final String bs;
    final Report rep = new Report();

    CliScenario(String bootstrap) {
        bs = bootstrap;
    }

    public static void main(String[] args) throws Exception {
        CliScenario s = new CliScenario(System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092"));
        System.exit(s.run() ? 0 : 1);
    }

    boolean run() {
        rep.version("kafka-tools " + AppInfoParser.getVersion());

        rep.check("kafka-topics create", () -> {
            Tool t = Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--create", "--topic", TOPIC,
                    "--partitions", "" + PARTITIONS, "--replication-factor", "1", "--config", "segment.bytes=1048576").ok();
            expect(t, "Created topic " + TOPIC);
            return "--create --partitions " + PARTITIONS;
        });
        rep.check("kafka-topics describe", () -> {
            Tool t = Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--describe", "--topic", TOPIC).ok();
            expect(t, "PartitionCount: " + PARTITIONS);
            for (int p = 0; p < PARTITIONS; p++) {
                expect(t, "Partition: " + p);
            }
            return "PartitionCount: " + PARTITIONS + ", every partition listed";
        });
        rep.check("kafka-topics list", () -> {
            Tool t = Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--list").ok();
            if (!t.lines().contains(TOPIC)) {
                throw new AssertionError(t.failure("did not list " + TOPIC));
            }
            return "--list shows " + TOPIC;
        });

        List<String> sent = new ArrayList<>();
        for (int i = 0; i < RECORDS; i++) {
            sent.add(String.format("key-%02d:value-%05d", i % 7, i));
        }
        rep.check("console-producer", () -> {
            Tool.run(PRODUCER, String.join("\n", sent) + "\n", 90, "--bootstrap-server", bs, "--topic", TOPIC,
                    "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
                    "--request-required-acks", "all", "--compression-codec", "gzip", "--sync").ok();
            return RECORDS + " keyed lines, gzip, acks=all";
        });
        rep.check("console-consumer", () -> {
            Tool t = Tool.run(CONSUMER, null, 90, "--bootstrap-server", bs, "--topic", TOPIC, "--group", GROUP,
                    "--from-beginning", "--max-messages", "" + RECORDS, "--timeout-ms", "30000",
                    "--formatter-property", "print.key=true", "--formatter-property", "key.separator=:").ok();
            List<String> got = t.lines();
            if (!new HashSet<>(got).equals(new HashSet<>(sent)) || got.size() != sent.size()) {
                throw new AssertionError(t.failure("read " + got.size() + " lines, not the " + sent.size() + " produced"));
            }
            Map<String, Integer> lastByKey = new HashMap<>();
            for (String l : got) {
                String key = l.substring(0, l.indexOf(':'));
                int seq = Integer.parseInt(l.substring(l.lastIndexOf('-') + 1));
                Integer prev = lastByKey.put(key, seq);
                if (prev != null && prev > seq) {
                    throw new AssertionError("key " + key + ": value " + seq + " read after " + prev);
                }
            }
            return RECORDS + " records read back in order per key, in group " + GROUP;
        });
        rep.check("consumer-groups describe", () -> {
            Tool l = Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--list").ok();
            if (!l.lines().contains(GROUP)) {
                throw new AssertionError(l.failure("did not list " + GROUP));
            }
            long[] sums = describeGroup();
            if (sums[0] != RECORDS || sums[1] != RECORDS || sums[2] != 0) {
                throw new AssertionError("current offsets sum " + sums[0] + ", log end offsets sum " + sums[1] + ", lag "
                        + sums[2] + "; want " + RECORDS + ", " + RECORDS + ", 0");
            }
            return "--list and --describe: committed " + RECORDS + ", lag 0";
        });
        rep.check("consumer-groups reset-offsets", () -> {
            Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--reset-offsets", "--group", GROUP, "--topic", TOPIC,
                    "--to-earliest", "--execute").ok();
            long[] sums = describeGroup();
            if (sums[0] != 0 || sums[2] != RECORDS) {
                throw new AssertionError("after --reset-offsets --to-earliest: current offsets sum " + sums[0] + ", lag "
                        + sums[2] + "; want 0 and " + RECORDS);
            }
            return "--to-earliest --execute, then lag " + RECORDS;
        });
        rep.check("consumer-groups describe (KIP-848)", this::describeKip848);
        rep.check("kafka-configs describe", () -> {
            Tool t = Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                    "--entity-name", TOPIC, "--all").ok();
            expect(t, "retention.ms=");
            expect(t, "segment.bytes=1048576");
            return "--describe --all shows retention.ms and the segment.bytes set at creation";
        });
        rep.check("kafka-configs alter", () -> {
            Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
                    TOPIC, "--add-config", "retention.ms=3600000,max.message.bytes=2000000").ok();
            Tool t = Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                    "--entity-name", TOPIC).ok();
            expect(t, "retention.ms=3600000");
            expect(t, "max.message.bytes=2000000");
            Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--alter", "--entity-type", "topics", "--entity-name",
                    TOPIC, "--delete-config", "max.message.bytes").ok();
            t = Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--describe", "--entity-type", "topics",
                    "--entity-name", TOPIC).ok();
            expect(t, "retention.ms=3600000");
            if (t.out.contains("max.message.bytes=2000000")) {
                throw new AssertionError(t.failure("still shows max.message.bytes after --delete-config"));
            }
            return "--add-config then --delete-config, read back with --describe";
        });
        rep.check("get-offset-shell", () -> {
            long latest = sumOffsets(Tool.run(OFFSETS, null, 60, "--bootstrap-server", bs, "--topic", TOPIC, "--time", "-1").ok());
            long earliest = sumOffsets(Tool.run(OFFSETS, null, 60, "--bootstrap-server", bs, "--topic", TOPIC, "--time", "-2").ok());
            if (latest != RECORDS || earliest != 0) {
                throw new AssertionError("latest offsets sum " + latest + ", earliest " + earliest + "; want " + RECORDS + " and 0");
            }
            return "--time -1 sums to " + RECORDS + ", --time -2 to 0";
        });

        String vtopic = "cli-verifiable";
        int vcount = 300;
        rep.check("verifiable-producer", () -> {
            createTopic(vtopic, 2);
            Tool t = Tool.run(VPRODUCER, null, 120, "--bootstrap-server", bs, "--topic", vtopic, "--max-messages",
                    "" + vcount, "--acks", "-1", "--throughput", "-1").ok();
            int ok = count(t, "\"name\":\"producer_send_success\"");
            int bad = count(t, "\"name\":\"producer_send_error\"");
            if (ok != vcount || bad != 0) {
                throw new AssertionError(t.failure(ok + " producer_send_success and " + bad + " producer_send_error events"));
            }
            return vcount + " producer_send_success, no errors";
        });
        rep.check("verifiable-consumer", () -> {
            Tool t = Tool.run(VCONSUMER, null, 120, "--bootstrap-server", bs, "--topic", vtopic, "--group-id",
                    "cli-verifiable-group", "--max-messages", "" + vcount, "--reset-policy", "earliest").ok();
            int consumed = 0;
            Matcher m = Pattern.compile("\"name\":\"records_consumed\",\"count\":(\\d+)").matcher(t.out);
            while (m.find()) {
                consumed += Integer.parseInt(m.group(1));
            }
            int committed = count(t, "\"name\":\"offsets_committed\"");
            if (consumed != vcount || committed == 0 || t.out.contains("\"success\":false")) {
                throw new AssertionError(t.failure(consumed + " records_consumed, " + committed + " offsets_committed events"));
            }
            return consumed + " records consumed, " + committed + " successful commits";
        });
        rep.check("delete-records", () -> {
            // The producer sent keyless records, which Kafka's sticky
            // partitioner may put all on one partition: delete from one
            // that holds at least 5 (a partition below 5 would rightly get
            // OFFSET_OUT_OF_RANGE).
            int part = partitionWithAtLeast(bs, vtopic, 5);
            Path json = Files.createTempFile("delete-records", ".json");
            Files.writeString(json, "{\"version\":1,\"partitions\":[{\"topic\":\"" + vtopic
                    + "\",\"partition\":" + part + ",\"offset\":5}]}");
            Tool t = Tool.run(DELETE_RECORDS, null, 60, "--bootstrap-server", bs, "--offset-json-file", json.toString()).ok();
            Files.delete(json);
            if (!t.out.contains("low_watermark: 5")) {
                throw new AssertionError(t.failure("did not report low_watermark: 5"));
            }
            Tool o = Tool.run(OFFSETS, null, 60, "--bootstrap-server", bs, "--topic", vtopic, "--partitions", "" + part, "--time", "-2").ok();
            if (!o.lines().contains(vtopic + ":" + part + ":5")) {
                throw new AssertionError(o.failure("earliest offset is not 5 after deleting records"));
            }
            return "partition " + part + " up to offset 5; kafka-get-offsets --time -2 says 5";
        });
        rep.check("kafka-topics alter partitions", () -> {
            Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--alter", "--topic", vtopic, "--partitions", "3").ok();
            expect(Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--describe", "--topic", vtopic).ok(), "PartitionCount: 3");
            return "--alter --partitions 3, then --describe shows 3";
        });
        rep.check("consumer-groups delete", () -> {
            Tool t = Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--delete", "--group", "cli-verifiable-group").ok();
            expect(t, "successful");
            if (Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--list").ok().lines().contains("cli-verifiable-group")) {
                throw new AssertionError("--list still shows the deleted group");
            }
            return "--delete, then --list no longer shows it";
        });
        rep.check("log-dirs", () -> {
            Tool t = Tool.run(LOG_DIRS, null, 60, "--bootstrap-server", bs, "--describe", "--topic-list", TOPIC).ok();
            for (int p = 0; p < PARTITIONS; p++) {
                expect(t, "\"partition\":\"" + TOPIC + "-" + p + "\"");
            }
            return "--describe lists every partition of " + TOPIC;
        });
        rep.check("broker-api-versions", () -> {
            Tool t = Tool.run(API_VERSIONS, null, 60, "--bootstrap-server", bs).ok();
            for (String api : List.of("Produce(0)", "Fetch(1)", "Metadata(3)", "ApiVersions(18)")) {
                expect(t, api);
            }
            return "lists the broker's API version ranges";
        });
        rep.check("cluster-id", () -> {
            expect(Tool.run(CLUSTER, null, 60, "cluster-id", "--bootstrap-server", bs).ok(), "Cluster ID: ");
            return "kafka-cluster cluster-id";
        });
        String ptopic = "cli-perf";
        int precords = 20000;
        rep.check("producer-perf-test", () -> {
            Tool t = Tool.run(PRODUCER_PERF, null, 120, "--topic", ptopic, "--num-records", "" + precords, "--record-size",
                    "200", "--throughput", "-1", "--bootstrap-server", bs, "--command-property", "acks=all",
                    "compression.type=lz4").ok();
            expect(t, precords + " records sent");
            return precords + " records of 200 bytes, lz4, acks=all: " + t.lines().get(t.lines().size() - 1);
        });
        rep.check("consumer-perf-test", () -> {
            Tool t = Tool.run(CONSUMER_PERF, null, 120, "--bootstrap-server", bs, "--topic", ptopic, "--num-records",
                    "" + precords, "--timeout", "30000").ok();
            List<String> l = t.lines();
            String[] f = l.get(l.size() - 1).split(",\\s*");
            if (f.length < 5 || Long.parseLong(f[4].strip()) != precords) {
                throw new AssertionError(t.failure("did not consume " + precords + " records"));
            }
            return precords + " records: " + l.get(l.size() - 1);
        });
        transactions();
        aclsAndQuotas();
        rep.check("kafka-topics delete", () -> {
            Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--delete", "--topic", ptopic).ok();
            if (Tool.run(TOPICS, null, 60, "--bootstrap-server", bs, "--list").ok().lines().contains(ptopic)) {
                throw new AssertionError("--list still shows the deleted topic " + ptopic);
            }
            return "--delete, then --list no longer shows it";
        });
        return !rep.failed();
    }

    /**
     * kafka-transactions over one transaction committed on TOPIC-0 and one left open (its producer
     * still alive): list, describe, describe-producers and find-hanging (the open one is not
     * hanging: its coordinator knows it).
     */
    void transactions() {
        String id = "cli-txn";
        try (org.apache.kafka.clients.producer.KafkaProducer<String, String> p = Transactions.producer(bs, id)) {
            rep.check("kafka-transactions list", () -> {
                p.initTransactions();
                p.beginTransaction();
                p.send(new org.apache.kafka.clients.producer.ProducerRecord<>(TOPIC, 0, "k", "committed"));
                p.commitTransaction();
                p.beginTransaction();
                p.send(new org.apache.kafka.clients.producer.ProducerRecord<>(TOPIC, 0, "k", "open")).get(30, java.util.concurrent.TimeUnit.SECONDS);
                Tool t = Tool.run(TRANSACTIONS, null, 60, "--bootstrap-server", bs, "list").ok();
                expect(t, id);
                expect(t, "Ongoing");
                return "lists " + id + " as Ongoing";
            });
            rep.check("kafka-transactions describe", () -> {
                Tool t = Tool.run(TRANSACTIONS, null, 60, "--bootstrap-server", bs, "describe", "--transactional-id", id).ok();
                expect(t, "Ongoing");
                expect(t, TOPIC + "-0");
                return "describe shows the open transaction and its partition " + TOPIC + "-0";
            });
            rep.check("kafka-transactions describe-producers", () -> {
                Tool t = Tool.run(TRANSACTIONS, null, 60, "--bootstrap-server", bs, "describe-producers", "--topic", TOPIC,
                        "--partition", "0").ok();
                if (t.lines().size() < 2 || !t.lines().stream().anyMatch(l -> l.strip().matches(".*\\s\\d+\\s*$"))) {
                    throw new AssertionError(t.failure("shows no producer with an open transaction's start offset"));
                }
                return "shows the producers of " + TOPIC + "-0 with the open transaction's start offset";
            });
            rep.check("kafka-transactions find-hanging", () -> {
                Tool t = Tool.run(TRANSACTIONS, null, 60, "--bootstrap-server", bs, "find-hanging", "--broker-id", "1").ok();
                if (t.out.contains(TOPIC)) {
                    throw new AssertionError(t.failure("reports the coordinated open transaction as hanging"));
                }
                return "finds no hanging transaction (the open one is known to its coordinator)";
            });
            p.abortTransaction();
        }
    }

    /**
     * kafka-acls --add/--list/--remove and kafka-configs client quotas. The broker has the
     * standard authorizer with User:ANONYMOUS (this tool's principal) a super user and everyone
     * allowed where no ACL is found, so the ACLs, on a principal no step uses, affect nothing else
     * of the run; the quota names a client id no other step uses, and is removed.
     */
    void aclsAndQuotas() {
        rep.check("kafka-acls add/list/remove", () -> {
            Tool.run(ACLS, null, 60, "--bootstrap-server", bs, "--add", "--allow-principal", "User:cli-user",
                    "--operation", "Read", "--operation", "Describe", "--topic", TOPIC).ok();
            Tool.run(ACLS, null, 60, "--bootstrap-server", bs, "--add", "--deny-principal", "User:cli-user",
                    "--operation", "Write", "--topic", "cli-", "--resource-pattern-type", "prefixed").ok();
            Tool t = Tool.run(ACLS, null, 60, "--bootstrap-server", bs, "--list", "--principal", "User:cli-user").ok();
            expect(t, "name=" + TOPIC + ", patternType=LITERAL");
            expect(t, "name=cli-, patternType=PREFIXED");
            expect(t, "operation=READ, permissionType=ALLOW");
            expect(t, "operation=WRITE, permissionType=DENY");
            Tool.run(ACLS, null, 60, "--bootstrap-server", bs, "--remove", "--force", "--allow-principal", "User:cli-user",
                    "--operation", "Read", "--operation", "Describe", "--topic", TOPIC).ok();
            Tool.run(ACLS, null, 60, "--bootstrap-server", bs, "--remove", "--force", "--topic", "cli-",
                    "--resource-pattern-type", "prefixed").ok();
            t = Tool.run(ACLS, null, 60, "--bootstrap-server", bs, "--list", "--principal", "User:cli-user").ok();
            if (t.out.contains("operation=")) {
                throw new AssertionError(t.failure("--list still shows ACLs of User:cli-user after --remove"));
            }
            return "a literal ALLOW and a prefixed DENY added, listed and removed (by binding, and all of a resource)";
        });
        rep.check("kafka-configs client quotas", () -> {
            Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--alter", "--entity-type", "clients", "--entity-name",
                    "cli-quota-client", "--add-config", "producer_byte_rate=1048576,request_percentage=50").ok();
            Tool t = Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--describe", "--entity-type", "clients",
                    "--entity-name", "cli-quota-client").ok();
            expect(t, "producer_byte_rate=1048576");
            expect(t, "request_percentage=50");
            Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--alter", "--entity-type", "clients", "--entity-name",
                    "cli-quota-client", "--delete-config", "producer_byte_rate,request_percentage").ok();
            t = Tool.run(CONFIGS, null, 60, "--bootstrap-server", bs, "--describe", "--entity-type", "clients",
                    "--entity-name", "cli-quota-client").ok();
            if (t.out.contains("producer_byte_rate")) {
                throw new AssertionError(t.failure("--describe still shows the quota after --delete-config"));
            }
            return "--alter --add-config, --describe, --delete-config on a client id";
        });
    }

    /**
     * A console consumer on the KIP-848 protocol (group.protocol=consumer) reads TOPIC and stays
     * in its group for a while; kafka-consumer-groups must show it with its epochs and
     * assignment (--members --verbose), the group's state and epochs (--state --verbose), and
     * once it has left, the offsets it committed with no lag.
     */
    String describeKip848() throws Exception {
        String group = "cli-kip848-group";
        CompletableFuture<Tool> consumer = CompletableFuture.supplyAsync(() -> {
            try {
                return Tool.run(CONSUMER, null, 90, "--bootstrap-server", bs, "--topic", TOPIC, "--group", group,
                        "--command-property", "group.protocol=consumer", "--from-beginning",
                        "--max-messages", "" + (RECORDS + 1), "--timeout-ms", "20000");
            } catch (Exception e) {
                throw new RuntimeException(e);
            }
        });
        String member = null;
        long deadline = System.currentTimeMillis() + 30000;
        while (member == null) {
            Tool t = Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--describe", "--group", group, "--members",
                    "--verbose").ok();
            for (String l : t.lines()) {
                String[] f = l.split("\\s+");
                // GROUP CONSUMER-ID HOST CLIENT-ID #PARTITIONS CURRENT-EPOCH CURRENT-ASSIGNMENT TARGET-EPOCH ...
                if (f.length >= 9 && f[0].equals(group) && f[4].equals("" + PARTITIONS) && f[5].equals(f[7])
                        && !f[5].equals("0")) {
                    member = "member at epoch " + f[5] + " holding " + f[6];
                }
            }
            if (member == null && System.currentTimeMillis() > deadline) {
                throw new AssertionError(t.failure("never showed one member holding all " + PARTITIONS + " partitions"));
            }
            Thread.sleep(500);
        }
        Tool st = Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--describe", "--group", group, "--state",
                "--verbose").ok();
        expect(st, "Stable");
        expect(st, "uniform");
        Tool read = consumer.get(120, TimeUnit.SECONDS);
        long values = read.lines().stream().filter(l -> l.startsWith("value-")).count();
        if (values != RECORDS) {
            throw new AssertionError(read.failure("read " + values + " records, want " + RECORDS));
        }
        Tool t = Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--describe", "--group", group, "--offsets").ok();
        long current = 0;
        long lag = 0;
        for (String l : t.lines()) {
            String[] f = l.split("\\s+");
            if (f.length >= 6 && f[0].equals(group) && f[1].equals(TOPIC)) {
                current += parse(f[3]);
                lag += parse(f[5]);
            }
        }
        if (current != RECORDS || lag != 0) {
            throw new AssertionError(t.failure("committed " + current + " with lag " + lag + ", want " + RECORDS + " and 0"));
        }
        return "--members --verbose: " + member + "; --state --verbose: Stable, uniform; --offsets: committed " + RECORDS
                + ", lag 0";
    }

    /** Sums of CURRENT-OFFSET, LOG-END-OFFSET and LAG over the group's partitions of TOPIC. */
    long[] describeGroup() throws Exception {
        Tool t = Tool.run(GROUPS, null, 60, "--bootstrap-server", bs, "--describe", "--group", GROUP, "--offsets").ok();
        long[] sums = new long[3];
        int rows = 0;
        for (String l : t.lines()) {
            String[] f = l.split("\\s+");
            if (f.length >= 6 && f[0].equals(GROUP) && f[1].equals(TOPIC)) {
                rows++;
                sums[0] += parse(f[3]);
                sums[1] += parse(f[4]);
                sums[2] += parse(f[5]);
            }
        }
        if (rows != PARTITIONS) {
            throw new AssertionError(t.failure("described " + rows + " partitions of " + TOPIC + ", want " + PARTITIONS));
        }
        return sums;
    }

    static long parse(String s) {
        return s.equals("-") ? 0 : Long.parseLong(s);
    }

    static long sumOffsets(Tool t) {
        long sum = 0;
        int n = 0;
        for (String l : t.lines()) {
            String[] f = l.split(":");
            if (f.length == 3 && f[0].equals(TOPIC)) {
                sum += Long.parseLong(f[2]);
                n++;
            }
        }
        if (n != PARTITIONS) {
            throw new AssertionError(t.failure(n + " partitions listed, want " + PARTITIONS));
        }
        return sum;
    }

    static void expect(Tool t, String text) {
        if (!t.out.contains(text)) {
            throw new AssertionError(t.failure("printed no \"" + text + "\""));
        }
    }

    static int count(Tool t, String text) {
        int n = 0;
        for (int i = t.out.indexOf(text); i >= 0; i = t.out.indexOf(text, i + 1)) {
            n++;
        }
        return n;
    }

    void createTopic(String name, int partitions) throws Exception {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        try (Admin a = Admin.create(p)) {
            a.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
    }

    /** The first partition of topic whose latest offset is at least min (kafka-get-offsets --time -1). */
    static int partitionWithAtLeast(String bs, String topic, long min) throws Exception {
        Tool t = Tool.run(OFFSETS, null, 60, "--bootstrap-server", bs, "--topic", topic, "--time", "-1").ok();
        for (String line : t.lines()) {
            String[] f = line.trim().split(":");
            if (f.length == 3 && f[0].equals(topic) && Long.parseLong(f[2]) >= min) {
                return Integer.parseInt(f[1]);
            }
        }
        throw new AssertionError(t.failure("no partition of " + topic + " holds " + min + " records"));
    }
}
