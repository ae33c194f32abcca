"""The sandbox's first process (pid 1 of its namespace), standard library only.

Started by bubblewrap as ``python -I -S inner.py PORT SOCKET REPORT_FD LIMITS -- ARGV``;
never imported by agentbolt. It imports only C modules (a sandbox starts per rollout,
and ``subprocess``, ``json`` or ``socket`` would triple its start-up time). It

1. relays TCP connections to ``127.0.0.1:PORT`` (the address the program is told about;
   ``[::1]:PORT`` too) to the gateway's unix socket ``SOCKET``, served by the controller;
2. starts the program with its resource limits (in the child only); as pid 1 it reaps
   every process of the sandbox and learns how each ended;
3. watches the wall clock and the number of processes; at the end (the program exited,
   time ran out, too many processes) it kills every other process of the namespace;
4. reads the namespace's own network counters (connections the kernel refused or could
   not route: no packet left) and writes a JSON report to ``REPORT_FD``, a pipe the
   program does not inherit and, this process being non-dumpable, cannot open.

``LIMITS`` is ``name=value`` pairs joined by commas (wall, memory, processes, threads,
cpu, file, nofile, connections). The exit code is the program's (``128 + signal`` when a signal ended it).
"""

import _signal
import _socket
import _thread
import ctypes
import os
import resource
import select
import sys
import time

PR_SET_DUMPABLE = 4
SAMPLE_MS = 50
NPROC_SLACK = 16
"""The kernel's process limit sits this far above the watchdog's: this process and the
relay's threads count too. The watchdog reports and kills first."""


def main() -> int:
    port, sock_path, report_fd, raw_limits, sep, *argv = sys.argv[1:]
    if sep != "--" or not argv:
        sys.stderr.write("usage: inner.py PORT SOCKET REPORT_FD LIMITS -- ARGV\n")
        return 2
    limits = {k: float(v) for k, v in (p.split("=") for p in raw_limits.split(",") if p)}
    report = {"events": [], "relayed": 0}
    _deaf()
    _private()
    slots = _Slots(int(limits.get("connections", 16)))
    for family, host in ((_socket.AF_INET, "127.0.0.1"), (_socket.AF_INET6, "::1")):  # "localhost" too
        _thread.start_new_thread(_relay, (family, host, int(port), sock_path, report, slots))
    started = time.monotonic()
    try:
        pid = _spawn(argv, limits)
    except OSError as exc:
        sys.stderr.write(f"agentbolt sandbox: could not start {argv[0]!r}: {exc}\n")
        report["start_error"] = str(exc)
        return _finish(report, 127, int(report_fd))
    _started(int(report_fd))
    code = _supervise(pid, limits, started, report)
    _kill_rest()
    _reap_rest(report, limits)
    report["network"] = _network_counters()
    report["duration_s"] = round(time.monotonic() - started, 3)
    return _finish(report, code, int(report_fd))


def _deaf() -> None:
    """No signal from inside the sandbox reaches this process: the kernel delivers to a
    namespace's init only the signals it has a handler for, and Python installs one for
    SIGINT (KeyboardInterrupt would end the init, and the report with it)."""
    for sig in range(1, _signal.NSIG):
        try:
            if _signal.getsignal(sig) not in (_signal.SIG_DFL, _signal.SIG_IGN, None):
                _signal.signal(sig, _signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            continue


def _started(fd: int) -> None:
    """The first line of the report: the program runs. A report that ends here (the
    init itself was ended) is the run's end all the same, never a sandbox that did not start."""
    try:
        os.write(fd, b'{"started":true}\n')
    except OSError:
        pass


def _private() -> None:
    """No other process of the sandbox may open this one's files (the report pipe)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE) failed")


# --------------------------------------------------------------------------- the program
def _spawn(argv: list, limits: dict) -> int:
    """Fork, set the limits, exec; an exec failure comes back as OSError."""
    err_r, err_w = os.pipe()  # close-on-exec: EOF means the exec succeeded
    pid = os.fork()
    if pid == 0:
        try:
            os.close(err_r)
            os.setsid()
            for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):  # Python ignores them; the program must not
                _signal.signal(sig, _signal.SIG_DFL)
            _apply_limits(limits)
            os.closerange(3, err_w)
            os.closerange(err_w + 1, 65536)
            os.execvp(argv[0], argv)
        except OSError as exc:
            os.write(err_w, f"{exc.errno}:{exc.strerror}".encode())
        finally:
            os._exit(127)
    os.close(err_w)
    message = os.read(err_r, 1024)
    os.close(err_r)
    if message:
        os.waitpid(pid, 0)
        errno, _, text = message.decode().partition(":")
        raise OSError(int(errno), text)
    return pid


def _apply_limits(limits: dict) -> None:
    mb = limits.get("memory")
    procs = limits.get("processes")
    pairs = (
        # the data limit (private writable memory), not the address space: runtimes that
        # reserve large ranges up front (V8, Go, the JVM, WebAssembly) still start
        (resource.RLIMIT_DATA, mb),
        (resource.RLIMIT_NPROC, procs + NPROC_SLACK if procs else None),
        (resource.RLIMIT_CPU, limits.get("cpu")),
        (resource.RLIMIT_FSIZE, limits.get("file")),
        (resource.RLIMIT_NOFILE, limits.get("nofile")),
        (resource.RLIMIT_CORE, 0),
    )
    for which, value in pairs:
        if value is not None:
            resource.setrlimit(which, (int(value), int(value)))


def _pids() -> list:
    """Processes of this namespace but this one."""
    return [name for name in os.listdir("/proc") if name.isdigit() and name != "1"]


def _threads(pids: list) -> int:
    """Threads of the program's processes (the kernel's RLIMIT_NPROC counts them too,
    but waives itself for root)."""
    total = 0
    for name in pids:
        try:
            total += len(os.listdir(f"/proc/{name}/task"))
        except OSError:
            continue
    return total


def _data_peak(pids: list) -> int:
    """The largest ``VmData`` (heap and other private writable memory) now, in bytes."""
    peak = 0
    for name in pids:
        try:
            with open(f"/proc/{name}/status", "rb") as fh:
                for line in fh:
                    if line.startswith(b"VmData:"):
                        peak = max(peak, int(line.split()[1]) * 1024)
                        break
        except OSError:
            continue
    return peak


def _supervise(pid: int, limits: dict, started: float, report: dict) -> int:
    wall = limits.get("wall")
    max_procs = limits.get("processes")
    max_threads = limits.get("threads")
    poller = select.poll()
    poller.register(os.pidfd_open(pid), select.POLLIN)  # wakes the moment the program ends
    report["peak_processes"], report["peak_data_bytes"] = 0, 0
    while True:
        code = _reap(report, limits, pid)
        if code is not None:
            return code
        pids = _pids()
        report["peak_processes"] = max(report["peak_processes"], len(pids))
        if "memory" in limits and len(pids) <= 64:
            report["peak_data_bytes"] = max(report["peak_data_bytes"], _data_peak(pids))
        if max_procs is not None and len(pids) >= max_procs:
            _event(report, "limit.processes", f"the program reached {len(pids)} processes (limit {int(max_procs)})")
            return 128 + _signal.SIGKILL
        if max_threads is not None:
            threads = _threads(pids)
            report["peak_threads"] = max(report.get("peak_threads", 0), threads)
            if threads >= max_threads:
                _event(report, "limit.threads", f"the program reached {threads} threads (limit {int(max_threads)})")
                return 128 + _signal.SIGKILL
        if wall is not None and time.monotonic() - started > wall:
            _event(report, "limit.wall_time", f"the program ran longer than {wall:g} s; all its processes were killed")
            report["timed_out"] = True
            return 128 + _signal.SIGKILL
        poller.poll(SAMPLE_MS)


def _reap(report: dict, limits: dict, main_pid: int):
    """Reap every process that ended; the program's exit code once it has."""
    result = None
    while True:
        try:
            pid, status, usage = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return result
        if pid == 0:
            return result
        _account(report, limits, status, usage)
        if pid == main_pid:
            code = os.waitstatus_to_exitcode(status)
            result = 128 - code if code < 0 else code


def _account(report: dict, limits: dict, status: int, usage) -> None:
    report["max_rss_bytes"] = max(report.get("max_rss_bytes", 0), usage.ru_maxrss * 1024)
    if not os.WIFSIGNALED(status):
        return
    sig = os.WTERMSIG(status)
    cpu = limits.get("cpu")
    if sig == _signal.SIGXCPU or (sig == _signal.SIGKILL and cpu and usage.ru_utime + usage.ru_stime >= cpu):
        _event(report, "limit.cpu", f"a process used its {cpu:g} s of CPU time and was killed")
    elif sig == _signal.SIGXFSZ:
        _event(report, "limit.file_size", f"a process wrote a file larger than {int(limits.get('file', 0))} bytes")


def _kill_rest() -> None:
    try:
        os.kill(-1, _signal.SIGKILL)  # every process of this namespace but this one
    except ProcessLookupError:
        pass


def _reap_rest(report: dict, limits: dict) -> None:
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            _, status, usage = os.wait4(-1, 0)
        except ChildProcessError:
            return
        _account(report, limits, status, usage)


# --------------------------------------------------------------------------- network
def _network_counters() -> dict:
    """Connections the kernel refused in this namespace: no route (another host) or no
    listener (a local port other than the gateway's)."""
    found = {}
    try:
        with open("/proc/net/snmp") as fh:
            lines = fh.read().splitlines()
        for head, values in zip(lines[::2], lines[1::2], strict=False):  # a header line, then its values
            names, numbers = head.split(), values.split()
            for name, number in zip(names[1:], numbers[1:], strict=False):
                found[names[0] + name] = int(number)
        with open("/proc/net/snmp6") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) == 2:
                    found[parts[0]] = int(parts[1])
    except (OSError, ValueError):
        return {}
    return {
        "unroutable": found.get("Ip:OutNoRoutes", 0) + found.get("Ip6OutNoRoutes", 0),
        "refused_tcp": found.get("Tcp:AttemptFails", 0),
        "refused_udp": found.get("Udp:NoPorts", 0) + found.get("Udp6NoPorts", 0),
    }


class _Slots:
    """Connections relayed at once (two threads each): at most ``size``; past it a
    connection is closed as soon as it is accepted (and counted)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.used = 0
        self.lock = _thread.allocate_lock()

    def take(self) -> bool:
        with self.lock:
            if self.used >= self.size:
                return False
            self.used += 1
            return True

    def give(self) -> None:
        with self.lock:
            self.used -= 1


def _relay(family: int, host: str, port: int, path: str, report: dict, slots: _Slots) -> None:
    """host:port inside -> the gateway's unix socket (served by the controller)."""
    server = _socket.socket(family, _socket.SOCK_STREAM)
    try:
        server.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
        server.bind((host, port))
        server.listen(64)
    except OSError:  # no IPv6 in this kernel: 127.0.0.1 is what the program is told anyway
        server.close()
        return
    while True:
        try:
            fd, _ = server._accept()  # type: ignore[attr-defined]  # _socket's C accept, not in typeshed: no socket module here
        except OSError:  # out of descriptors for a moment: the program's doing; keep serving
            time.sleep(0.05)
            continue
        client = _socket.socket(fileno=fd)
        if not slots.take():
            report["relay_refused"] = report.get("relay_refused", 0) + 1
            client.close()
            continue
        report["relayed"] += 1
        try:
            _thread.start_new_thread(_serve, (client, path, slots))
        except RuntimeError:  # no thread to be had
            slots.give()
            client.close()


def _serve(client, path: str, slots: _Slots) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(path)
        done = _thread.allocate_lock()
        done.acquire()
        _thread.start_new_thread(_pump, (upstream, client, done))
        _pump(client, upstream, None)
        done.acquire()
    except (OSError, RuntimeError):
        pass
    finally:
        client.close()
        upstream.close()
        slots.give()


def _pump(src, dst, done) -> None:
    try:
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    except OSError:
        pass
    try:
        dst.shutdown(_socket.SHUT_WR)
    except OSError:
        pass
    if done is not None:
        done.release()


# --------------------------------------------------------------------------- report
def _event(report: dict, kind: str, detail: str) -> None:
    if not any(e["kind"] == kind for e in report["events"]):
        report["events"].append({"kind": kind, "detail": detail})


def _json(value) -> str:
    """JSON for the report's plain values (``json`` would cost the start-up its ``re``)."""
    if isinstance(value, dict):
        return "{" + ",".join(f"{_json(str(k))}:{_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(_json(v) for v in value) + "]"
    if value is True or value is False or value is None:
        return {True: "true", False: "false", None: "null"}[value]
    if isinstance(value, (int, float)):
        return repr(value)
    out = []
    for ch in str(value):
        code = ord(ch)
        out.append(f"\\u{code:04x}" if code < 0x20 or ch in '"\\' or 0xD800 <= code <= 0xDFFF else ch)
    return '"' + "".join(out) + '"'


def _finish(report: dict, exit_code: int, fd: int) -> int:
    report["exit_code"] = exit_code
    report["events"] = report["events"][:20]
    data = _json(report).encode("utf-8", "replace")
    try:
        os.write(fd, data[:60000])
        os.close(fd)
    except OSError:
        pass
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
