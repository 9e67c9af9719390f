"""Reading container launch words: where the image sits in a `docker run` / `podman run`
argv and which entrypoint it sets. Shared by the launch-command parser (ingest) and the
command builder (kb.launchcmd)."""

from __future__ import annotations

# `docker run` / `podman run` options that take a value (docker CLI reference); any other
# option is a switch (-d, -it, --rm, --privileged, --init, ...). `--opt=value` holds its own.
DOCKER_VALUE_OPTS = frozenset((
    "-a", "--attach", "--add-host", "--annotation", "--blkio-weight", "-c", "--cpu-shares", "--cap-add", "--cap-drop",
    "--cgroup-parent", "--cgroupns", "--cidfile", "--cpus", "--cpuset-cpus", "--cpuset-mems", "--device",
    "--device-cgroup-rule", "--dns", "--dns-option", "--dns-search", "--domainname", "-e", "--env", "--env-file",
    "--entrypoint", "--expose", "--gpus", "--group-add", "-h", "--hostname", "--health-cmd", "--health-interval",
    "--health-retries", "--health-start-period", "--health-timeout", "--ip", "--ip6", "--ipc", "--isolation",
    "-l", "--label", "--label-file", "--link", "--log-driver", "--log-opt", "--mac-address", "-m", "--memory",
    "--memory-reservation", "--memory-swap", "--memory-swappiness", "--mount", "--name", "--net", "--network",
    "--network-alias", "--oom-score-adj", "-p", "--publish", "--pid", "--pids-limit", "--platform", "--pull",
    "--restart", "--runtime", "--security-opt", "--shm-size", "--stop-signal", "--stop-timeout", "--storage-opt",
    "--sysctl", "--tmpfs", "--ulimit", "-u", "--user", "--userns", "--uts", "-v", "--volume", "--volume-driver",
    "--volumes-from", "-w", "--workdir",
))


def docker_image_at(argv: list[str]) -> int | None:
    """Index of the image in a `docker run ...` / `podman run ...` argv (the words after
    it are the container's command or, with no command, the image entrypoint's arguments)."""
    if len(argv) < 3 or argv[0].rsplit("/", 1)[-1] not in ("docker", "podman") or argv[1] != "run":
        return None
    i = 2
    while i < len(argv):
        w = argv[i]
        if w == "--":
            return i + 1 if i + 1 < len(argv) else None
        if not w.startswith("-") or w == "-":
            return i
        i += 2 if w in DOCKER_VALUE_OPTS else 1
    return None


def docker_entrypoint(argv: list[str], image_at: int) -> str | None:
    """The `--entrypoint` a docker argv sets before its image, if any."""
    for i, w in enumerate(argv[2:image_at], 2):
        if w == "--entrypoint" and i + 1 < image_at:
            return argv[i + 1]
        if w.startswith("--entrypoint="):
            return w.split("=", 1)[1]
    return None
