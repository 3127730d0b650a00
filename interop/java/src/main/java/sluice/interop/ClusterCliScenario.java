package sluice.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Properties;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Kafka's command-line tools against the three-broker cluster, each as its own JVM with its
 * output parsed: kafka-topics --describe (leaders, replicas, ISR of an RF=3 topic),
 * kafka-broker-api-versions, kafka-cluster cluster-id, kafka-metadata-quorum describe --status
 * and --replication, and kafka-leader-election --election-type preferred after the driver
 * restarted a broker (so that leaderships had moved off their preferred replicas), and
 * kafka-reassign-partitions --generate, --execute and --verify moving one replica of every
 * partition of an RF=2 topic onto the third broker.
 */
public final class ClusterCliScenario {
    static final String TOPICS = "org.apache.kafka.tools.TopicCommand";
    static final String TOPIC = "cluster-cli";
    static final String REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand";
    static final String MOVED = "cluster-cli-move";
    static final int MOVED_RECORDS = 60;
    static final String THROTTLE = "50000000"; // B/s: high enough not to slow the move
    static final Set<Integer> NODES = Set.of(1, 2, 3);

    final Report rep = new Report();
    final String bootstrap = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
    final String clusterId = System.getenv().getOrDefault("SLUICE_CLUSTER_ID", "");
    final BufferedReader driver = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    public static void main(String[] args) throws Exception {
        ClusterCliScenario s = new ClusterCliScenario();
        s.rep.version("kafka-tools " + AppInfoParser.getVersion());
        s.run();
        System.exit(s.rep.failed() ? 1 : 0);
    }

    /** One partition line of kafka-topics --describe. */
    record Part(String topic, int partition, int leader, List<Integer> replicas, Set<Integer> isr) {
        boolean inSync() {
            return new TreeSet<>(replicas).equals(isr) && replicas.contains(leader);
        }

        @Override
        public String toString() {
            return topic + "-" + partition + " leader " + leader + " replicas " + replicas + " isr " + isr;
        }
    }

    static final Pattern PART = Pattern.compile(
            "Topic: (\\S+)\\s+Partition: (\\d+)\\s+Leader: (-?\\d+)\\s+Replicas: ([\\d,]*)\\s+Isr: ([\\d,]*)");

    /** kafka-topics --describe of every topic, partition lines only. */
    List<Part> describe() throws Exception {
        Tool t = Tool.run(TOPICS, null, 60, "--bootstrap-server", bootstrap, "--describe").ok();
        List<Part> out = new ArrayList<>();
        Matcher m = PART.matcher(t.out);
        while (m.find()) {
            out.add(new Part(m.group(1), Integer.parseInt(m.group(2)), Integer.parseInt(m.group(3)),
                    ints(m.group(4)), new TreeSet<>(ints(m.group(5)))));
        }
        if (out.isEmpty()) {
            throw new AssertionError(t.failure("listed no partitions"));
        }
        return out;
    }

    static List<Integer> ints(String csv) {
        List<Integer> out = new ArrayList<>();
        for (String s : csv.split(",")) {
            if (!s.isBlank()) {
                out.add(Integer.parseInt(s.strip()));
            }
        }
        return out;
    }

    String askDriver(String req) throws Exception {
        System.out.println("##interop broker " + req);
        System.out.flush();
        String reply = driver.readLine();
        if (reply == null || reply.startsWith("error")) {
            throw new AssertionError("driver: " + reply);
        }
        return reply;
    }

    void run() throws Exception {
        rep.check("kafka-topics describe", () -> {
            Tool.run(TOPICS, null, 60, "--bootstrap-server", bootstrap, "--create", "--topic", TOPIC,
                    "--partitions", "3", "--replication-factor", "3", "--config", "min.insync.replicas=2").ok();
            long deadline = System.currentTimeMillis() + 30000;
            while (true) {
                List<Part> all = describe();
                List<Part> mine = all.stream().filter(p -> p.topic.equals(TOPIC)).toList();
                Set<Integer> leaders = new TreeSet<>();
                boolean ok = mine.size() == 3;
                for (Part p : mine) {
                    ok &= new TreeSet<>(p.replicas).equals(NODES) && p.inSync();
                    leaders.add(p.leader);
                }
                List<Part> behind = all.stream().filter(p -> !p.inSync()).toList();
                if (ok && behind.isEmpty()) {
                    return "--create --replication-factor 3, then --describe: " + TOPIC + " " + mine.size()
                            + " partitions with replicas and ISR {1,2,3}, leaders " + leaders + "; all " + all.size()
                            + " partitions of " + all.stream().map(Part::topic).distinct().count()
                            + " topics have every replica in the ISR";
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("--describe: " + mine + "; not in sync: " + behind);
                }
                Thread.sleep(500);
            }
        });
        rep.check("broker-api-versions", () -> {
            Tool t = Tool.run("org.apache.kafka.tools.BrokerApiVersionsCommand", null, 60, "--bootstrap-server", bootstrap).ok();
            Matcher m = Pattern.compile("(?m)^\\S+ \\(id: (\\d+) rack: \\S+ isFenced: (\\w+)\\) -> \\(").matcher(t.out);
            Set<Integer> ids = new TreeSet<>();
            while (m.find()) {
                if (!m.group(2).equals("false")) {
                    throw new AssertionError(t.failure("broker " + m.group(1) + " isFenced: " + m.group(2)));
                }
                ids.add(Integer.parseInt(m.group(1)));
            }
            int produce = count(t.out, "(?m)^\\s+Produce\\(0\\): \\d+ to \\d+ \\[usable: \\d+\\]");
            if (!ids.equals(NODES) || produce != 3) {
                throw new AssertionError(t.failure("want brokers [1, 2, 3] each with a Produce range, got " + ids
                        + " and " + produce + " Produce ranges"));
            }
            return "brokers " + ids + ", none fenced, each with its API version ranges";
        });
        rep.check("cluster-id", () -> {
            Tool t = Tool.run("org.apache.kafka.tools.ClusterTool", null, 60, "cluster-id", "--bootstrap-server", bootstrap).ok();
            if (!t.out.strip().equals("Cluster ID: " + clusterId)) {
                throw new AssertionError(t.failure("want the id the nodes were formatted with, " + clusterId));
            }
            return "kafka-cluster cluster-id prints the id `sluice format` wrote on every node";
        });
        int[] quorumLeader = {-1};
        rep.check("metadata-quorum status", () -> {
            Tool t = Tool.run("org.apache.kafka.tools.MetadataQuorumCommand", null, 60,
                    "--bootstrap-server", bootstrap, "describe", "--status").ok();
            Map<String, String> kv = new LinkedHashMap<>();
            for (String l : t.lines()) {
                String[] f = l.split(":\\s+", 2);
                if (f.length == 2) {
                    kv.put(f[0], f[1]);
                }
            }
            int leader = Integer.parseInt(kv.getOrDefault("LeaderId", "-1"));
            Set<Integer> voters = new TreeSet<>();
            Matcher m = Pattern.compile("\"id\": (\\d+)").matcher(kv.getOrDefault("CurrentVoters", ""));
            while (m.find()) {
                voters.add(Integer.parseInt(m.group(1)));
            }
            long hw = Long.parseLong(kv.getOrDefault("HighWatermark", "-1"));
            if (!clusterId.equals(kv.get("ClusterId")) || !NODES.contains(leader) || !voters.equals(NODES) || hw <= 0) {
                throw new AssertionError(t.failure("want ClusterId " + clusterId + ", a LeaderId among the voters [1, 2, 3]"
                        + " and a positive HighWatermark"));
            }
            quorumLeader[0] = leader;
            return "ClusterId matches, LeaderId " + leader + " (epoch " + kv.get("LeaderEpoch") + "), CurrentVoters " + voters
                    + ", HighWatermark " + hw;
        });
        rep.check("metadata-quorum replication", () -> {
            Tool t = Tool.run("org.apache.kafka.tools.MetadataQuorumCommand", null, 60,
                    "--bootstrap-server", bootstrap, "describe", "--replication").ok();
            Map<Integer, String> status = new LinkedHashMap<>();
            for (String l : t.lines()) {
                String[] f = l.split("\\s+");
                if (f.length >= 7 && f[0].matches("\\d+")) {
                    status.put(Integer.parseInt(f[0]), f[f.length - 1]);
                }
            }
            long leaders = status.values().stream().filter("Leader"::equals).count();
            long followers = status.values().stream().filter("Follower"::equals).count();
            if (!status.keySet().equals(NODES) || leaders != 1 || followers != 2
                    || (quorumLeader[0] >= 0 && !"Leader".equals(status.get(quorumLeader[0])))) {
                throw new AssertionError(t.failure("want nodes 1-3, one Leader (" + quorumLeader[0] + ") and two Followers, got "
                        + status));
            }
            return "one row per voter: " + status;
        });
        rep.check("leader-election preferred", () -> {
            askDriver("stop " + TOPIC + "-group");
            askDriver("start");
            List<Part> before = describe();
            List<Part> off = before.stream().filter(p -> p.leader != p.replicas.get(0)).toList();
            if (off.isEmpty()) {
                throw new AssertionError("after a broker restart no partition is led by a non-preferred replica: " + before);
            }
            Tool t = Tool.run("org.apache.kafka.tools.LeaderElectionCommand", null, 60, "--bootstrap-server", bootstrap,
                    "--election-type", "preferred", "--all-topic-partitions").ok();
            if (!t.out.contains("Successfully completed leader election (PREFERRED) for partitions")) {
                throw new AssertionError(t.failure("did not report a completed preferred election"));
            }
            long deadline = System.currentTimeMillis() + 15000;
            while (true) {
                List<Part> after = describe();
                List<Part> still = after.stream().filter(p -> p.leader != p.replicas.get(0) || !p.inSync()).toList();
                if (still.isEmpty()) {
                    return off.size() + " of " + before.size() + " partitions were led by another replica after the restart;"
                            + " --all-topic-partitions moved each back to its preferred (first) replica";
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("after the election " + still.size() + " partitions are not on their preferred leader: "
                            + still.subList(0, Math.min(5, still.size())));
                }
                Thread.sleep(500);
            }
        });
        reassign();
    }

    static final Pattern PLAN_PART = Pattern.compile("\\{\"topic\":\"([^\"]+)\",\"partition\":(\\d+),\"replicas\":\\[([\\d,]*)\\]");

    /** partition → replicas of one reassignment JSON document. */
    static Map<Integer, List<Integer>> plan(String json) {
        Map<Integer, List<Integer>> out = new TreeMap<>();
        Matcher m = PLAN_PART.matcher(json);
        while (m.find()) {
            out.put(Integer.parseInt(m.group(2)), ints(m.group(3)));
        }
        return out;
    }

    static String planJson(Map<Integer, List<Integer>> plan) {
        StringBuilder sb = new StringBuilder("{\"version\":1,\"partitions\":[");
        for (var e : plan.entrySet()) {
            if (sb.charAt(sb.length() - 1) == '}') {
                sb.append(',');
            }
            sb.append("{\"topic\":\"").append(MOVED).append("\",\"partition\":").append(e.getKey())
                    .append(",\"replicas\":").append(e.getValue().toString().replace(" ", "")).append('}');
        }
        return sb.append("]}").toString();
    }

    /** kafka-reassign-partitions: generate a plan, move one replica of each partition, verify. */
    void reassign() throws Exception {
        Path work = Path.of(System.getenv().getOrDefault("INTEROP_WORK", "/tmp"));
        Map<Integer, List<Integer>> target = new TreeMap<>();
        Path planFile = work.resolve("cluster-cli-reassign.json");
        boolean generated = rep.check("reassign-partitions generate", () -> {
            Tool.run(TOPICS, null, 60, "--bootstrap-server", bootstrap, "--create", "--topic", MOVED,
                    "--partitions", "3", "--replication-factor", "2").ok();
            Properties pp = new Properties();
            pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            pp.put(ProducerConfig.ACKS_CONFIG, "all");
            pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
            try (KafkaProducer<String, String> pr = new KafkaProducer<>(pp)) {
                for (int i = 0; i < MOVED_RECORDS; i++) {
                    pr.send(new ProducerRecord<>(MOVED, i % 3, "k" + i, "v" + i));
                }
                pr.flush();
            }
            Path topics = work.resolve("cluster-cli-topics.json");
            Files.writeString(topics, "{\"version\":1,\"topics\":[{\"topic\":\"" + MOVED + "\"}]}");
            Tool t = Tool.run(REASSIGN, null, 60, "--bootstrap-server", bootstrap, "--generate",
                    "--topics-to-move-json-file", topics.toString(), "--broker-list", "1,2,3").ok();
            String[] parts = t.out.split("Proposed partition reassignment configuration");
            if (parts.length != 2) {
                throw new AssertionError(t.failure("printed no proposed reassignment"));
            }
            Map<Integer, List<Integer>> current = plan(parts[0]);
            Map<Integer, List<Integer>> proposed = plan(parts[1]);
            for (Map<Integer, List<Integer>> pl : List.of(current, proposed)) {
                if (pl.size() != 3 || !pl.values().stream().allMatch(r -> r.size() == 2 && new HashSet<>(r).size() == 2
                        && NODES.containsAll(r))) {
                    throw new AssertionError(t.failure("want 3 partitions of 2 distinct replicas among brokers 1-3 in both plans"));
                }
            }
            // Our own target moves one replica of each partition onto the broker that has none.
            for (var e : current.entrySet()) {
                int spare = NODES.stream().filter(n -> !e.getValue().contains(n)).findFirst().orElseThrow();
                target.put(e.getKey(), List.of(spare, e.getValue().get(0)));
            }
            Files.writeString(planFile, planJson(target));
            return "--generate --broker-list 1,2,3: current " + current + ", proposed " + proposed;
        });
        if (!generated) {
            return;
        }
        boolean executed = rep.check("reassign-partitions execute", () -> {
            Tool t = Tool.run(REASSIGN, null, 60, "--bootstrap-server", bootstrap, "--execute",
                    "--reassignment-json-file", planFile.toString(), "--throttle", THROTTLE).ok();
            if (!t.out.contains("Successfully started partition reassignments for")) {
                throw new AssertionError(t.failure("did not start the reassignments"));
            }
            if (!t.out.contains("The inter-broker throttle limit was set to " + THROTTLE + " B/s")) {
                throw new AssertionError(t.failure("did not set the inter-broker throttle"));
            }
            return "--execute --throttle " + THROTTLE + " " + target + " (one replica of each partition onto the broker"
                    + " without one; the throttle rates set as dynamic broker configs)";
        });
        if (!executed) {
            return;
        }
        Tool[] lastVerify = {null};
        rep.check("reassign-partitions verify", () -> {
            long deadline = System.currentTimeMillis() + 60000;
            while (true) {
                Tool t = Tool.run(REASSIGN, null, 60, "--bootstrap-server", bootstrap, "--verify",
                        "--reassignment-json-file", planFile.toString());
                lastVerify[0] = t;
                int done = count(t.out, "Reassignment of partition " + MOVED + "-\\d+ is completed\\.");
                if (done == target.size()) {
                    break;
                }
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError(t.failure(done + " of " + target.size() + " reassignments completed after 60s"));
                }
                Thread.sleep(1000);
            }
            List<Part> moved = describe().stream().filter(p -> p.topic.equals(MOVED)).toList();
            for (Part p : moved) {
                if (!p.replicas.equals(target.get(p.partition)) || !p.inSync()) {
                    throw new AssertionError("after --verify: " + moved + ", want replicas " + target);
                }
            }
            Properties cp = new Properties();
            cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
            Map<String, Integer> got = new HashMap<>();
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
                List<TopicPartition> tps = List.of(new TopicPartition(MOVED, 0), new TopicPartition(MOVED, 1), new TopicPartition(MOVED, 2));
                c.assign(tps);
                c.seekToBeginning(tps);
                long end = System.currentTimeMillis() + 20000;
                while (got.size() < MOVED_RECORDS && System.currentTimeMillis() < end) {
                    c.poll(Duration.ofMillis(200)).forEach(r -> got.merge(r.value(), 1, Integer::sum));
                }
            }
            if (got.size() != MOVED_RECORDS || got.values().stream().anyMatch(n -> n != 1)) {
                throw new AssertionError("read back " + got.size() + " distinct of " + MOVED_RECORDS + " records after the move");
            }
            return "every reassignment completed; --describe shows the new replicas " + target + ", all in the ISR;"
                    + " the " + MOVED_RECORDS + " records produced before the move read back once each";
        });
        Tool v = lastVerify[0];
        if (v == null) {
            return;
        }
        if (v.exit == 0) {
            if (!v.out.contains("Clearing broker-level throttles on brokers 1,2,3")
                    || !v.out.contains("Clearing topic-level throttles on topic " + MOVED)) {
                rep.fail("reassign-partitions clear throttles", v.failure("did not clear the throttles"));
                return;
            }
            rep.pass("reassign-partitions clear throttles", "--verify cleared the broker-level throttle rates on"
                    + " brokers 1,2,3 and the topic's throttled-replicas lists");
        } else if ((v.out + v.err).contains("Cannot update these configs dynamically")) {
            String why = (v.out + v.err).replaceAll("(?s).*?(Cannot update these configs dynamically[^\n]*).*", "$1");
            rep.gap("reassign-partitions clear throttles", "--verify then clears the broker-level throttle configs"
                    + " (IncrementalAlterConfigs on BROKER resources) and exits 1: " + why);
        } else {
            rep.fail("reassign-partitions clear throttles", v.failure("exited " + v.exit));
        }
    }

    static int count(String s, String regex) {
        Matcher m = Pattern.compile(regex).matcher(s);
        int n = 0;
        while (m.find()) {
            n++;
        }
        return n;
    }

}
