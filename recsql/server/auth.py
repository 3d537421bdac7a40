"""Who may connect. `--auth none` (Spark's server's default) accepts any user and password;
`--auth password` checks them against a file of salted scrypt hashes, one `user:scrypt:N:r:p:salt:hash`
line per user (hex), written by `recsql serve --add-user NAME`. The file never holds a password."""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import tempfile
import threading
from pathlib import Path

SCRYPT = {"n": 2**14, "r": 8, "p": 1}
TRANSPORTS = ("binary", "http")
AUTH = ("none", "password")


class Anyone:
    """`--auth none`: every user name and password is accepted."""

    required = False

    def check(self, user: str, password: str) -> bool:
        return True


class PasswordFile:
    """`--auth password`: users and salted scrypt hashes from `path`."""

    required = True

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.users = read(self.path)
        self._verified: set[bytes] = set()  # digests of credentials checked once (HTTP resends)
        self._lock = threading.Lock()

    def check(self, user: str, password: str) -> bool:
        entry = self.users.get(user)
        if entry is None:
            return False
        key = hashlib.sha256(f"{user}\0{password}".encode()).digest()
        with self._lock:
            if key in self._verified:
                return True
        n, r, p, salt, expected = entry
        actual = hashlib.scrypt(password.encode(), salt=salt, n=n, r=r, p=p, dklen=len(expected))
        good = hmac.compare_digest(actual, expected)
        if good:
            with self._lock:
                self._verified.add(key)
        return good


def read(path: Path) -> dict[str, tuple[int, int, int, bytes, bytes]]:
    users = {}
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip() or line.startswith("#"):
            continue
        parts = line.strip().split(":")
        if len(parts) != 7 or parts[1] != "scrypt":
            raise ValueError(f"{path}:{number}: expected user:scrypt:N:r:p:salt:hash")
        user, _, n, r, p, salt, digest = parts
        users[user] = (int(n), int(r), int(p), bytes.fromhex(salt), bytes.fromhex(digest))
    return users


def hash_line(user: str, password: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(password.encode(), salt=salt, dklen=32, **SCRYPT)
    return f"{user}:scrypt:{SCRYPT['n']}:{SCRYPT['r']}:{SCRYPT['p']}:{salt.hex()}:{digest.hex()}"


def add_user(path: str | os.PathLike, user: str, password: str) -> None:
    """Add or replace `user` in the password file (written atomically, mode 0600)."""
    if not user or ":" in user or any(c.isspace() for c in user):
        raise ValueError(f"{user!r} is not a user name (no ':' or spaces)")
    if not password:
        raise ValueError("the password is empty")
    target = Path(path)
    lines = target.read_text().splitlines() if target.exists() else []
    kept = [line for line in lines if line.split(":", 1)[0] != user]
    text = "\n".join([*kept, hash_line(user, password)]) + "\n"
    fd, temp = tempfile.mkstemp(dir=target.parent or ".", prefix=".recsql-users-")
    try:
        with os.fdopen(fd, "w") as stream:
            stream.write(text)
        os.chmod(temp, 0o600)
        os.replace(temp, target)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


def check_options(host: str, transport: str, auth_mode: str, password_file: str | None,
                  ssl_cert: str | None, ssl_key: str | None, insecure: bool) -> None:
    if transport not in TRANSPORTS:
        raise ValueError(f"transport {transport!r}: expected one of {', '.join(TRANSPORTS)}")
    if auth_mode not in AUTH:
        raise ValueError(f"auth {auth_mode!r}: expected one of {', '.join(AUTH)}")
    if auth_mode == "password" and not password_file:
        raise ValueError("auth 'password' needs a password file (recsql serve --add-user NAME "
                         "--password-file FILE writes one)")
    if bool(ssl_cert) != bool(ssl_key):
        raise ValueError("TLS needs both a certificate and its key (--ssl-cert and --ssl-key)")
    if auth_mode == "none" and not loopback(host) and not insecure:
        raise ValueError(f"refusing to serve {host} without authentication: use --auth password, "
                         "or --insecure if every host that can reach it may run any query")


def loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
