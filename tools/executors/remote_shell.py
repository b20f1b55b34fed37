"""Pieces shared by the ssh and Slurm executors: the process watcher and log decoding.

Both run a command on a machine where the controller is not its parent, so the
exit status cannot come from `wait()`: a small Python watcher (stdlib only, the
node's own interpreter) is the parent instead; it writes the command's pid to
`<log>.pid` and its status to `<log>.rc`.  Python rather than `sh`: a shell's
background job has SIGINT ignored, and a shell cannot both wait for the command
and make it a session leader (pid == pgid, so the whole group can be stopped).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from campaign.domain import server_env
from campaign.domain.server_env import DEFAULT_BASE_ENV

#: the most log bytes one `read_log` returns; the caller pages on with the offset.
MAX_LOG_CHUNK = 8 * 1024 * 1024

#: status for a process that vanished without a recorded one (SIGKILL of the watcher, reboot).
KILLED = -9

#: the watcher.  Status in `subprocess` convention (-N for signal N), as local processes
#: report it.  It ignores TERM/HUP so that it outlives a stop of the command's group.
#: With `linger` it stays until the group is empty: under Slurm the job (and its
#: GPUs) must last while orphans of the group still run, as they would elsewhere.
WATCHER = """\
import json, os, re, signal, subprocess, sys, time
from fnmatch import fnmatchcase
log, cwd, spec_path, argv = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
linger = sys.argv[5] == '1'
def put(path, text):
    import tempfile
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path) or '.', prefix=os.path.basename(path) + '.')
    with os.fdopen(fd, 'w') as f:
        f.write(text)
    os.replace(tmp, path)
try:
    with open(spec_path) as f:
        spec = json.load(f)
except (OSError, ValueError) as exc:
    print(f'campaign: cannot read the launch environment {spec_path}: {exc}', flush=True)
    put(log + '.pid', '0'); put(log + '.rc', '127'); sys.exit(127)
finally:
    try:
        os.unlink(spec_path)
    except OSError:
        pass
deny = re.compile(spec['deny'], re.IGNORECASE)
full = {k: v for k, v in os.environ.items()
        if not deny.match(k) and any(fnmatchcase(k, p) for p in spec['inherit'])}
full.update(spec['env'])
del spec
try:
    child = subprocess.Popen(argv, cwd=cwd or None, env=full, start_new_session=True)
except OSError as exc:
    print(f'{argv[0]}: not found ({exc.strerror})', flush=True)
    put(log + '.pid', '0'); put(log + '.rc', '127'); sys.exit(127)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
signal.signal(signal.SIGHUP, signal.SIG_IGN)
put(log + '.pid', str(child.pid))
put(log + '.rc', str(child.wait()))
def members(pgid):
    found = []
    for name in os.listdir('/proc'):
        try:
            with open(f'/proc/{name}/stat') as f:
                fields = f.read().rsplit(')', 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[0] != 'Z' and int(fields[2]) == pgid:
            found.append(name)
    return found
while linger and members(child.pid):  # keep the allocation while orphans of the group live
    time.sleep(0.5)
"""


def rc_path(log_path: str) -> str:
    return log_path + ".rc"


def pid_path(log_path: str) -> str:
    return log_path + ".pid"


#: the directory (mode 0700, under the node's workdir) of the launch environment files.
ENV_DIR = ".campaign-env"


def env_spec_path(workdir: str, log_path: str) -> str:
    """The launch environment file of the process logging to `log_path`: derived from
    the handle's own fields, so a `stop` (by a fresh executor after a crash, too) can
    delete one a job that never ran left behind."""
    digest = hashlib.sha256(log_path.encode()).hexdigest()[:24]
    return str(PurePosixPath(workdir) / ENV_DIR / f"{digest}.json")


def env_spec_bytes(env: Mapping[str, str] | None, base_env: Sequence[str] | None) -> bytes:
    """The launch environment file's content: explicit values, the base list, the secret rule."""
    patterns = DEFAULT_BASE_ENV if base_env is None else base_env
    return json.dumps(server_env.wire_spec(env, patterns)).encode()


def _private_dir_problem(path: str, uid: int, owner: int, mode: int, is_link: bool) -> str | None:
    if is_link:
        return f"node workdir {path} is a symbolic link (fix: remove it, or set the node's workdir to a directory of yours)"
    if owner != uid:
        return (
            f"node workdir {path} belongs to another user (uid {owner}) (fix: set the node's workdir to a "
            "directory of yours, e.g. ~/.cache/campaign-node)"
        )
    if mode & 0o022:
        return (
            f"node workdir {path} is writable by others (mode {mode & 0o777:o}) (fix: chmod 700 it, or set "
            "the node's workdir to a private directory)"
        )
    return None


def ensure_private_dir(path: str) -> str:
    """Create `path` (0700) or accept it only when it is this user's, not a link and not
    writable by others: logs, pids and worktrees there are a verdict's evidence.  Returns
    one line naming the problem and the fix, "" when the directory is fine."""
    os.makedirs(os.path.dirname(path.rstrip("/")) or "/", exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        pass
    st = os.lstat(path)
    import stat as _stat

    problem = _private_dir_problem(path, os.getuid(), st.st_uid, st.st_mode, _stat.S_ISLNK(st.st_mode))
    if problem is None:
        os.chmod(path, 0o700)
    return problem or ""


def private_dir_script(path: str) -> str:
    """What `private_dir_problem` needs from a node reached over ssh: the directory made
    (0700) if absent, then `link`, or `<our uid> <owner uid> <octal mode>`."""
    q = shlex.quote(path)
    return (
        f'mkdir -p "$(dirname {q})" && {{ mkdir -m 700 {q} 2>/dev/null; true; }} && '
        f"if [ -L {q} ]; then echo link; else echo \"$(id -u) $(stat -c '%u %a' {q})\"; fi"
    )


def private_dir_problem(path: str, answer: str) -> str | None:
    """The problem line for `private_dir_script`'s answer (None: the directory is ours)."""
    words = answer.split()
    if words == ["link"]:
        return _private_dir_problem(path, 0, 0, 0, True)
    if len(words) != 3 or not all(w.isdigit() for w in words):
        return f"node workdir {path}: cannot be made or inspected ({answer.strip()[:200]}) (fix: check the path)"
    return _private_dir_problem(path, int(words[0]), int(words[1]), int(words[2], 8), False)


def write_private(path: str, data: bytes) -> str:
    """Write `data` to a new file created 0600 in a directory made 0700 (on a
    filesystem this process reaches: the Slurm submit host's shared workdir)."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    os.chmod(directory, 0o700)
    if os.path.lexists(path):
        os.unlink(path)  # a stale one: never write into a file someone else may have made
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    return path


def watcher_argv(
    python: str, argv: Sequence[str], *, log_path: str, env_spec: str, cwd: str | None = None, linger: bool = False
) -> list[str]:
    """`python -c WATCHER ...`: everything passed as arguments, nothing quoted by hand.
    The environment is not among them (a command line is world-readable in `ps` for
    the server's lifetime): `env_spec` names the 0600 file holding it, which the
    watcher reads and deletes before it starts the command."""
    if not argv:
        raise ValueError("empty command")
    return [python, "-c", WATCHER, log_path, cwd or "", env_spec, json.dumps(list(argv)), "1" if linger else "0"]


def command_line(argv: Sequence[str]) -> str:
    """`argv...` as one shell line, every word quoted.  No environment: that goes
    over stdin (`export_lines`), never into a command line `ps` shows."""
    if not argv:
        raise ValueError("empty command")
    return shlex.join(argv)


def export_lines(env: Mapping[str, str] | None) -> str:
    """`export K='V'` lines for a remote shell to `eval` from its stdin."""
    return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())


def parse_status(text: str) -> int | None:
    """The status the watcher wrote; None when empty or garbled."""
    try:
        return int(text.strip())
    except ValueError:
        return None


def decode_complete(data: bytes) -> tuple[str, int]:
    """Decode UTF-8, leaving an incomplete trailing character for the next read.

    Returns (text, bytes consumed) so a log read by offset never splits a character.
    """
    cut = len(data)
    for back in range(1, min(4, len(data)) + 1):
        byte = data[-back]
        if byte & 0b1100_0000 == 0b1000_0000:  # continuation byte: keep looking for the lead
            continue
        if byte >= 0b1100_0000:  # lead byte: is its sequence complete?
            need = 2 if byte < 0b1110_0000 else 3 if byte < 0b1111_0000 else 4
            if back < need:
                cut = len(data) - back
        break
    return data[:cut].decode("utf-8", errors="replace"), cut
