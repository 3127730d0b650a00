package sluice.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.admin.TransactionState;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.LongDeserializer;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams exactly_once_v2 word count on the three-broker cluster, with brokers SIGKILLed
 * mid-stream: input, output, repartition and changelog topics RF=3 with min.insync.replicas=2. A
 * producer feeds lines while the application counts; once a third is fed and the application has
 * a transaction open, the driver SIGKILLs the broker coordinating that transaction (the leader of
 * its __transaction_state partition), more lines are fed, and the broker is started again; then,
 * with lines flowing again, the leader of an output partition is SIGKILLed and started again the
 * same way. A read_committed reader of the output must find every word's count exactly right, no
 * count ever above the truth (a line counted twice) nor going backwards.
 */
public final class ClusterStreamsScenario {
    static final String APP = "sluice-cluster-wordcount", IN = "cstreams-lines", OUT = "cstreams-counts";
    static final String[] WORDS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
    static final int LINES = 600, PARTITIONS = 3;

    final Report rep = new Report();
    final String bootstrap = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
    final BufferedReader driver = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    public static void main(String[] args) throws Exception {
        ClusterStreamsScenario s = new ClusterStreamsScenario();
        s.rep.version("kafka-streams " + AppInfoParser.getVersion());
        s.rep.check("eos-v2 word count, broker SIGKILLed", s::run);
        System.exit(s.rep.failed() ? 1 : 0);
    }

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

    String run() throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        Map<String, Long> want = new ConcurrentHashMap<>();
        AtomicReference<Throwable> died = new AtomicReference<>();
        AtomicInteger fed = new AtomicInteger();
        String killed, started, killed2, started2;
        int linesAtKill, linesAtKill2;
        try (Admin admin = Admin.create(ap)) {
            Map<String, String> minIsr = Map.of("min.insync.replicas", "2");
            admin.createTopics(List.of(new NewTopic(IN, PARTITIONS, (short) 3).configs(minIsr),
                    new NewTopic(OUT, PARTITIONS, (short) 3).configs(minIsr))).all().get(30, TimeUnit.SECONDS);
            try (KafkaStreams app = new KafkaStreams(topology(), streamsConfig())) {
                app.setUncaughtExceptionHandler(e -> {
                    died.compareAndSet(null, e);
                    return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
                });
                app.start();
                // The coordinator of an open transaction of the application.
                Thread feeder = feed(0, 2 * LINES / 3, want, fed, died);
                String id = openTransaction(admin, fed, LINES / 3, died);
                linesAtKill = fed.get();
                killed = askDriver("kill-txn " + id);
                feeder.join(120000);
                started = askDriver("start");
                // The leader of an output partition, the application writing to it.
                feeder = feed(2 * LINES / 3, LINES, want, fed, died);
                awaitFed(fed, 2 * LINES / 3 + 30, died);
                linesAtKill2 = fed.get();
                killed2 = askDriver("kill-leader " + OUT + " 0");
                feeder.join(120000);
                started2 = askDriver("start");
                Map<String, Long> got = latestCounts(want, died);
                if (died.get() != null) {
                    throw new AssertionError("the application or the feeder died: " + died.get(), died.get());
                }
                if (!got.equals(want)) {
                    throw new AssertionError("counts " + got + ", want " + want);
                }
            }
        }
        return LINES + " lines fed while the application counted; " + killed + " after " + linesAtKill
                + " lines, the application's transaction listed Ongoing just before; " + started + "; " + killed2
                + " after " + linesAtKill2 + " lines; " + started2 + "; read_committed output: " + want.size()
                + " words counted exactly, no count ever above the truth or going back";
    }

    /** Feeds lines [from, to) on a new thread, a few at a time, recording each word in want. */
    Thread feed(int from, int to, Map<String, Long> want, AtomicInteger fed, AtomicReference<Throwable> died) {
        Thread t = new Thread(() -> {
            try (KafkaProducer<String, String> p = Transactions.producer(bootstrap, null)) {
                for (int i = from; i < to; i++) {
                    StringBuilder line = new StringBuilder();
                    for (int w = 0; w <= i % 5; w++) {
                        String word = WORDS[(i * 7 + w * 3) % WORDS.length];
                        line.append(word).append(' ');
                        want.merge(word, 1L, Long::sum);
                    }
                    p.send(new ProducerRecord<>(IN, null, line.toString().trim())).get(60, TimeUnit.SECONDS);
                    fed.incrementAndGet();
                    if (i % 10 == 9) {
                        Thread.sleep(50); // a stream, not one burst
                    }
                }
            } catch (Exception e) {
                died.compareAndSet(null, e);
            }
        }, "feeder");
        t.start();
        return t;
    }

    static void awaitFed(AtomicInteger fed, int n, AtomicReference<Throwable> died) throws Exception {
        long deadline = System.currentTimeMillis() + 60000;
        while (fed.get() < n && died.get() == null && System.currentTimeMillis() < deadline) {
            Thread.sleep(10);
        }
        if (fed.get() < n) {
            throw new AssertionError("fed " + fed.get() + " of " + n + " lines (" + died.get() + ")");
        }
    }

    /**
     * Waits until min lines are fed and the application has a transaction open (its
     * transactional ids are APP-<process>-<thread>), and returns that transactional id.
     */
    static String openTransaction(Admin admin, AtomicInteger fed, int min, AtomicReference<Throwable> died) throws Exception {
        awaitFed(fed, min, died);
        long deadline = System.currentTimeMillis() + 90000;
        while (System.currentTimeMillis() < deadline && died.get() == null) {
            for (TransactionListing l : admin.listTransactions().all().get(10, TimeUnit.SECONDS)) {
                if (l.transactionalId().startsWith(APP) && l.state() == TransactionState.ONGOING) {
                    return l.transactionalId();
                }
            }
            Thread.sleep(20);
        }
        throw new AssertionError("no open transaction of the application after " + fed.get() + " lines (" + died.get() + ")");
    }

    static org.apache.kafka.streams.Topology topology() {
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(IN)
                .flatMapValues(line -> List.of(line.split(" ")))
                .groupBy((k, word) -> word)
                .count()
                .toStream()
                .to(OUT, Produced.with(Serdes.String(), Serdes.Long()));
        return b.build();
    }

    Properties streamsConfig() throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, APP);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, Files.createTempDirectory("sluice-cluster-streams").toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 3);
        p.put(StreamsConfig.topicPrefix("min.insync.replicas"), "2");
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        return p;
    }

    /**
     * Reads the output at read_committed until every word's latest count is as wanted (120 s),
     * failing at once on a count above the truth or one going backwards.
     */
    Map<String, Long> latestCounts(Map<String, Long> want, AtomicReference<Throwable> died) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        Map<String, Long> got = new HashMap<>();
        try (KafkaConsumer<String, Long> cons = new KafkaConsumer<>(c, new StringDeserializer(), new LongDeserializer())) {
            List<TopicPartition> tps = List.of(new TopicPartition(OUT, 0), new TopicPartition(OUT, 1), new TopicPartition(OUT, 2));
            cons.assign(tps);
            cons.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 120000;
            while (!got.equals(want) && System.currentTimeMillis() < deadline && died.get() == null) {
                for (ConsumerRecord<String, Long> r : cons.poll(Duration.ofMillis(200))) {
                    Long prev = got.put(r.key(), r.value());
                    if (prev != null && r.value() < prev) {
                        throw new AssertionError("count of " + r.key() + " went from " + prev + " to " + r.value());
                    }
                    if (r.value() > want.getOrDefault(r.key(), 0L)) {
                        throw new AssertionError("count of " + r.key() + " is " + r.value() + ", more than the "
                                + want.get(r.key()) + " occurrences: a line was counted twice");
                    }
                }
            }
        }
        return got;
    }
}
