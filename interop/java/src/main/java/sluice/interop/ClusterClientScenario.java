package sluice.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * The cluster scenario (interop/driver's three-broker half) with kafka-clients: an RF=3 topic
 * with min.insync.replicas=2, one group member consuming what an idempotent acks=all producer
 * writes, before, while and after the driver restarts the group's coordinator (SIGTERM).
 * Control requests go to the driver on stdout ("##interop broker ..."), replies come on stdin.
 */
public final class ClusterClientScenario {
    static final int PARTITIONS = 3;
    static final int PER_PHASE = 100;

    final Report rep = new Report();
    final String bootstrap = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
    final String topic = "java-rf3";
    final String group = "java-rf3-group";
    final BufferedReader driver = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    final Map<String, Integer> seen = new HashMap<>();
    final Map<Integer, String> lastInPartition = new HashMap<>();
    final List<String> problems = new ArrayList<>();
    int deliveries;

    public static void main(String[] args) throws Exception {
        ClusterClientScenario s = new ClusterClientScenario();
        s.rep.version("kafka-clients " + AppInfoParser.getVersion());
        s.run();
        System.exit(s.rep.failed() ? 1 : 0);
    }

    /** Sends a request to the driver and returns its reply; an "error" reply throws. */
    String askDriver(String req) throws Exception {
        System.out.println("##interop broker " + req);
        System.out.flush();
        String reply = driver.readLine();
        if (reply == null || reply.startsWith("error")) {
            throw new AssertionError("driver: " + reply);
        }
        System.err.println("driver: " + reply);
        return reply;
    }

    void run() throws Exception {
        if (!rep.check("rf3-topic", this::createTopic)) {
            return;
        }
        Properties pp = new Properties();
        pp.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        pp.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        pp.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        pp.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        Properties cp = new Properties();
        cp.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        cp.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        cp.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 10000);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(pp);
                KafkaConsumer<String, String> c = new KafkaConsumer<>(cp)) {
            c.subscribe(List.of(topic));
            if (!rep.check("acks-all", () -> phase(pr, c, "p1") + " records, acks=all, idempotent, consumed by the group member")) {
                return;
            }
            if (!rep.check("broker-down", () -> {
                String stopped = askDriver("stop " + group);
                return stopped + ": " + phase(pr, c, "p2") + " more records, acks=all, idempotent, consumed by the same member";
            })) {
                return;
            }
            rep.check("broker-back", () -> {
                String started = askDriver("start");
                int n = phase(pr, c, "p3");
                c.poll(Duration.ofMillis(500)); // late duplicates
                if (deliveries != 3 * PER_PHASE || seen.size() != 3 * PER_PHASE) {
                    problems.add(deliveries + " deliveries of " + seen.size() + " distinct records, produced " + 3 * PER_PHASE);
                }
                if (!problems.isEmpty()) {
                    throw new AssertionError(String.join("; ", problems.subList(0, Math.min(5, problems.size()))));
                }
                return started + ": " + n + " more records; all " + 3 * PER_PHASE
                        + " consumed exactly once, in produce order per partition";
            });
        }
    }

    String createTopic() throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        try (Admin a = Admin.create(ap)) {
            a.createTopics(List.of(new NewTopic(topic, PARTITIONS, (short) 3).configs(Map.of("min.insync.replicas", "2"))))
                    .all().get(30, TimeUnit.SECONDS);
            long deadline = System.currentTimeMillis() + 30000;
            String last = "";
            while (System.currentTimeMillis() < deadline) {
                TopicDescription d;
                try {
                    d = a.describeTopics(List.of(topic)).allTopicNames().get(10, TimeUnit.SECONDS).get(topic);
                } catch (ExecutionException e) {
                    // The broker that answered has not applied the controller's record yet.
                    if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
                        throw e;
                    }
                    last = e.getCause().toString();
                    Thread.sleep(200);
                    continue;
                }
                Set<Integer> leaders = new HashSet<>();
                boolean ok = d.partitions().size() == PARTITIONS;
                for (TopicPartitionInfo p : d.partitions()) {
                    Set<Integer> replicas = ids(p.replicas());
                    ok &= replicas.size() == 3 && ids(p.isr()).equals(replicas) && p.leader() != null
                            && replicas.contains(p.leader().id());
                    if (p.leader() != null) {
                        leaders.add(p.leader().id());
                    }
                }
                last = d.partitions().toString();
                if (ok) {
                    TopicPartitionInfo p0 = d.partitions().get(0);
                    return PARTITIONS + " partitions, replicas " + ids(p0.replicas()) + ", ISR " + ids(p0.isr())
                            + ", leaders on " + leaders.size() + " brokers (describeTopics)";
                }
                Thread.sleep(200);
            }
            throw new AssertionError("not three in-sync replicas per partition: " + last);
        }
    }

    static Set<Integer> ids(List<Node> nodes) {
        Set<Integer> out = new HashSet<>();
        for (Node n : nodes) {
            out.add(n.id());
        }
        return out;
    }

    /** Produces PER_PHASE records tagged tag and polls until the member has them, committing each poll. */
    int phase(KafkaProducer<String, String> pr, KafkaConsumer<String, String> c, String tag) throws Exception {
        List<Future<RecordMetadata>> fs = new ArrayList<>();
        for (Rec r : Rec.make(topic + "-" + tag, PER_PHASE, System.currentTimeMillis())) {
            fs.add(pr.send(r.toProducer(topic)));
        }
        pr.flush();
        for (Future<RecordMetadata> f : fs) {
            f.get(30, TimeUnit.SECONDS);
        }
        long deadline = System.currentTimeMillis() + 45000;
        while (count(tag) < PER_PHASE) {
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("consumed " + count(tag) + " of " + PER_PHASE + " records of " + tag);
            }
            var recs = c.poll(Duration.ofMillis(200));
            if (!recs.isEmpty()) {
                c.commitSync(Duration.ofSeconds(30));
            }
            for (ConsumerRecord<String, String> cr : recs) {
                deliveries++;
                String id = Rec.from(cr).id().substring(topic.length() + 1); // pN-NNNNN: produce order
                if (seen.merge(id, 1, Integer::sum) > 1) {
                    problems.add(id + " delivered twice");
                }
                String prev = lastInPartition.put(cr.partition(), id);
                if (prev != null && id.compareTo(prev) <= 0) {
                    problems.add("partition " + cr.partition() + ": " + id + " after " + prev);
                }
            }
        }
        return PER_PHASE;
    }

    int count(String tag) {
        int n = 0;
        for (String id : seen.keySet()) {
            if (id.startsWith(tag + "-")) {
                n++;
            }
        }
        return n;
    }
}
