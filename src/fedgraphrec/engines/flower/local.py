"""A Flower federation on loopback: one SuperLink and ``n`` SuperNodes as child processes.

For tests and measurements on one machine: ports are chosen free, each process gets a session of its
own (so a SuperNode can be killed with everything it started), logs go to the work folder, and every
process is killed when the context exits, whatever happened. With ``simulation=True`` the SuperLink
runs Flower's simulation runtime and no SuperNode process is started: ``flwr run`` then simulates
the SuperNodes (Ray backend), as ``flwr run`` does for a local simulation. A run is submitted to it
with :func:`fedgraphrec.engines.flower.party_app.deploy` (``flwr run`` on the app in ``deploy/flower``).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = ["APP_DIR", "LocalFederation", "local_federation"]

APP_DIR = Path(__file__).resolve().parents[4] / "deploy" / "flower"
"""The Flower app folder of a source checkout (``flwr run`` builds the FAB from it)."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class LocalFederation:
    """What ``flwr run`` needs: the environment naming the SuperLink, and the work folder."""

    env: dict[str, str]
    folder: Path
    connection: str = "local-test"


@contextmanager
def local_federation(
    folder: str | Path, supernodes: int = 2, node_configs: Sequence[str] = (), *, simulation: bool = False
) -> Iterator[LocalFederation]:
    """Start a SuperLink and ``supernodes`` SuperNodes (``--insecure``, loopback); kill them on exit.

    Args:
        folder: work folder (Flower home, SuperLink database, logs, outputs).
        supernodes: how many SuperNodes.
        node_configs: ``--node-config`` string of SuperNode ``i`` (empty or missing: none).
        simulation: start the SuperLink with Flower's simulation runtime instead (``--simulation``)
            and configure its federation with ``supernodes`` virtual SuperNodes (``flwr federation
            simulation-config``): ``flwr run`` then runs the app in a local simulation (Ray backend).
    """
    if supernodes < 1:
        raise ValueError(f"supernodes must be at least 1, got {supernodes}")
    folder = Path(folder)
    home = folder / "flwr"
    home.mkdir(parents=True, exist_ok=True)
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "FLWR_HOME": str(home), "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    if env.get("PYTHONPATH"):  # Flower starts apps in other folders: relative entries would miss
        entries = env["PYTHONPATH"].split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(str(Path(p).resolve()) for p in entries)
    env.setdefault("OMP_NUM_THREADS", "1")
    link = _free_port()
    fed = LocalFederation(env, folder)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "{fed.connection}"\n\n'
        f'[superlink.{fed.connection}]\naddress = "127.0.0.1:{link}"\ninsecure = true\n'
    )
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        with (folder / f"{name}.log").open("wb") as log:
            procs.append(subprocess.Popen(args, env=env, stdout=log, stderr=log, start_new_session=True))

    try:
        start(
            "superlink",
            str(bin_dir / "flower-superlink"),
            "--insecure",
            "--port",
            str(link),
            "--database",
            str(folder / "superlink.db"),
            *(["--simulation"] if simulation else []),
        )
        _wait_for_port(link, folder / "superlink.log")
        if simulation:
            _configure_simulation(fed, supernodes)
        for i in range(0 if simulation else supernodes):
            extra = ["--node-config", node_configs[i]] if i < len(node_configs) and node_configs[i] else []
            start(
                f"supernode{i}",
                str(bin_dir / "flower-supernode"),
                "--insecure",
                "--superlink",
                f"127.0.0.1:{link}",
                "--port",
                str(_free_port()),
                *extra,
            )
        yield fed
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)  # the session this function started, and only it
            p.wait(timeout=30)


def _wait_for_port(port: int, log: Path, limit_s: float = 60.0) -> None:
    """Block until the SuperLink accepts connections on ``port`` (``flwr run`` does not retry)."""
    deadline = time.monotonic() + limit_s
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1.0):
                return
        except OSError:
            if time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-800:] if log.exists() else ""
                message = f"the SuperLink did not open port {port} within {limit_s:.0f} s: {tail}"
                raise TimeoutError(message) from None
            time.sleep(0.2)


def _configure_simulation(fed: LocalFederation, supernodes: int, limit_s: float = 60.0) -> None:
    """Set the simulated federation's size once the SuperLink answers (it takes a few seconds)."""
    command = ["flwr", "federation", "simulation-config", "@none/default", fed.connection]
    deadline = time.monotonic() + limit_s
    while True:
        done = subprocess.run(
            [*command, "--num-supernodes", str(supernodes)], env=fed.env, capture_output=True, timeout=60
        )
        if done.returncode == 0:
            return
        if time.monotonic() > deadline:
            tail = done.stdout.decode(errors="replace")[-800:] + done.stderr.decode(errors="replace")[-800:]
            raise TimeoutError(f"the simulation SuperLink did not accept its configuration: {tail}")
        time.sleep(1.0)
