package sluice.interop;

import java.io.File;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.kafka.common.utils.internals.AppInfoParser;

/**
 * Kafka's kafka-dump-log over every replica's segments after the three-broker cluster stopped
 * cleanly: --deep-iteration over every .log of every partition on every node (every batch valid,
 * offsets consecutive within a segment), the replicas of each partition hold the same batches
 * (base and last offset, CRC) on every node that has one (a replica moved away by a
 * reassignment is renamed *-delete, as Kafka does, and left out), --verify-index-only over every .index and
 * .timeindex, and --index-sanity-check over all of them.
 */
public final class ClusterDumpLog {
    static final String DUMP = DumpLogScenario.DUMP;

    final Report rep = new Report();

    public static void main(String[] args) throws Exception {
        ClusterDumpLog s = new ClusterDumpLog();
        s.rep.version("kafka-tools " + AppInfoParser.getVersion() + " DumpLogSegments");
        s.run(System.getenv().getOrDefault("SLUICE_DATA_DIRS", "").split(","));
        System.exit(s.rep.failed() ? 1 : 0);
    }

    /** A partition directory's files, by kind. */
    static final class Replica {
        final String node;
        final List<String> logs = new ArrayList<>();
        final List<String> indexes = new ArrayList<>();

        Replica(String node) {
            this.node = node;
        }
    }

    void run(String[] dataDirs) throws Exception {
        // partition name → its replicas, one per node that has it
        Map<String, List<Replica>> partitions = new TreeMap<>();
        List<String> logs = new ArrayList<>();
        List<String> indexes = new ArrayList<>();
        for (String dir : dataDirs) {
            File[] parts = new File(dir).listFiles(f -> f.isDirectory() && f.getName().matches(".+-\\d+")
                    && !f.getName().equals("__cluster_metadata-0"));
            if (parts == null) {
                rep.fail("deep-iteration", "no data directory " + dir);
                return;
            }
            for (File p : parts) {
                Replica r = new Replica(new File(dir).getName());
                File[] files = p.listFiles();
                java.util.Arrays.sort(files);
                for (File f : files) {
                    if (f.getName().endsWith(".log")) {
                        r.logs.add(f.getPath());
                    } else if (f.getName().endsWith(".index") || f.getName().endsWith(".timeindex")) {
                        r.indexes.add(f.getPath());
                    }
                }
                logs.addAll(r.logs);
                indexes.addAll(r.indexes);
                partitions.computeIfAbsent(p.getName(), k -> new ArrayList<>()).add(r);
            }
        }
        // file → its batches as "base-last/crc", in file order
        Map<String, List<String>> batches = new TreeMap<>();
        rep.check("deep-iteration", () -> {
            Tool t = Tool.run(DUMP, null, 150, "--deep-iteration", "--files", String.join(",", logs)).ok();
            if (t.out.contains("invalid bytes")) {
                throw new AssertionError(t.failure("reported invalid bytes"));
            }
            Matcher gap = Pattern.compile("(?m)^\\s+(-?\\d+) is followed by (\\d+)$").matcher(t.err);
            while (gap.find()) {
                if (!gap.group(1).equals("-1")) {
                    throw new AssertionError(t.failure("non-consecutive offsets " + gap.group(1) + " -> " + gap.group(2)));
                }
            }
            String file = null;
            int nBatches = 0;
            int records = 0;
            for (String line : t.out.split("\n")) {
                if (line.startsWith("Dumping ")) {
                    file = line.substring("Dumping ".length()).strip();
                    batches.put(file, new ArrayList<>());
                    continue;
                }
                Matcher b = DumpLogScenario.BATCH.matcher(line);
                if (b.matches()) {
                    if (!b.group(6).equals("true")) {
                        throw new AssertionError(file + ": batch at " + b.group(1) + " has a bad CRC");
                    }
                    nBatches++;
                    batches.get(file).add(b.group(1) + "-" + b.group(2) + "/" + b.group(5));
                } else if (line.startsWith("| offset: ")) {
                    records++;
                }
            }
            if (batches.size() != logs.size()) {
                throw new AssertionError("dumped " + batches.size() + " of " + logs.size() + " segments");
            }
            return logs.size() + " segments of " + partitions.size() + " partitions on " + dataDirs.length + " nodes: " + nBatches
                    + " valid batches, " + records + " records, offsets consecutive";
        });
        rep.check("replicas identical", () -> {
            if (batches.isEmpty()) {
                throw new AssertionError("not run: deep-iteration failed");
            }
            int nonEmpty = 0;
            Map<Integer, Integer> copies = new TreeMap<>(); // replica count → partitions
            List<String> problems = new ArrayList<>();
            for (var e : partitions.entrySet()) {
                List<Replica> rs = e.getValue();
                if (rs.size() < 2) { // every topic of the cluster run is replicated
                    problems.add(e.getKey() + " has " + rs.size() + " replica");
                    continue;
                }
                copies.merge(rs.size(), 1, Integer::sum);
                List<String> first = null;
                for (Replica r : rs) {
                    List<String> all = new ArrayList<>();
                    for (String l : r.logs) {
                        all.addAll(batches.get(l));
                    }
                    if (first == null) {
                        first = all;
                        nonEmpty += all.isEmpty() ? 0 : 1;
                    } else if (!all.equals(first)) {
                        problems.add(e.getKey() + ": " + rs.get(0).node + " has " + first.size() + " batches, " + r.node + " "
                                + all.size() + " that differ");
                    }
                }
            }
            if (!problems.isEmpty()) {
                throw new AssertionError(String.join("; ", problems.subList(0, Math.min(5, problems.size()))));
            }
            return "each of " + partitions.size() + " partitions (" + nonEmpty + " with data; replica count → partitions "
                    + copies + ") has replicas holding the same batches: base and last offset, CRC";
        });
        rep.check("verify-index-only", () -> {
            Tool v = Tool.run(DUMP, null, 150, "--verify-index-only", "--files", String.join(",", indexes)).ok();
            for (String bad : List.of("Mismatches in", "Found timestamp mismatch", "Found out of order timestamp",
                    "indexed offsets are not found")) {
                if (v.err.contains(bad) || v.out.contains(bad)) {
                    throw new AssertionError(v.failure(bad));
                }
            }
            return indexes.size() + " .index and .timeindex files, every entry at a batch of its segment";
        });
        rep.check("index-sanity-check", () -> {
            Tool t = Tool.run(DUMP, null, 150, "--index-sanity-check", "--files", String.join(",", indexes)).ok();
            int passed = DumpLogScenario.count(t.out, "passed sanity check\\.") + DumpLogScenario.count(t.out, "is empty\\.");
            if (passed != indexes.size()) {
                throw new AssertionError(t.failure(passed + " of " + indexes.size() + " index files passed"));
            }
            return indexes.size() + " index files passed Kafka's startup sanity check";
        });
    }
}
