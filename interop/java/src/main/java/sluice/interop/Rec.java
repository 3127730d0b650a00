package sluice.interop;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;

/** One test record, as produced and as read back; the same shape as interop/go. */
final class Rec {
    final String key;
    final String value;
    final List<String[]> headers;
    final long timestamp;
    int partition = -1;
    long offset = -1;

    Rec(String key, String value, List<String[]> headers, long timestamp) {
        this.key = key;
        this.value = value;
        this.headers = headers;
        this.timestamp = timestamp;
    }

    String id() {
        int bar = value.indexOf('|');
        return bar < 0 ? value : value.substring(0, bar);
    }

    /** n keyed records with headers and explicit timestamps; values are unique and compress well. */
    static List<Rec> make(String tag, int n, long t0) {
        List<Rec> out = new ArrayList<>();
        String payload = "sluice interop payload ".repeat(8);
        for (int i = 0; i < n; i++) {
            List<String[]> hs = new ArrayList<>();
            hs.add(new String[] {"seq", Integer.toString(i)});
            hs.add(new String[] {"tag", tag});
            out.add(new Rec(String.format("key-%02d", i % 13), String.format("%s-%05d|%s", tag, i, payload), hs, t0 + i));
        }
        return out;
    }

    ProducerRecord<String, String> toProducer(String topic) {
        List<Header> hs = new ArrayList<>();
        for (String[] h : headers) {
            hs.add(new RecordHeader(h[0], h[1].getBytes(StandardCharsets.UTF_8)));
        }
        return new ProducerRecord<>(topic, null, timestamp, key, value, hs);
    }

    static Rec from(ConsumerRecord<String, String> cr) {
        List<String[]> hs = new ArrayList<>();
        for (Header h : cr.headers()) {
            hs.add(new String[] {h.key(), h.value() == null ? null : new String(h.value(), StandardCharsets.UTF_8)});
        }
        Rec r = new Rec(cr.key(), cr.value(), hs, cr.timestamp());
        r.partition = cr.partition();
        r.offset = cr.offset();
        return r;
    }

    static String headersString(List<String[]> hs) {
        StringBuilder sb = new StringBuilder("[");
        for (String[] h : hs) {
            sb.append(Arrays.toString(h));
        }
        return sb.append("]").toString();
    }

    static boolean headersEqual(List<String[]> a, List<String[]> b) {
        if (a.size() != b.size()) {
            return false;
        }
        for (int i = 0; i < a.size(); i++) {
            if (!Arrays.equals(a.get(i), b.get(i))) {
                return false;
            }
        }
        return true;
    }

    /**
     * Checks that got is exactly sent: same count, every record once with its key, value, headers
     * and timestamp, at the partition and offset the producer was told, in produce order within
     * each partition. Throws with up to five problems.
     */
    static void verifyExact(List<Rec> sent, List<Rec> got) {
        Map<String, Rec> byId = new HashMap<>();
        Map<String, Integer> index = new HashMap<>();
        for (int i = 0; i < sent.size(); i++) {
            byId.put(sent.get(i).id(), sent.get(i));
            index.put(sent.get(i).id(), i);
        }
        Set<String> seen = new HashSet<>();
        Map<Integer, Integer> last = new HashMap<>();
        Map<String, Integer> keyPartition = new HashMap<>();
        List<String> problems = new ArrayList<>();
        for (Rec g : got) {
            String id = g.id();
            Rec want = byId.get(id);
            if (want == null) {
                problems.add("unexpected record " + id + " at " + g.partition + "/" + g.offset);
                continue;
            }
            if (!seen.add(id)) {
                problems.add("record " + id + " read twice (at " + g.partition + "/" + g.offset + ")");
            }
            if (!want.key.equals(g.key)) {
                problems.add("record " + id + ": key " + g.key + ", want " + want.key);
            }
            if (!want.value.equals(g.value)) {
                problems.add("record " + id + ": value differs");
            }
            if (!headersEqual(want.headers, g.headers)) {
                problems.add("record " + id + ": headers " + headersString(g.headers) + ", want " + headersString(want.headers));
            }
            if (want.timestamp != g.timestamp) {
                problems.add("record " + id + ": timestamp " + g.timestamp + ", want " + want.timestamp);
            }
            if (want.partition >= 0 && (want.partition != g.partition || want.offset != g.offset)) {
                problems.add("record " + id + " read at " + g.partition + "/" + g.offset + ", producer was told "
                        + want.partition + "/" + want.offset);
            }
            Integer kp = keyPartition.put(g.key, g.partition);
            if (kp != null && kp != g.partition) {
                problems.add("key " + g.key + " in partitions " + kp + " and " + g.partition);
            }
            Integer prev = last.put(g.partition, index.get(id));
            if (prev != null && index.get(id) < prev) {
                problems.add("partition " + g.partition + ": record " + id + " read after a later-produced one");
            }
        }
        if (got.size() != sent.size() || seen.size() != sent.size()) {
            problems.add("read " + got.size() + " records (" + seen.size() + " distinct), produced " + sent.size());
        }
        if (!problems.isEmpty()) {
            throw new AssertionError(String.join("; ", problems.subList(0, Math.min(5, problems.size()))));
        }
    }
}
