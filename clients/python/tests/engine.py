"""A real engine for the tests: `engine serve` as a child process.

The binary is $ENGINE_BIN, else built once per test run with `go build`
from the repository this directory belongs to. Each Engine has its own
data directory and listens on loopback ports of its own for both HTTP and
NATS (never the defaults 7420 and 4222): the first start takes free ports
from the kernel (port 0, read back from --ready-file), and a restart after
a kill reuses them, so that clients keep their address.
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from typing import Optional

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
"""The repository root (clients/python/tests/../../..)."""

_build_lock = threading.Lock()
_built: Optional[str] = None


def engine_bin() -> str:
    """The engine binary: $ENGINE_BIN, else `go build ./cmd/engine` into a
    temporary directory (once per process)."""
    global _built
    env = os.environ.get("ENGINE_BIN")
    if env:
        if not os.access(env, os.X_OK):
            raise RuntimeError(f"ENGINE_BIN={env!r} is not an executable file: build it with `go build -o {env} ./cmd/engine`")
        return env
    with _build_lock:
        if _built is None:
            out = tempfile.mkdtemp(prefix="engine-bin-")
            atexit.register(shutil.rmtree, out, True)
            path = os.path.join(out, "engine")
            res = subprocess.run(["go", "build", "-o", path, "./cmd/engine"], cwd=REPO, capture_output=True, text=True)
            if res.returncode != 0:
                raise RuntimeError(f"go build ./cmd/engine failed (set ENGINE_BIN to a built binary instead):\n{res.stderr}")
            _built = path
        return _built


class Engine:
    """One `engine serve` process on a data directory of its own.

    ``registry`` is a registry file to serve; ``registry_kv`` serves the
    registry KV bucket (for `engine registry push`); ``args`` are more serve
    flags. ``url`` and ``nats_url`` are set once it is ready."""

    def __init__(self, *, registry: Optional[str] = None, registry_kv: bool = False, args: tuple = ()):
        self.dir = tempfile.mkdtemp(prefix="engine-test-")
        self.data = os.path.join(self.dir, "data")
        self.registry, self.registry_kv, self.args = registry, registry_kv, tuple(args)
        self.http_port = 0
        self.nats_port = 0
        self.url = ""
        self.nats_url = ""
        self.proc: Optional[subprocess.Popen] = None
        self.starts = 0
        self.closed = False
        self._log = None

    def start(self, timeout: float = 90.0) -> "Engine":
        """Starts the engine and waits until /readyz answers 200. A first
        start that fails removes the engine's directory (the error carries
        the log's end); a start after cleanup() is refused."""
        if self.closed:
            raise RuntimeError(f"engine in {self.dir} was cleaned up: start a new Engine")
        try:
            return self._start(timeout)
        except Exception:
            self.kill()
            if self.starts == 1:
                shutil.rmtree(self.dir, ignore_errors=True)
            raise

    def _start(self, timeout: float) -> "Engine":
        ready = os.path.join(self.dir, f"ready-{self.starts}.json")
        argv = [engine_bin(), "serve", "--data", self.data, "--listen", f"127.0.0.1:{self.nats_port}",
                "--http", f"127.0.0.1:{self.http_port}", "--ready-file", ready, "--log-level", "warn"]
        if self.registry:
            argv += ["--registry", self.registry]
        if self.registry_kv:
            argv.append("--registry-kv")
        argv += list(self.args)
        self._log = open(os.path.join(self.dir, f"engine-{self.starts}.log"), "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT)
        self.starts += 1
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"engine exited with {self.proc.returncode} before it was ready:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"engine not ready after {timeout:.0f} s:\n{self.log_tail()}")
            if os.path.exists(ready):
                try:
                    with open(ready, encoding="utf-8") as f:
                        info = json.load(f)
                    host, port = info["http_addr"].rsplit(":", 1)
                    self.http_port = int(port)
                    self.nats_port = int(info["nats_url"].rsplit(":", 1)[1])
                    self.url = f"http://{host}:{port}"
                    self.nats_url = info["nats_url"]
                    with urllib.request.urlopen(self.url + "/readyz", timeout=2) as r:
                        if r.status == 200:
                            return self
                except (OSError, ValueError, KeyError):
                    pass
            time.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: the engine gets no chance to clean up (a crash)."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()
        if self._log:
            self._log.close()
            self._log = None

    def stop(self) -> None:
        """SIGTERM and wait for a clean exit (SIGKILL after 20 s)."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        if self._log:
            self._log.close()
            self._log = None

    def restart_after_kill(self) -> None:
        """kill -9, then start again on the same data and ports."""
        self.kill()
        self.start()

    def cli(self, *args: str, timeout: float = 60.0) -> str:
        """Runs an engine subcommand that talks NATS to this engine (for
        example `registry push FILE`), with this engine's URL and data
        directory (its NATS users); raises on a non-zero exit."""
        argv = [engine_bin(), *args, "--nats", self.nats_url, "--data", self.data]
        res = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        if res.returncode != 0:
            raise RuntimeError(f"engine {' '.join(args)} exited {res.returncode}:\n{res.stdout}\n{res.stderr}")
        return res.stdout

    def log_tail(self, n: int = 4000) -> str:
        """The end of the current run's log."""
        path = os.path.join(self.dir, f"engine-{max(self.starts - 1, 0)}.log")
        try:
            with open(path, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def cleanup(self) -> None:
        """Stops the engine and removes its directory; it cannot start again."""
        self.closed = True
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


_shared: Optional[Engine] = None
_shared_lock = threading.Lock()


def shared_engine() -> Engine:
    """One engine with the default registry for the tests that do not stop
    it, started on first use and killed at exit."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Engine(args=("--http-channel", "web,ops")).start()
            atexit.register(_shared.cleanup)
        return _shared
