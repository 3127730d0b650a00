package sluice.interop;

import java.io.File;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.serialization.StringSerializer;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Kafka's kafka-dump-log (org.apache.kafka.tools.DumpLogSegments) reads Sluice's segment files.
 *
 * <p>`produce` (broker up) writes a deterministic fixture into topic dumplog: one batch run per
 * codec, then enough uncompressed data to roll a second 1 MiB segment. `verify` (after the broker
 * stopped cleanly) dumps every .log with --deep-iteration and compares each record with the
 * fixture, dumps every .index and .timeindex (which checks each entry against the log), and runs
 * --index-sanity-check, the check Kafka uses at startup to decide whether to rebuild an index.
 *
 * <p>Verification runs after the broker's clean shutdown, as for Kafka: the active segment's
 * .timeindex is preallocated (10 MiB of zeros, like Kafka's) while the broker runs, and Kafka's
 * own sanity check rejects such a file ("last timestamp is 0"), on a live Kafka broker too. A
 * clean shutdown trims it.
 */
public final class DumpLogScenario {
    static final String DUMP = "org.apache.kafka.tools.DumpLogSegments";
    static final String TOPIC = "dumplog";
    static final String[] CODECS = {"none", "gzip", "snappy", "lz4", "zstd"};
    static final int PER_CODEC = 100;
    static final int BULK = 1400;

    final Report rep = new Report();

    public static void main(String[] args) throws Exception {
        DumpLogScenario s = new DumpLogScenario();
        s.rep.version("kafka-tools " + AppInfoParser.getVersion() + " DumpLogSegments");
        Path fixture = Path.of(System.getenv().getOrDefault("INTEROP_WORK", "/tmp"), "dumplog.fixture");
        boolean ok = switch (args.length > 0 ? args[0] : "") {
            case "produce" -> s.produce(System.getenv().getOrDefault("SLUICE_BOOTSTRAP", "127.0.0.1:9092"), fixture);
            case "verify" -> s.verify(Path.of(System.getenv("SLUICE_DATA_DIR"), TOPIC + "-0"), fixture);
            default -> throw new IllegalArgumentException("usage: DumpLogScenario produce|verify");
        };
        System.exit(ok ? 0 : 1);
    }

    /** The fixture: record i has offset i, timestamp t0+i, key, value and two headers. */
    static List<Rec> fixture(long t0) {
        List<Rec> out = new ArrayList<>();
        for (String codec : CODECS) {
            out.addAll(Rec.make("dumplog-" + codec, PER_CODEC, 0));
        }
        String filler = "0123456789abcdef".repeat(40);
        for (Rec r : Rec.make("dumplog-bulk", BULK, 0)) {
            out.add(new Rec(r.key, r.value + filler, r.headers, 0));
        }
        List<Rec> timed = new ArrayList<>();
        for (int i = 0; i < out.size(); i++) {
            Rec r = out.get(i);
            timed.add(new Rec(r.key, r.value, r.headers, t0 + i));
        }
        return timed;
    }

    static String codecOf(int i) {
        return i < CODECS.length * PER_CODEC ? CODECS[i / PER_CODEC] : "none";
    }

    boolean produce(String bootstrap, Path fixturePath) {
        rep.check("produce fixture", () -> {
            Properties ap = new Properties();
            ap.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
            try (Admin a = Admin.create(ap)) {
                a.createTopics(List.of(new NewTopic(TOPIC, 1, (short) 1)
                        .configs(Map.of("segment.bytes", "1048576", "retention.ms", "-1"))))
                        .all().get(30, TimeUnit.SECONDS);
            }
            long t0 = System.currentTimeMillis() - 10 * 60 * 1000;
            List<Rec> recs = fixture(t0);
            int i = 0;
            while (i < recs.size()) {
                String codec = codecOf(i);
                Properties p = new Properties();
                p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
                p.put(ProducerConfig.ACKS_CONFIG, "all");
                p.put(ProducerConfig.COMPRESSION_TYPE_CONFIG, codec);
                p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
                p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
                try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
                    List<Future<RecordMetadata>> fs = new ArrayList<>();
                    int start = i;
                    for (; i < recs.size() && codecOf(i).equals(codec); i++) {
                        fs.add(pr.send(recs.get(i).toProducer(TOPIC)));
                        if (i >= CODECS.length * PER_CODEC && i % 100 == 99) {
                            pr.flush(); // many batches, so the indexes get many entries
                        }
                    }
                    pr.flush();
                    for (int j = 0; j < fs.size(); j++) {
                        long off = fs.get(j).get(30, TimeUnit.SECONDS).offset();
                        if (off != start + j) {
                            throw new AssertionError("record " + (start + j) + " got offset " + off);
                        }
                    }
                }
            }
            Files.writeString(fixturePath, "t0=" + t0 + "\n");
            return recs.size() + " records in " + CODECS.length + " codecs, then uncompressed past one 1 MiB segment";
        });
        return !rep.failed();
    }

    boolean verify(Path dir, Path fixturePath) throws Exception {
        long t0 = Long.parseLong(Files.readString(fixturePath).strip().substring(3));
        List<Rec> want = fixture(t0);
        File[] files = dir.toFile().listFiles();
        if (files == null) {
            rep.fail("deep-iteration", "no partition directory " + dir);
            return false;
        }
        Arrays.sort(files);
        List<String> logs = new ArrayList<>();
        List<String> indexes = new ArrayList<>();
        List<String> timeIndexes = new ArrayList<>();
        for (File f : files) {
            String n = f.getName();
            if (n.endsWith(".log")) {
                logs.add(f.getPath());
            } else if (n.endsWith(".index")) {
                indexes.add(f.getPath());
            } else if (n.endsWith(".timeindex")) {
                timeIndexes.add(f.getPath());
            }
        }
        System.err.println("partition directory: " + Arrays.toString(dir.toFile().list()));

        rep.check("deep-iteration", () -> checkLog(want, logs));
        rep.check("index", () -> {
            if (indexes.size() != logs.size()) {
                throw new AssertionError(logs.size() + " .log files but " + indexes.size() + " .index files");
            }
            Tool t = Tool.run(DUMP, null, 120, "--files", String.join(",", indexes)).ok();
            if (t.err.contains("Mismatches in")) {
                throw new AssertionError(t.failure("found index entries that point at no batch ending at that offset"));
            }
            int entries = count(t.out, "(?m)^offset: \\d+ position: \\d+$");
            if (entries == 0) {
                throw new AssertionError(t.failure("found no index entries in " + indexes.size() + " files"));
            }
            List<String> both = new ArrayList<>(indexes);
            both.addAll(timeIndexes);
            Tool v = Tool.run(DUMP, null, 120, "--verify-index-only", "--files", String.join(",", both)).ok();
            for (String bad : List.of("Mismatches in", "Found timestamp mismatch", "Found out of order timestamp",
                    "indexed offsets are not found")) {
                if (v.err.contains(bad)) {
                    throw new AssertionError(v.failure("--verify-index-only: " + bad));
                }
            }
            return entries + " entries in " + indexes.size() + " files, each at a batch ending at its offset;"
                    + " --verify-index-only clean on every .index and .timeindex";
        });
        rep.check("timeindex", () -> {
            if (timeIndexes.size() != logs.size()) {
                throw new AssertionError(logs.size() + " .log files but " + timeIndexes.size() + " .timeindex files");
            }
            Tool t = Tool.run(DUMP, null, 120, "--files", String.join(",", timeIndexes)).ok();
            for (String bad : List.of("Found timestamp mismatch", "Found out of order timestamp", "indexed offsets are not found")) {
                if (t.err.contains(bad)) {
                    throw new AssertionError(t.failure(bad));
                }
            }
            int entries = count(t.out, "(?m)^timestamp: \\d+ offset: \\d+$");
            if (entries == 0) {
                throw new AssertionError(t.failure("found no time index entries"));
            }
            return entries + " entries, each the max timestamp of the batch ending at its offset";
        });
        rep.check("index-sanity-check", () -> {
            List<String> all = new ArrayList<>(indexes);
            all.addAll(timeIndexes);
            Tool t = Tool.run(DUMP, null, 120, "--index-sanity-check", "--files", String.join(",", all)).ok();
            int passed = count(t.out, "passed sanity check\\.") + count(t.out, "is empty\\.");
            if (passed != all.size()) {
                throw new AssertionError(t.failure(passed + " of " + all.size() + " index files passed"));
            }
            return all.size() + " index files passed Kafka's startup sanity check";
        });
        return !rep.failed();
    }

    static final Pattern BATCH = Pattern.compile(
            "^baseOffset: (\\d+) lastOffset: (\\d+) count: (\\d+) .* compresscodec: (\\w+) crc: (-?\\d+) isvalid: (\\w+)$");
    static final Pattern RECORD = Pattern.compile(
            "^\\| offset: (\\d+) CreateTime: (-?\\d+) keySize: (-?\\d+) valueSize: (-?\\d+) sequence: (-?\\d+) headerKeys: \\[([^\\]]*)\\] key: (\\S*) payload: (.*)$");

    String checkLog(List<Rec> want, List<String> logs) throws Exception {
        if (logs.size() < 2) {
            throw new AssertionError("want at least 2 segments (1 MiB segment.bytes), found " + logs);
        }
        Tool t = Tool.run(DUMP, null, 180, "--deep-iteration", "--print-data-log", "--files", String.join(",", logs)).ok();
        if (t.out.contains("invalid bytes")) {
            throw new AssertionError(t.failure("reported invalid bytes"));
        }
        // The tool restarts its offset check at -1 for every file, so a segment that does not
        // start at offset 0 always shows "-1 is followed by <its base offset>"; anything else
        // is a gap or a step back inside a segment.
        Matcher gap = Pattern.compile("(?m)^\\s+(-?\\d+) is followed by (\\d+)$").matcher(t.err);
        while (gap.find()) {
            long from = Long.parseLong(gap.group(1));
            long to = Long.parseLong(gap.group(2));
            if (from != -1 || !logs.contains(segmentPath(logs, to))) {
                throw new AssertionError(t.failure("reported non-consecutive offsets " + from + " -> " + to));
            }
        }
        int next = 0;
        int batches = 0;
        Set<String> codecs = new TreeSet<>();
        List<String> problems = new ArrayList<>();
        for (String line : t.out.split("\n")) {
            Matcher b = BATCH.matcher(line);
            if (b.matches()) {
                batches++;
                codecs.add(b.group(4));
                if (!b.group(6).equals("true")) {
                    problems.add("batch at " + b.group(1) + " has a bad CRC");
                }
                continue;
            }
            Matcher r = RECORD.matcher(line);
            if (!r.matches()) {
                continue;
            }
            long off = Long.parseLong(r.group(1));
            if (next >= want.size()) {
                problems.add("extra record at offset " + off);
                break;
            }
            Rec w = want.get(next);
            if (off != next) {
                problems.add("record " + next + " at offset " + off);
            }
            if (Long.parseLong(r.group(2)) != w.timestamp) {
                problems.add("offset " + off + ": CreateTime " + r.group(2) + ", want " + w.timestamp);
            }
            if (!r.group(6).equals("seq,tag")) {
                problems.add("offset " + off + ": headerKeys [" + r.group(6) + "], want [seq,tag]");
            }
            if (!r.group(7).equals(w.key) || !r.group(8).equals(w.value)) {
                problems.add("offset " + off + ": key/payload differ from what was produced");
            }
            if (Integer.parseInt(r.group(4)) != w.value.getBytes(StandardCharsets.UTF_8).length) {
                problems.add("offset " + off + ": valueSize " + r.group(4));
            }
            next++;
            if (problems.size() >= 5) {
                break;
            }
        }
        if (next != want.size() && problems.size() < 5) {
            problems.add("read " + next + " records, produced " + want.size());
        }
        if (!problems.isEmpty()) {
            throw new AssertionError(String.join("; ", problems));
        }
        Set<String> wantCodecs = Set.of("none", "gzip", "snappy", "lz4", "zstd");
        if (!codecs.equals(wantCodecs)) {
            throw new AssertionError("batches with codecs " + codecs + ", want " + wantCodecs);
        }
        return next + " records in " + batches + " valid batches over " + logs.size() + " segments, codecs " + codecs
                + ", each record as produced";
    }

    /** The path of the segment with this base offset, if logs has one. */
    static String segmentPath(List<String> logs, long base) {
        String name = String.format("%020d.log", base);
        for (String l : logs) {
            if (l.endsWith(File.separator + name)) {
                return l;
            }
        }
        return null;
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
