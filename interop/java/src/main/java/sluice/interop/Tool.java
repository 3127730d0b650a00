package sluice.interop;

import java.io.ByteArrayOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * Runs one of Kafka's command-line tools the way its shell wrapper does: a fresh JVM with
 * `java -cp <copied deps>/* <main class> args`.
 */
final class Tool {
    final int exit;
    final String out;
    final String err;
    final String command;

    private Tool(int exit, String out, String err, String command) {
        this.exit = exit;
        this.out = out;
        this.err = err;
        this.command = command;
    }

    static Tool run(String mainClass, String stdin, int timeoutSeconds, String... args) throws Exception {
        List<String> cmd = new ArrayList<>();
        cmd.add(System.getProperty("java.home") + File.separator + "bin" + File.separator + "java");
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-XX:TieredStopAtLevel=1");
        cmd.add("-Dorg.slf4j.simpleLogger.defaultLogLevel=warn");
        cmd.add("-cp");
        cmd.add(System.getProperty("java.class.path"));
        cmd.add(mainClass);
        cmd.addAll(Arrays.asList(args));
        String shown = mainClass.substring(mainClass.lastIndexOf('.') + 1) + " " + String.join(" ", args);
        System.err.println("$ " + shown);
        Process p = new ProcessBuilder(cmd).start();
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteArrayOutputStream err = new ByteArrayOutputStream();
        Thread to = pump(p.getInputStream(), out);
        Thread te = pump(p.getErrorStream(), err);
        try (OutputStream in = p.getOutputStream()) {
            if (stdin != null) {
                in.write(stdin.getBytes(StandardCharsets.UTF_8));
            }
        }
        if (!p.waitFor(timeoutSeconds, TimeUnit.SECONDS)) {
            p.destroyForcibly();
            p.waitFor();
            to.join();
            te.join();
            throw new AssertionError("`" + shown + "` did not finish within " + timeoutSeconds + "s; stdout: "
                    + clip(out.toString(StandardCharsets.UTF_8)) + " stderr: " + clip(err.toString(StandardCharsets.UTF_8)));
        }
        to.join();
        te.join();
        Tool t = new Tool(p.exitValue(), out.toString(StandardCharsets.UTF_8), err.toString(StandardCharsets.UTF_8), shown);
        System.err.println(t.out);
        System.err.println(t.err);
        return t;
    }

    /** Fails unless the tool exited 0. */
    Tool ok() {
        if (exit != 0) {
            throw new AssertionError(failure("exited " + exit));
        }
        return this;
    }

    String failure(String what) {
        return "`" + command + "` " + what + "; stdout: " + clip(out) + " stderr: " + clip(errorLines());
    }

    /** The stderr lines that say something went wrong, else all of it. */
    String errorLines() {
        StringBuilder sb = new StringBuilder();
        for (String l : err.split("\n")) {
            if (l.contains("ERROR") || l.contains("Exception") || l.contains("WARN") || l.contains("Error")) {
                sb.append(l).append(" | ");
            }
        }
        return sb.length() > 0 ? sb.toString() : err;
    }

    List<String> lines() {
        List<String> out = new ArrayList<>();
        for (String l : this.out.split("\n")) {
            if (!l.isBlank()) {
                out.add(l.strip());
            }
        }
        return out;
    }

    static String clip(String s) {
        s = s.strip();
        return s.length() > 700 ? s.substring(0, 350) + " … " + s.substring(s.length() - 350) : s;
    }

    private static Thread pump(InputStream in, ByteArrayOutputStream to) {
        Thread t = new Thread(() -> {
            try {
                in.transferTo(to);
            } catch (IOException ignored) {
                // the process went away
            }
        });
        t.start();
        return t;
    }
}
