"""The client of a warm start (see kernelfoundry.zygote): ``python3 -I -S warm_client.py SOCKET -- ARGV...`` with
the run's one-use token in ``$KF_WARM_TOKEN`` (never on the command line, which every process can read).

Task side (python/README.md): kf's process runner starts it as the run's test process, inside the run's
containment, so it lives in the task directory (kf runs it by path; ``-I`` keeps every PYTHONPATH out).

kf's process runner starts this script in place of ``ARGV`` (a ``python -u -m pytest ...`` test run), contained as
every test run is. It hands the zygote its token and its descriptors 0, 1, 2 (and the result descriptor 6 when
open), waits for the forked worker and ends with the worker's status: the same exit code, or death by the same
signal. When no worker could be started (no zygote, unknown token, containment not transferable) it runs ARGV
itself, from this process (a cold start), after one line on stderr saying why. Uses only the standard library
(``-S``: no site packages), so it starts in ~15 ms.
"""
import os
import signal
import socket
import sys


def _cold(argv, why):
    sys.stderr.write(f"kf: warm start unavailable ({why}); starting Python cold\n")
    sys.stderr.flush()
    os.execv(argv[0], argv)


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.stderr.write("usage: KF_WARM_TOKEN=TOKEN warm_client.py SOCKET -- ARGV...\n")
        return 2
    path, argv = sys.argv[1], sys.argv[3:]
    token = os.environ.pop("KF_WARM_TOKEN", "")  # a cold start does not pass it on
    if not token:
        return _cold(argv, "no KF_WARM_TOKEN in the environment")
    fds = [0, 1, 2]
    try:
        os.fstat(6)
        fds.append(6)
    except OSError:
        pass
    try:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.connect(path)
        socket.send_fds(sock, [token.encode("ascii")], fds)
        reader = sock.makefile("rb")
        first = reader.readline().decode("utf-8", "replace").strip()
    except OSError as e:
        return _cold(argv, f"{type(e).__name__}: {e}")
    if first != "started":
        return _cold(argv, first[6:] if first.startswith("error ") else f"the zygote said {first!r}")
    line = reader.readline().decode("ascii", "replace").split()
    if len(line) != 2 or line[0] != "exit":
        sys.stderr.write("kf: the warm-start zygote ended before the test process did\n")
        return 125
    status = int(line[1])
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if sig not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(sig, signal.SIG_DFL)
        os.kill(os.getpid(), sig)
        return 128 + sig  # a signal whose default action is not to end the process
    return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 1


if __name__ == "__main__":
    sys.stdout.flush()
    os._exit(main() or 0)
