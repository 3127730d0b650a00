package sluice.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.AcknowledgeType;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaShareConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Share groups (KIP-932) with Kafka 4.4's KafkaShareConsumer, and the kafka-share-groups tool:
 * <ul>
 * <li>share-implicit: two consumers in implicit acknowledgement mode on one partition consume
 * 100 records; every record arrives, none twice.</li>
 * <li>share-explicit: one consumer in explicit mode accepts the even offsets, releases the odd
 * ones but one, rejects that one; the released records come back with delivery count 2, the
 * accepted and rejected ones never.</li>
 * <li>share-groups tool: kafka-share-groups --list, --describe (members), --describe --offsets,
 * --reset-offsets and --delete.</li>
 * </ul>
 */
public final class ShareScenario {
    static final String TOPIC = "java-share";
    static final int RECORDS = 100;

    final String bootstrap;
    final Report rep = new Report();
    final Admin admin;

    ShareScenario(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        admin = Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
        ShareScenario s = new ShareScenario(bootstrap);
        boolean ok;
        try {
            ok = s.run();
        } finally {
            s.admin.close(Duration.ofSeconds(5));
        }
        System.exit(ok ? 0 : 1);
    }

    boolean run() {
        rep.version("kafka-clients " + AppInfoParser.getVersion());
        try {
            admin.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
            for (String g : List.of("java-share-implicit", "java-share-explicit", "java-share-tool")) {
                earliest(g);
            }
            produce(RECORDS);
        } catch (Exception e) {
            for (String cap : List.of("share-implicit", "share-explicit", "share-groups tool")) {
                rep.fail(cap, "setup: " + Report.oneLine(e.toString()));
            }
            return false;
        }
        rep.check("share-implicit", this::implicitMode);
        rep.check("share-explicit", this::explicitMode);
        rep.check("share-groups tool", this::tool);
        return !rep.failed();
    }

    void earliest(String group) throws Exception {
        ConfigResource res = new ConfigResource(ConfigResource.Type.GROUP, group);
        AlterConfigOp op = new AlterConfigOp(new ConfigEntry("share.auto.offset.reset", "earliest"), AlterConfigOp.OpType.SET);
        admin.incrementalAlterConfigs(Map.of(res, List.<AlterConfigOp>of(op))).all().get(30, TimeUnit.SECONDS);
    }

    void produce(int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(p)) {
            for (int i = 0; i < n; i++) {
                prod.send(new ProducerRecord<>(TOPIC, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
    }

    KafkaShareConsumer<String, String> consumer(String group, String mode) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("group.id", group);
        p.put("share.acknowledgement.mode", mode);
        p.put("key.deserializer", StringDeserializer.class.getName());
        p.put("value.deserializer", StringDeserializer.class.getName());
        KafkaShareConsumer<String, String> c = new KafkaShareConsumer<>(p);
        c.subscribe(List.of(TOPIC));
        return c;
    }

    String implicitMode() throws Exception {
        Map<Long, Integer> seen = new ConcurrentHashMap<>();
        AtomicBoolean stop = new AtomicBoolean();
        long deadline = System.currentTimeMillis() + 60_000;
        List<Thread> threads = new ArrayList<>();
        List<Throwable> errors = new ArrayList<>();
        int[] perConsumer = new int[2];
        for (int i = 0; i < 2; i++) {
            final int id = i;
            Thread t = new Thread(() -> {
                try (KafkaShareConsumer<String, String> c = consumer("java-share-implicit", "implicit")) {
                    while (!stop.get() && System.currentTimeMillis() < deadline) {
                        for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                            seen.merge(r.offset(), 1, Integer::sum);
                            perConsumer[id]++;
                        }
                        if (seen.size() >= RECORDS) {
                            stop.set(true);
                        }
                    }
                    c.commitSync();
                } catch (Throwable e) {
                    synchronized (errors) {
                        errors.add(e);
                    }
                    stop.set(true);
                }
            });
            threads.add(t);
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (!errors.isEmpty()) {
            throw new AssertionError("consumer failed: " + errors.get(0), errors.get(0));
        }
        if (seen.size() != RECORDS) {
            throw new AssertionError("saw " + seen.size() + " of " + RECORDS + " offsets");
        }
        for (Map.Entry<Long, Integer> e : seen.entrySet()) {
            if (e.getValue() != 1) {
                throw new AssertionError("offset " + e.getKey() + " delivered " + e.getValue() + " times");
            }
        }
        return RECORDS + " records over two consumers (" + perConsumer[0] + " + " + perConsumer[1] + "), none twice";
    }

    String explicitMode() throws Exception {
        try (KafkaShareConsumer<String, String> c = consumer("java-share-explicit", "explicit")) {
            List<ConsumerRecord<String, String>> first = pollUntil(c, RECORDS);
            int released = 0;
            for (ConsumerRecord<String, String> r : first) {
                short dc = r.deliveryCount().orElse((short) -1);
                if (dc != 1) {
                    throw new AssertionError("first delivery of offset " + r.offset() + " has delivery count " + dc);
                }
                AcknowledgeType t = r.offset() % 2 == 0 ? AcknowledgeType.ACCEPT
                        : r.offset() == 1 ? AcknowledgeType.REJECT : AcknowledgeType.RELEASE;
                if (t == AcknowledgeType.RELEASE) {
                    released++;
                }
                c.acknowledge(r, t);
            }
            c.commitSync();
            List<ConsumerRecord<String, String>> again = pollUntil(c, released);
            for (ConsumerRecord<String, String> r : again) {
                if (r.offset() % 2 == 0 || r.offset() == 1) {
                    throw new AssertionError("offset " + r.offset() + " was accepted or rejected and came back");
                }
                short dc = r.deliveryCount().orElse((short) -1);
                if (dc != 2) {
                    throw new AssertionError("redelivered offset " + r.offset() + " has delivery count " + dc);
                }
                c.acknowledge(r, AcknowledgeType.ACCEPT);
            }
            c.commitSync();
            if (again.size() != released) {
                throw new AssertionError(released + " released, " + again.size() + " redelivered");
            }
            List<ConsumerRecord<String, String>> none = new ArrayList<>();
            c.poll(Duration.ofSeconds(1)).forEach(none::add);
            if (!none.isEmpty()) {
                throw new AssertionError("after accepting everything, offset " + none.get(0).offset() + " came again");
            }
            return RECORDS / 2 + " accepted, 1 rejected, " + released + " released and redelivered with delivery count 2";
        }
    }

    static List<ConsumerRecord<String, String>> pollUntil(KafkaShareConsumer<String, String> c, int n) {
        List<ConsumerRecord<String, String>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 30_000;
        while (out.size() < n && System.currentTimeMillis() < deadline) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                out.add(r);
            }
            if (out.size() < n && !out.isEmpty()) {
                // Explicit mode: a poll with unacknowledged records throws; collect first, then ack.
                break;
            }
        }
        if (out.size() < n) {
            throw new AssertionError("polled " + out.size() + " of " + n + " records");
        }
        return out;
    }

    String tool() throws Exception {
        String cls = "org.apache.kafka.tools.consumer.group.ShareGroupCommand";
        String group = "java-share-tool";
        try (KafkaShareConsumer<String, String> c = consumer(group, "implicit")) {
            List<ConsumerRecord<String, String>> got = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 30_000;
            while (got.size() < RECORDS && System.currentTimeMillis() < deadline) {
                c.poll(Duration.ofMillis(500)).forEach(got::add);
            }
            c.commitSync();
            Tool list = Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--list").ok();
            if (!list.out.contains(group)) {
                throw new AssertionError(list.failure("does not list " + group));
            }
            Tool members = Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--members").ok();
            if (!members.out.contains(TOPIC + ":0")) {
                throw new AssertionError(members.failure("shows no member assigned " + TOPIC + ":0"));
            }
        }
        Tool offsets = Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--offsets").ok();
        if (!offsets.out.contains(TOPIC) || !offsets.out.contains(String.valueOf(RECORDS))) {
            throw new AssertionError(offsets.failure("does not show start offset " + RECORDS + " of " + TOPIC));
        }
        Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--reset-offsets", "--group", group,
                "--topic", TOPIC, "--to-earliest", "--execute").ok();
        Tool after = Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--describe", "--group", group, "--offsets").ok();
        if (!after.out.contains(TOPIC)) {
            throw new AssertionError(after.failure("does not show " + TOPIC + " after --reset-offsets"));
        }
        Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--delete", "--group", group).ok();
        Tool gone = Tool.run(cls, null, 60, "--bootstrap-server", bootstrap, "--list").ok();
        if (gone.out.contains(group)) {
            throw new AssertionError(gone.failure("still lists " + group + " after --delete"));
        }
        return "--list, --describe --members, --describe --offsets, --reset-offsets --to-earliest, --delete";
    }
}
