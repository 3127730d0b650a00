package sluice.interop;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Java transactions against the three-broker cluster: a transactional producer over an RF=3
 * topic commits, has its transaction coordinator stopped (controlled shutdown; the id's
 * __transaction_state partition moves to another broker), aborts one transaction and commits
 * another on the new coordinator, and commits once more after the broker is back. A
 * read_committed reader must find exactly the committed records.
 */
public final class ClusterTxnScenario {
    static final String TOPIC = "java-txn-rf3", ID = "java-cluster-txn";
    static final int PARTITIONS = 3, RECORDS = 30;

    final Report rep = new Report();
    final String bootstrap = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
    final BufferedReader driver = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));

    public static void main(String[] args) throws Exception {
        ClusterTxnScenario s = new ClusterTxnScenario();
        s.rep.version("kafka-clients " + AppInfoParser.getVersion());
        s.rep.check("transactions, coordinator stopped", s::run);
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
        try (Admin a = Admin.create(ap)) {
            a.createTopics(List.of(new NewTopic(TOPIC, PARTITIONS, (short) 3).configs(Map.of("min.insync.replicas", "2"))))
                    .all().get(30, TimeUnit.SECONDS);
        }
        Set<String> want = new TreeSet<>();
        String stopped, started;
        try (KafkaProducer<String, String> p = Transactions.producer(bootstrap, ID)) {
            p.initTransactions();
            txn(p, "c1", true, want);
            stopped = askDriver("stop-txn " + ID);
            txn(p, "a1", false, want);
            txn(p, "c2", true, want);
            started = askDriver("start");
            txn(p, "c3", true, want);
            p.beginTransaction();
            for (int part = 0; part < PARTITIONS; part++) {
                p.send(new ProducerRecord<>(TOPIC, part, "END", "END"));
            }
            p.commitTransaction();
        }
        Set<String> got = Transactions.readCommittedFrom(bootstrap, TOPIC, PARTITIONS);
        if (!got.equals(want)) {
            throw new AssertionError("read_committed read " + got.size() + " records " + got + ", want " + want);
        }
        return stopped + "; then an abort and a commit on the new coordinator; " + started
                + "; read_committed read exactly the " + want.size() + " committed records over RF=3";
    }

    static void txn(KafkaProducer<String, String> p, String tag, boolean commit, Set<String> want) {
        p.beginTransaction();
        for (int i = 0; i < RECORDS; i++) {
            String v = tag + "-" + i;
            p.send(new ProducerRecord<>(TOPIC, i % PARTITIONS, v, v));
            if (commit) {
                want.add(v);
            }
        }
        if (commit) {
            p.commitTransaction();
        } else {
            p.abortTransaction();
        }
    }
}
