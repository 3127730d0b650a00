package sluice.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Consumer;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.Config;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CommitFailedException;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.CooperativeStickyAssignor;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.RangeAssignor;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.RebalanceInProgressException;
import org.apache.kafka.common.errors.UnsupportedVersionException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Apache Kafka's Java client (KafkaProducer, KafkaConsumer, Admin) against Sluice: the same
 * script as interop/go, plus the group scenario under both assignment-strategy families.
 */
public final class ClientScenario {
    static final int CODEC_PARTITIONS = 3;
    static final int GROUP_PARTITIONS = 4;
    static final int CODEC_RECORDS = 120;
    static final int GROUP_RECORDS = 100;
    /** Time for a restarted member to join before the rest of phase 2 is produced. */
    static final long REJOIN_WAIT_MS = 4000;
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};

    final String bootstrap;
    final Report rep = new Report();
    final Admin admin;

    ClientScenario(String bootstrap) {
        this.bootstrap = bootstrap;
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, 30000);
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        admin = Admin.create(p);
    }

    public static void main(String[] args) throws Exception {
        String bootstrap = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
        ClientScenario s = new ClientScenario(bootstrap);
        boolean ok;
        try {
            ok = s.run();
        } finally {
            s.admin.close(Duration.ofSeconds(5));
        }
        System.exit(ok ? 0 : 1);
    }

    static String topic(String suffix) {
        return "java-" + suffix;
    }

    boolean run() {
        rep.version("kafka-clients " + AppInfoParser.getVersion());
        long t0 = System.currentTimeMillis() - 5 * 60 * 1000;

        List<String> codecTopics = new ArrayList<>();
        for (String c : CODECS) {
            codecTopics.add(topic("codec-" + c));
        }
        codecTopics.add(topic("codec-idempotent"));
        List<String> groupTopics = List.of(topic("group-eager"), topic("group-cooperative"), topic("group-kip848"),
                topic("group-kip848-regex"));
        rep.check("create-topic", () -> {
            List<NewTopic> nts = new ArrayList<>();
            for (String t : codecTopics) {
                nts.add(new NewTopic(t, CODEC_PARTITIONS, (short) 1));
            }
            for (String t : groupTopics) {
                nts.add(new NewTopic(t, GROUP_PARTITIONS, (short) 1));
            }
            admin.createTopics(nts).all().get(30, TimeUnit.SECONDS);
            List<String> all = new ArrayList<>(codecTopics);
            all.addAll(groupTopics);
            Map<String, TopicDescription> d = admin.describeTopics(all).allTopicNames().get(30, TimeUnit.SECONDS);
            for (String t : all) {
                int want = groupTopics.contains(t) ? GROUP_PARTITIONS : CODEC_PARTITIONS;
                int got = d.get(t).partitions().size();
                if (got != want) {
                    throw new AssertionError("metadata of " + t + ": " + got + " partitions, created with " + want);
                }
            }
            return all.size() + " topics, describeTopics shows their partitions";
        });

        List<Rec> noneSent = null;
        for (String codec : CODECS) {
            List<Rec> sent = Rec.make(topic("codec-" + codec), CODEC_RECORDS, t0);
            if (rep.check("codec-" + codec, () -> produceConsume(topic("codec-" + codec), codec, false, sent))
                    && codec.equals("none")) {
                noneSent = sent;
            }
        }
        List<Rec> idem = Rec.make(topic("codec-idempotent"), CODEC_RECORDS, t0);
        rep.check("idempotence", () -> produceConsume(topic("codec-idempotent"), "none", true, idem));

        rep.check("group-eager", () -> groupScenario(topic("group-eager"), "java-eager", RangeAssignor.class, t0));
        rep.check("group-cooperative",
                () -> groupScenario(topic("group-cooperative"), "java-cooperative", CooperativeStickyAssignor.class, t0));
        kip848("group-kip848", t0, false);
        kip848("group-kip848-regex", t0, true);
        rep.check("transactions", () -> Transactions.run(bootstrap, admin));

        if (noneSent == null) {
            rep.fail("list-offsets", "not run: the uncompressed produce step failed");
        } else {
            List<Rec> sent = noneSent;
            rep.check("list-offsets", () -> checkOffsets(topic("codec-none"), sent, t0));
        }

        ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, topic("codec-none"));
        rep.check("describe-config", () -> {
            ConfigEntry e = describe(res, "retention.ms");
            if (e == null) {
                throw new AssertionError("retention.ms missing from DescribeConfigs");
            }
            return "retention.ms=" + e.value() + " source=" + e.source();
        });
        rep.check("alter-config", () -> {
            String v = "86400000";
            admin.incrementalAlterConfigs(Map.of(res,
                    List.of(new AlterConfigOp(new ConfigEntry("retention.ms", v), AlterConfigOp.OpType.SET))))
                    .all().get(30, TimeUnit.SECONDS);
            ConfigEntry e = describe(res, "retention.ms");
            if (e == null || !v.equals(e.value())) {
                throw new AssertionError("after altering retention.ms to " + v + ", DescribeConfigs says " + e);
            }
            if (e.source() != ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG) {
                throw new AssertionError("retention.ms source " + e.source() + ", want DYNAMIC_TOPIC_CONFIG");
            }
            return "incrementalAlterConfigs retention.ms=" + v + ", read back as DYNAMIC_TOPIC_CONFIG";
        });
        return !rep.failed();
    }

    /**
     * The group scenario on Kafka 4's consumer rebalance protocol (KIP-848). A broker that does
     * not serve ConsumerGroupHeartbeat makes the client fail with UnsupportedVersionException:
     * that is reported as a gap, not a failure; anything else is judged as usual. With pattern
     * set, the members subscribe with a SubscriptionPattern, a regular expression the broker
     * resolves (RE2J syntax).
     */
    void kip848(String step, long t0, boolean pattern) {
        String topic = topic(step);
        // Matches the step's topic and not the other group topics.
        String regex = pattern ? topic.substring(0, topic.length() - 2) + "[a-z]x" : null;
        try {
            rep.pass(step, groupScenario(topic, "java-" + step.substring("group-".length()), null, regex, t0));
        } catch (Throwable e) {
            for (Throwable c = e; c != null; c = c.getCause()) {
                if (c instanceof UnsupportedVersionException) {
                    rep.gap(step, "ConsumerGroupHeartbeat: " + c.getMessage());
                    return;
                }
            }
            e.printStackTrace();
            rep.fail(step, Report.describe(e));
        }
    }

    ConfigEntry describe(ConfigResource res, String name) throws Exception {
        Config c = admin.describeConfigs(List.of(res)).all().get(30, TimeUnit.SECONDS).get(res);
        return c.get(name);
    }

    Properties producerProps(String codec, boolean idempotent) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
        p.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, Boolean.toString(idempotent));
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        p.put(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG, 30000);
        p.put(ProducerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        return p;
    }

    /** Sends recs in order and records where each went. */
    void produce(String topic, String codec, boolean idempotent, List<Rec> recs) throws Exception {
        try (KafkaProducer<String, String> p = new KafkaProducer<>(producerProps(codec, idempotent))) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (Rec r : recs) {
                fs.add(p.send(r.toProducer(topic)));
            }
            p.flush();
            for (int i = 0; i < recs.size(); i++) {
                RecordMetadata md = fs.get(i).get(30, TimeUnit.SECONDS);
                recs.get(i).partition = md.partition();
                recs.get(i).offset = md.offset();
            }
        }
    }

    Properties consumerProps(String group) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        if (group != null) {
            p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        p.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.REQUEST_TIMEOUT_MS_CONFIG, 15000);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        return p;
    }

    List<Rec> consume(String topic, int n) {
        List<Rec> out = new ArrayList<>();
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(consumerProps(null))) {
            List<TopicPartition> tps = new ArrayList<>();
            c.partitionsFor(topic).forEach(pi -> tps.add(new TopicPartition(topic, pi.partition())));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30000;
            while (out.size() < n && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> cr : c.poll(Duration.ofMillis(500))) {
                    out.add(Rec.from(cr));
                }
            }
        }
        if (out.size() < n) {
            throw new AssertionError("consumed " + out.size() + " of " + n + " records within 30s");
        }
        return out;
    }

    String produceConsume(String topic, String codec, boolean idempotent, List<Rec> sent) throws Exception {
        produce(topic, codec, idempotent, sent);
        Rec.verifyExact(sent, consume(topic, sent.size()));
        return sent.size() + " records, acks=all" + (idempotent ? ", idempotent" : "") + ", compression " + codec
                + ", read back exactly";
    }

    /** One group member polling in its own thread; the consumer is confined to that thread. */
    final class Member implements Runnable {
        final String group;
        final String topic;
        final Class<?> assignor;
        final String pattern; // a SubscriptionPattern to subscribe with, else the topic by name
        final Consumer<Rec> got;
        final AtomicInteger count = new AtomicInteger();
        final AtomicReference<Throwable> error = new AtomicReference<>();
        volatile boolean stop;
        final Thread thread;

        Member(String name, String group, String topic, Class<?> assignor, String pattern, Consumer<Rec> got) {
            this.group = group;
            this.topic = topic;
            this.assignor = assignor;
            this.pattern = pattern;
            this.got = got;
            thread = new Thread(this, name);
            thread.start();
        }

        @Override
        public void run() {
            Properties p = consumerProps(group);
            if (assignor != null) {
                p.put(ConsumerConfig.PARTITION_ASSIGNMENT_STRATEGY_CONFIG, assignor.getName());
            } else {
                p.put(ConsumerConfig.GROUP_PROTOCOL_CONFIG, "consumer");
            }
            p.put(ConsumerConfig.MAX_POLL_RECORDS_CONFIG, 20);
            try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
                ConsumerRebalanceListener listener = new ConsumerRebalanceListener() {
                    @Override
                    public void onPartitionsRevoked(Collection<TopicPartition> parts) {
                        System.err.println(thread.getName() + " revoked " + parts);
                    }

                    @Override
                    public void onPartitionsAssigned(Collection<TopicPartition> parts) {
                        System.err.println(thread.getName() + " assigned " + parts);
                    }
                };
                if (pattern != null) {
                    c.subscribe(new SubscriptionPattern(pattern), listener);
                } else {
                    c.subscribe(List.of(topic), listener);
                }
                while (!stop) {
                    ConsumerRecords<String, String> rs = c.poll(Duration.ofMillis(200));
                    if (rs.isEmpty()) {
                        continue;
                    }
                    try {
                        c.commitSync(Duration.ofSeconds(15));
                    } catch (RebalanceInProgressException | CommitFailedException e) {
                        // The group moved on before the commit: rewind what is still ours to the
                        // committed offsets, so these records come again, from us or the new owner.
                        System.err.println(thread.getName() + " commit during a rebalance: " + e);
                        for (TopicPartition tp : rs.partitions()) {
                            if (c.assignment().contains(tp)) {
                                c.seek(tp, rs.records(tp).get(0).offset());
                            }
                        }
                        continue;
                    }
                    for (ConsumerRecord<String, String> cr : rs) {
                        count.incrementAndGet();
                        got.accept(Rec.from(cr));
                    }
                }
            } catch (Throwable e) {
                error.set(e);
                e.printStackTrace();
            }
        }

        void close() throws Exception {
            stop = true;
            thread.join(60000);
            if (error.get() != null) {
                throw new AssertionError(thread.getName() + " failed: " + Report.describe(error.get()), error.get());
            }
        }
    }

    /**
     * Two members split the topic and consume phase 1 once, committing; one leaves; phase 2 is
     * produced; a new member joins; the group must deliver exactly phase 2.
     */
    String groupScenario(String topic, String group, Class<?> assignor, long t0) throws Exception {
        return groupScenario(topic, group, assignor, null, t0);
    }

    String groupScenario(String topic, String group, Class<?> assignor, String pattern, long t0) throws Exception {
        Map<String, Integer> counts = new ConcurrentHashMap<>();
        List<String> redelivered = Collections.synchronizedList(new ArrayList<>());
        AtomicReference<String> phase = new AtomicReference<>(topic + "-p1");
        Consumer<Rec> got = r -> {
            counts.merge(r.id(), 1, Integer::sum);
            if (!r.id().startsWith(phase.get())) {
                redelivered.add(r.id() + " at " + r.partition + "/" + r.offset);
            }
        };
        List<Rec> p1 = Rec.make(topic + "-p1", GROUP_RECORDS, t0);
        produce(topic, "none", false, p1);
        Member a = new Member(group + "-a", group, topic, assignor, pattern, got);
        Member b = new Member(group + "-b", group, topic, assignor, pattern, got);
        try {
            await(counts, topic + "-p1", a, b);
            String split1 = "phase 1 split " + a.count.get() + "/" + b.count.get();
            int bBefore = b.count.get();
            a.close();
            phase.set(topic + "-p2");
            // Half of phase 2 before the restarted member joins (the survivor takes over the
            // leaver's partitions from their committed offsets), half once it has had time to get
            // partitions of its own (it resumes from the survivor's commits).
            List<Rec> p2 = Rec.make(topic + "-p2", GROUP_RECORDS, t0 + 1000);
            produce(topic, "none", false, p2.subList(0, GROUP_RECORDS / 2));
            Member a2 = new Member(group + "-a2", group, topic, assignor, pattern, got);
            try {
                Thread.sleep(REJOIN_WAIT_MS);
                produce(topic, "none", false, p2.subList(GROUP_RECORDS / 2, GROUP_RECORDS));
                await(counts, topic + "-p2", a2, b);
                Thread.sleep(500);
            } finally {
                a2.close();
            }
            if (!redelivered.isEmpty()) {
                throw new AssertionError("did not resume from the committed offsets: " + redelivered.size()
                        + " phase-1 records delivered again after restart, e.g. " + redelivered.get(0));
            }
            long dups = counts.values().stream().filter(n -> n > 1).count();
            if (dups > 0) {
                throw new AssertionError(dups + " records delivered twice though every delivery was committed first");
            }
            String how = assignor != null ? assignor.getSimpleName()
                    : "group.protocol=consumer" + (pattern != null ? ", SubscriptionPattern " + pattern : "");
            return how + ": " + split1 + "; phase 2 split " + a2.count.get() + "/"
                    + (b.count.get() - bBefore) + " after restart";
        } finally {
            a.stop = true;
            b.close();
            a.thread.join(60000);
        }
    }

    static void await(Map<String, Integer> counts, String prefix, Member... ms) throws Exception {
        long deadline = System.currentTimeMillis() + 90000;
        while (true) {
            long n = counts.keySet().stream().filter(k -> k.startsWith(prefix)).count();
            if (n == GROUP_RECORDS) {
                return;
            }
            for (Member m : ms) {
                if (m.error.get() != null) {
                    throw new AssertionError(m.thread.getName() + " failed: " + Report.describe(m.error.get()), m.error.get());
                }
            }
            if (System.currentTimeMillis() > deadline) {
                throw new AssertionError("only " + n + " of " + GROUP_RECORDS + " records of " + prefix
                        + " consumed within 90s");
            }
            Thread.sleep(50);
        }
    }

    String checkOffsets(String topic, List<Rec> sent, long t0) throws Exception {
        Map<Integer, Long> wantLatest = new HashMap<>();
        Map<Integer, List<Rec>> byPart = new HashMap<>();
        for (Rec r : sent) {
            wantLatest.merge(r.partition, r.offset + 1, Math::max);
            byPart.computeIfAbsent(r.partition, k -> new ArrayList<>()).add(r);
        }
        Map<TopicPartition, OffsetSpec> earliest = new HashMap<>();
        Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
        for (int p = 0; p < CODEC_PARTITIONS; p++) {
            earliest.put(new TopicPartition(topic, p), OffsetSpec.earliest());
            latest.put(new TopicPartition(topic, p), OffsetSpec.latest());
        }
        var e = admin.listOffsets(earliest).all().get(30, TimeUnit.SECONDS);
        var l = admin.listOffsets(latest).all().get(30, TimeUnit.SECONDS);
        for (int p = 0; p < CODEC_PARTITIONS; p++) {
            TopicPartition tp = new TopicPartition(topic, p);
            if (e.get(tp).offset() != 0) {
                throw new AssertionError("partition " + p + ": earliest " + e.get(tp).offset() + ", want 0");
            }
            long want = wantLatest.getOrDefault(p, 0L);
            if (l.get(tp).offset() != want) {
                throw new AssertionError("partition " + p + ": latest " + l.get(tp).offset() + ", want " + want);
            }
        }
        Map<TopicPartition, OffsetSpec> maxTs = new HashMap<>();
        for (int p : byPart.keySet()) {
            maxTs.put(new TopicPartition(topic, p), OffsetSpec.maxTimestamp());
        }
        var m = admin.listOffsets(maxTs).all().get(30, TimeUnit.SECONDS);
        for (var entry : byPart.entrySet()) {
            Rec last = entry.getValue().get(entry.getValue().size() - 1);
            var info = m.get(new TopicPartition(topic, entry.getKey()));
            if (info.offset() != last.offset || info.timestamp() != last.timestamp) {
                throw new AssertionError("partition " + entry.getKey() + ": max timestamp at offset " + info.offset()
                        + " (" + info.timestamp() + "), want " + last.offset + " (" + last.timestamp + ")");
            }
        }
        for (var entry : byPart.entrySet()) {
            List<Rec> rs = entry.getValue();
            Rec mid = rs.get(rs.size() / 2);
            long[][] probes = {{t0 - 3600_000, rs.get(0).offset}, {mid.timestamp, mid.offset}};
            for (long[] probe : probes) {
                TopicPartition tp = new TopicPartition(topic, entry.getKey());
                ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(probe[0])))
                        .partitionResult(tp).get(30, TimeUnit.SECONDS);
                if (info.offset() != probe[1]) {
                    throw new AssertionError("partition " + entry.getKey() + " by time " + probe[0] + ": offset "
                            + info.offset() + ", want " + probe[1]);
                }
            }
        }
        return "earliest, latest, max-timestamp and by-time offsets of " + CODEC_PARTITIONS + " partitions";
    }
}
