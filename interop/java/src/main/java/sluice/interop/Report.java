package sluice.interop;

import java.util.concurrent.ExecutionException;

/** Prints the result lines interop/driver reads (see interop/driver/results.go). */
final class Report {
    private boolean failed;

    static String oneLine(String s) {
        return s == null ? "" : s.replaceAll("\\s+", " ").trim();
    }

    static String capId(String cap) {
        return cap.contains(" ") ? "\"" + cap + "\"" : cap;
    }

    void version(String v) {
        System.out.println("##interop version " + oneLine(v));
        System.out.flush();
    }

    void pass(String cap, String detail) {
        System.out.println("##interop pass " + capId(cap) + " " + oneLine(detail));
        System.out.flush();
    }

    void skip(String cap, String detail) {
        System.out.println("##interop skip " + capId(cap) + " " + oneLine(detail));
        System.out.flush();
    }

    void gap(String cap, String detail) {
        System.out.println("##interop gap " + capId(cap) + " " + oneLine(detail));
        System.out.flush();
    }

    synchronized void fail(String cap, String detail) {
        failed = true;
        System.out.println("##interop fail " + capId(cap) + " " + oneLine(detail));
        System.out.flush();
    }

    boolean failed() {
        return failed;
    }

    /** A step that either returns a pass detail or throws. */
    interface Step {
        String run() throws Exception;
    }

    /** Runs a step and reports it; returns whether it passed. */
    boolean check(String cap, Step step) {
        try {
            pass(cap, step.run());
            return true;
        } catch (Throwable e) {
            fail(cap, describe(e));
            e.printStackTrace();
            return false;
        }
    }

    /** The exception chain, which carries what the broker answered. */
    static String describe(Throwable e) {
        if (e instanceof ExecutionException && e.getCause() != null) {
            e = e.getCause();
        }
        StringBuilder sb = new StringBuilder();
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (sb.length() > 0) {
                sb.append(" <- ");
            }
            sb.append(t.getClass().getSimpleName()).append(": ").append(t.getMessage());
            if (t.getCause() == t) {
                break;
            }
        }
        return sb.toString();
    }
}
