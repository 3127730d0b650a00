"""Step reporting shared by the Python-driven scenarios (confluent-kafka, kcat).

Each step prints one "##interop VERDICT CAPABILITY DETAIL" line, which the Go
driver (interop/driver) parses into the compatibility matrix.
"""

import traceback

# failed turns true once any step has failed; the scenario's exit code.
failed = False


def one_line(s):
    return " ".join(str(s).split())


def report(verdict, cap, detail):
    global failed
    if verdict == "fail":
        failed = True
    print(f"##interop {verdict} {cap} {one_line(detail)}", flush=True)


def check(cap, fn):
    """Runs a step; its return value is the pass detail, an exception the failure."""
    try:
        report("pass", cap, fn())
        return True
    except Exception as e:  # noqa: BLE001 - every failure is reported
        traceback.print_exc()
        report("fail", cap, f"{type(e).__name__}: {e}")
        return False
