package sluice.interop;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.CommonClientConfigs;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ScramCredentialInfo;
import org.apache.kafka.clients.admin.ScramMechanism;
import org.apache.kafka.clients.admin.UserScramCredentialDeletion;
import org.apache.kafka.clients.admin.UserScramCredentialUpsertion;
import org.apache.kafka.clients.admin.UserScramCredentialsDescription;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.config.SaslConfigs;
import org.apache.kafka.common.config.SslConfigs;
import org.apache.kafka.common.errors.SaslAuthenticationException;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * The Java client and Kafka's CLI against Sluice's secure listeners (interop/driver/security.go):
 * a SCRAM-SHA-512 user made with AlterUserScramCredentials on the PLAINTEXT listener, records
 * over SASL_SSL, a wrong password and a deleted user refused with SaslAuthenticationException,
 * kafka-topics with a client properties file, records over mutual TLS, and a client without a
 * certificate refused.
 */
public final class SecurityScenario {
    static final int RECORDS = 50;

    final Report rep = new Report();
    final String plain = System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092");
    final String sasl = System.getenv("SLUICE_SASL_SSL_BOOTSTRAP");
    final String mtls = System.getenv("SLUICE_MTLS_BOOTSTRAP");
    final String tlsDir = System.getenv("SLUICE_TLS_DIR");

    public static void main(String[] args) throws Exception {
        System.exit(new SecurityScenario().run() ? 0 : 1);
    }

    Properties scram(String bootstrap, String password) {
        Properties p = base(bootstrap);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SASL_SSL");
        p.put(SaslConfigs.SASL_MECHANISM, "SCRAM-SHA-512");
        p.put(SaslConfigs.SASL_JAAS_CONFIG, "org.apache.kafka.common.security.scram.ScramLoginModule required "
                + "username=\"alice\" password=\"" + password + "\";");
        trust(p);
        return p;
    }

    Properties mutualTls(boolean withCert) {
        Properties p = base(mtls);
        p.put(CommonClientConfigs.SECURITY_PROTOCOL_CONFIG, "SSL");
        if (withCert) {
            p.put(SslConfigs.SSL_KEYSTORE_TYPE_CONFIG, "PEM");
            p.put(SslConfigs.SSL_KEYSTORE_LOCATION_CONFIG, tlsDir + "/client.pem");
        }
        trust(p);
        return p;
    }

    void trust(Properties p) {
        p.put(SslConfigs.SSL_TRUSTSTORE_TYPE_CONFIG, "PEM");
        p.put(SslConfigs.SSL_TRUSTSTORE_LOCATION_CONFIG, tlsDir + "/ca.pem");
    }

    static Properties base(String bootstrap) {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG, "20000");
        p.put(AdminClientConfig.REQUEST_TIMEOUT_MS_CONFIG, "10000");
        return p;
    }

    boolean run() {
        rep.version("kafka-clients " + AppInfoParser.getVersion());
        if (sasl == null || mtls == null || tlsDir == null) {
            rep.fail("scram user (AlterUserScramCredentials)", "the driver gave no secure listeners");
            return false;
        }
        rep.check("scram user (AlterUserScramCredentials)", () -> {
            try (Admin a = Admin.create(base(plain))) {
                a.alterUserScramCredentials(List.of(new UserScramCredentialUpsertion("alice",
                        new ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), "alice-secret")))
                        .all().get(30, TimeUnit.SECONDS);
                Map<String, UserScramCredentialsDescription> d =
                        a.describeUserScramCredentials(List.of("alice")).all().get(30, TimeUnit.SECONDS);
                ScramCredentialInfo info = d.get("alice").credentialInfos().get(0);
                if (info.mechanism() != ScramMechanism.SCRAM_SHA_512 || info.iterations() != 8192) {
                    throw new AssertionError("described " + info);
                }
                return "alice has SCRAM-SHA-512 with 8192 iterations";
            }
        });
        rep.check("SASL_SSL SCRAM-SHA-512 produce/consume", () -> roundTrip(scram(sasl, "alice-secret"), "java-sasl-ssl"));
        rep.check("SASL_SSL wrong password", () -> refused(scram(sasl, "wrong")));
        rep.check("kafka-topics over SASL_SSL (client properties file)", () -> {
            java.nio.file.Path props = java.nio.file.Files.createTempFile("sasl-ssl", ".properties");
            try (var w = java.nio.file.Files.newBufferedWriter(props)) {
                scram(sasl, "alice-secret").store(w, null);
            }
            Tool t = Tool.run(CliScenario.TOPICS, null, 90, "--bootstrap-server", sasl, "--command-config", props.toString(), "--list");
            if (t.exit != 0 || !t.out.contains("java-sasl-ssl")) {
                throw new AssertionError("kafka-topics --list: exit " + t.exit + ": " + Tool.clip(t.out + t.err));
            }
            return "kafka-topics --list --command-config lists java-sasl-ssl";
        });
        rep.check("mTLS produce/consume", () -> roundTrip(mutualTls(true), "java-mtls"));
        rep.check("mTLS without a client certificate", () -> {
            Properties p = mutualTls(false);
            try (Admin a = Admin.create(p)) {
                a.listTopics().names().get(30, TimeUnit.SECONDS);
            } catch (Exception e) {
                return "refused: " + e.getClass().getSimpleName() + " " + Report.oneLine(String.valueOf(e.getMessage()));
            }
            throw new AssertionError("a client without a certificate listed topics");
        });
        rep.check("deleted SCRAM user", () -> {
            try (Admin a = Admin.create(base(plain))) {
                a.alterUserScramCredentials(List.of(new UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)))
                        .all().get(30, TimeUnit.SECONDS);
            }
            return refused(scram(sasl, "alice-secret"));
        });
        return !rep.failed();
    }

    /** Creates topic through the secure listener, produces RECORDS and reads them back. */
    String roundTrip(Properties p, String topic) throws Exception {
        try (Admin a = Admin.create(p)) {
            a.createTopics(List.of(new NewTopic(topic, 1, (short) 1))).all().get(30, TimeUnit.SECONDS);
        }
        Properties pp = new Properties();
        pp.putAll(p);
        pp.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        pp.put(ProducerConfig.ACKS_CONFIG, "all");
        pp.remove(AdminClientConfig.DEFAULT_API_TIMEOUT_MS_CONFIG);
        try (KafkaProducer<String, String> prod = new KafkaProducer<>(pp)) {
            for (int i = 0; i < RECORDS; i++) {
                prod.send(new ProducerRecord<>(topic, "k" + i, "v" + i)).get(30, TimeUnit.SECONDS);
            }
        }
        Properties cp = new Properties();
        cp.putAll(p);
        cp.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        cp.put(ConsumerConfig.GROUP_ID_CONFIG, topic + "-group");
        cp.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<String, String> cons = new KafkaConsumer<>(cp)) {
            cons.subscribe(List.of(topic));
            long end = System.currentTimeMillis() + 30000;
            while (got.size() < RECORDS && System.currentTimeMillis() < end) {
                for (ConsumerRecord<String, String> r : cons.poll(Duration.ofMillis(500))) {
                    got.add(r.value());
                }
            }
        }
        for (int i = 0; i < RECORDS; i++) {
            if (got.size() <= i || !got.get(i).equals("v" + i)) {
                throw new AssertionError("consumed " + got.size() + " of " + RECORDS + " records, or out of order");
            }
        }
        return RECORDS + " records produced (acks=all) and consumed in a group";
    }

    /** Expects the client to be refused with SaslAuthenticationException. */
    static String refused(Properties p) throws Exception {
        try (Admin a = Admin.create(p)) {
            a.listTopics().names().get(30, TimeUnit.SECONDS);
        } catch (java.util.concurrent.ExecutionException e) {
            if (e.getCause() instanceof SaslAuthenticationException) {
                return "SaslAuthenticationException: " + Report.oneLine(e.getCause().getMessage());
            }
            throw e;
        }
        throw new AssertionError("served with bad credentials");
    }
}
