package sluice.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client's transactions step: a transactional KafkaProducer commits one transaction
 * and aborts another over three partitions, then copies a topic consume-transform-produce style
 * (sendOffsetsToTransaction with the consumer's group metadata); a read_committed consumer must
 * read exactly the committed and copied records, and the group's committed offsets must cover
 * the input.
 */
final class Transactions {
    static final int PARTITIONS = 3;
    static final int RECORDS = 30;

    private Transactions() {}

    static String run(String bootstrap, Admin admin) throws Exception {
        String out = "java-txn", in = "java-txn-in", group = "java-txn-copier";
        admin.createTopics(List.of(new NewTopic(out, PARTITIONS, (short) 1), new NewTopic(in, PARTITIONS, (short) 1)))
                .all().get(30, TimeUnit.SECONDS);
        Set<String> want = new TreeSet<>();
        try (KafkaProducer<String, String> p = producer(bootstrap, "java-txn")) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < RECORDS; i++) {
                p.send(new ProducerRecord<>(out, i % PARTITIONS, "c-" + i, "c-" + i));
                want.add("c-" + i);
            }
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < RECORDS; i++) {
                p.send(new ProducerRecord<>(out, i % PARTITIONS, "a-" + i, "a-" + i));
            }
            p.abortTransaction();
        }
        try (KafkaProducer<String, String> plain = producer(bootstrap, null)) {
            for (int i = 0; i < RECORDS; i++) {
                plain.send(new ProducerRecord<>(in, i % PARTITIONS, "in-" + i, "in-" + i));
                want.add("copied-in-" + i);
            }
        }
        copy(bootstrap, in, out, group);
        try (KafkaProducer<String, String> p = producer(bootstrap, "java-txn")) {
            p.initTransactions();
            p.beginTransaction();
            for (int part = 0; part < PARTITIONS; part++) {
                p.send(new ProducerRecord<>(out, part, "END", "END"));
            }
            p.commitTransaction();
        }
        Set<String> got = readCommitted(bootstrap, out);
        if (!got.equals(want)) {
            throw new AssertionError("read_committed read " + got.size() + " records " + got + ", want " + want);
        }
        long committed = 0;
        for (OffsetAndMetadata o : admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata()
                .get(30, TimeUnit.SECONDS).values()) {
            committed += o.offset();
        }
        if (committed != RECORDS) {
            throw new AssertionError("the copier's committed offsets add up to " + committed + ", want " + RECORDS);
        }
        return RECORDS + " committed, " + RECORDS + " aborted (unseen), " + RECORDS
                + " copied with sendOffsetsToTransaction; read_committed read exactly the committed ones";
    }

    static KafkaProducer<String, String> producer(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.ACKS_CONFIG, "all");
        p.put(ProducerConfig.MAX_BLOCK_MS_CONFIG, 30000);
        if (txnId != null) {
            p.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, txnId);
        }
        return new KafkaProducer<>(p, new StringSerializer(), new StringSerializer());
    }

    static KafkaConsumer<String, String> consumer(String bootstrap, String group) {
        Properties c = new Properties();
        c.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        c.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        c.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        c.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, false);
        if (group != null) {
            c.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        }
        return new KafkaConsumer<>(c, new StringDeserializer(), new StringDeserializer());
    }

    /** Copies every record of in to out in one transaction that also commits the group's offsets. */
    static void copy(String bootstrap, String in, String out, String group) {
        try (KafkaConsumer<String, String> c = consumer(bootstrap, group);
                KafkaProducer<String, String> p = producer(bootstrap, "java-txn-copier")) {
            p.initTransactions();
            c.subscribe(List.of(in));
            List<ConsumerRecord<String, String>> recs = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60000;
            while (recs.size() < RECORDS) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("the copier consumed " + recs.size() + " of " + RECORDS);
                }
                c.poll(Duration.ofMillis(200)).forEach(recs::add);
            }
            p.beginTransaction();
            Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
            for (ConsumerRecord<String, String> r : recs) {
                p.send(new ProducerRecord<>(out, r.partition(), r.key(), "copied-" + r.value()));
                offsets.put(new TopicPartition(r.topic(), r.partition()), new OffsetAndMetadata(r.offset() + 1));
            }
            p.sendOffsetsToTransaction(offsets, c.groupMetadata());
            p.commitTransaction();
        }
    }

    static Set<String> readCommitted(String bootstrap, String topic) {
        return readCommittedFrom(bootstrap, topic, PARTITIONS);
    }

    /** Reads every partition of topic to its END record with read_committed. */
    static Set<String> readCommittedFrom(String bootstrap, String topic, int partitions) {
        Set<String> got = new TreeSet<>();
        try (KafkaConsumer<String, String> c = consumer(bootstrap, null)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) {
                tps.add(new TopicPartition(topic, i));
            }
            c.assign(tps);
            c.seekToBeginning(tps);
            Set<Integer> ended = new HashSet<>();
            long deadline = System.currentTimeMillis() + 60000;
            while (ended.size() < partitions) {
                if (System.currentTimeMillis() > deadline) {
                    throw new AssertionError("read_committed: " + ended.size() + " of " + partitions
                            + " partitions reached END; read " + got);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                    if (r.value().equals("END")) {
                        ended.add(r.partition());
                    } else if (!got.add(r.value())) {
                        throw new AssertionError("read " + r.value() + " twice");
                    }
                }
            }
        }
        return got;
    }
}
