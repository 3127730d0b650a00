package sluice.interop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
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
import org.apache.kafka.streams.kstream.Produced;

/**
 * Kafka Streams with processing.guarantee=exactly_once_v2: a word count (a repartition topic, a
 * changelogged store, transactional output). Half the input is counted, the application is
 * closed and started again from its committed state, the rest is counted; a read_committed
 * reader of the output must find every word's count exactly right.
 */
public final class StreamsScenario {
    static final String IN = "streams-lines", OUT = "streams-counts";
    static final String[] WORDS = {"alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta"};
    static final int LINES = 200;

    public static void main(String[] args) throws Exception {
        String bs = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
        Report rep = new Report();
        rep.version("kafka-streams " + AppInfoParser.getVersion());
        rep.check("eos-v2 word count", () -> wordCount(bs));
        System.exit(rep.failed() ? 1 : 0);
    }

    static String wordCount(String bs) throws Exception {
        Properties ap = new Properties();
        ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        try (Admin admin = Admin.create(ap)) {
            admin.createTopics(List.of(new NewTopic(IN, 3, (short) 1), new NewTopic(OUT, 3, (short) 1)))
                    .all().get(30, TimeUnit.SECONDS);
        }
        Map<String, Long> want = new HashMap<>();
        Path state = Files.createTempDirectory("sluice-streams");
        produce(bs, 0, LINES / 2, want);
        runUntil(bs, state, want);
        produce(bs, LINES / 2, LINES, want);
        runUntil(bs, state, want);
        return LINES + " lines, " + want.size() + " words counted exactly across an application restart"
                + " (exactly_once_v2: transactional output, changelog and repartition topics)";
    }

    static void produce(String bs, int from, int to, Map<String, Long> want) {
        try (KafkaProducer<String, String> p = Transactions.producer(bs, null)) {
            for (int i = from; i < to; i++) {
                StringBuilder line = new StringBuilder();
                for (int w = 0; w <= i % 5; w++) {
                    String word = WORDS[(i * 7 + w * 3) % WORDS.length];
                    line.append(word).append(' ');
                    want.merge(word, 1L, Long::sum);
                }
                p.send(new ProducerRecord<>(IN, null, line.toString().trim()));
            }
        }
    }

    /** Runs the application until the output shows every count of want, then closes it. */
    static void runUntil(String bs, Path state, Map<String, Long> want) throws Exception {
        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, "sluice-wordcount");
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.STATE_DIR_CONFIG, state.toString());
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.DEFAULT_KEY_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.DEFAULT_VALUE_SERDE_CLASS_CONFIG, Serdes.String().getClass());
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
        StreamsBuilder b = new StreamsBuilder();
        b.<String, String>stream(IN)
                .flatMapValues(line -> List.of(line.split(" ")))
                .groupBy((k, word) -> word)
                .count()
                .toStream()
                .to(OUT, Produced.with(Serdes.String(), Serdes.Long()));
        try (KafkaStreams app = new KafkaStreams(b.build(), p)) {
            app.start();
            Map<String, Long> got = latestCounts(bs, want);
            if (!got.equals(want)) {
                throw new AssertionError("counts " + got + ", want " + want);
            }
        }
    }

    /** Reads the output at read_committed until every word's latest count is as wanted (60 s). */
    static Map<String, Long> latestCounts(String bs, Map<String, Long> want) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bs);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        Map<String, Long> got = new HashMap<>();
        try (KafkaConsumer<String, Long> cons = new KafkaConsumer<>(c, new StringDeserializer(), new LongDeserializer())) {
            List<TopicPartition> tps = List.of(new TopicPartition(OUT, 0), new TopicPartition(OUT, 1), new TopicPartition(OUT, 2));
            cons.assign(tps);
            cons.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 90000;
            while (!got.equals(want) && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, Long> r : cons.poll(Duration.ofMillis(200))) {
                    Long prev = got.put(r.key(), r.value());
                    if (prev != null && r.value() < prev) {
                        throw new AssertionError("count of " + r.key() + " went from " + prev + " to " + r.value());
                    }
                    if (r.value() > want.getOrDefault(r.key(), 0L)) {
                        throw new AssertionError("count of " + r.key() + " is " + r.value() + ", more than the "
                                + want.get(r.key()) + " occurrences: a record was counted twice");
                    }
                }
            }
        }
        return got;
    }
}
