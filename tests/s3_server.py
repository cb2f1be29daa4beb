"""A real S3 endpoint for the tests: S3Proxy (Apache-2, one Java jar from
Maven Central) serving a folder of this machine through the S3 protocol.

The jar is fetched once by Maven into a cache folder. The server is a
``Service``: a process group of its own, so a test can kill it mid-run
(``kill``) and start it again on the same port and folder (``start``), as a
real outage would go; and, like the package's clusters, ended with its folder
by the next test run if the run that started it was killed.
"""

from __future__ import annotations

import http.client
import http.server
import os
import re
import shutil
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from beam_curator.runners.services import Service

S3PROXY = "org.gaul:s3proxy:2.6.0:jar:jar-with-dependencies"
JAR_NAME = "s3proxy-2.6.0-jar-with-dependencies.jar"
CACHE = Path(os.environ.get("BEAM_CURATOR_CACHE", Path.home() / ".cache" / "beam_curator")) / "s3proxy"

ACCESS_KEY = "curator-test-access"
# A secret no other string in a run contains, so that a test can search logs and files for it.
SECRET_KEY = "s3cr3t-Zq7W-never-print-me-4Kx9"
# botocore (since 1.36) sends CRC checksums with every upload by default, which S3Proxy, like several other
# S3-compatible servers, answers with NotImplemented; asking for checksums only where the API requires them works
# with all of them, and with AWS.
CHECKSUMS_WHEN_REQUIRED = {"request_checksum_calculation": "when_required",
                           "response_checksum_validation": "when_required"}
# S3Proxy's filesystem store writes an object to KEY-UUID beside it, then renames it to KEY.
UNFINISHED_UPLOAD = re.compile(r".+-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class S3ServerUnavailable(RuntimeError):
    """No Java or Maven here, or the jar could not be fetched: S3 tests skip."""


def s3proxy_jar() -> Path:
    jar = CACHE / JAR_NAME
    if jar.is_file():
        return jar
    if not (shutil.which("java") and shutil.which("mvn")):
        raise S3ServerUnavailable("S3Proxy needs `java` and `mvn` on PATH")
    CACHE.mkdir(parents=True, exist_ok=True)
    fetched = subprocess.run(
        ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={S3PROXY}", f"-DoutputDirectory={CACHE}"],
        capture_output=True, text=True, timeout=600,
    )
    if fetched.returncode != 0 or not jar.is_file():
        raise S3ServerUnavailable(f"Maven could not fetch {S3PROXY}: {fetched.stdout[-2000:]}{fetched.stderr[-2000:]}")
    return jar


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class S3Server:
    """One S3Proxy on ``127.0.0.1:port`` storing buckets as folders of ``root``."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.port = port or _free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.service: Service | None = None

    def start(self, timeout: float = 60.0) -> None:
        (self.root / "data").mkdir(parents=True, exist_ok=True)
        self._drop_unfinished_uploads()
        properties = self.root / "s3proxy.properties"
        properties.write_text("\n".join([
            f"s3proxy.endpoint={self.endpoint}",
            "s3proxy.authorization=aws-v2-or-v4",
            f"s3proxy.identity={ACCESS_KEY}",
            f"s3proxy.credential={SECRET_KEY}",
            "jclouds.provider=filesystem-nio2",
            "jclouds.identity=local",
            "jclouds.credential=local",
            f"jclouds.filesystem.basedir={self.root / 'data'}",
        ]) + "\n")
        self.service = Service("s3proxy", ["java", "-jar", str(s3proxy_jar()), "--properties", str(properties)],
                               self.port, startup_timeout=timeout, folders=[self.root], ready=self._answers)
        try:
            self.service.start()
        except (RuntimeError, TimeoutError) as error:
            raise S3ServerUnavailable(f"S3Proxy did not start: {error}") from error

    def _drop_unfinished_uploads(self) -> None:
        """What S3 never shows: an upload the outage cut short. S3Proxy killed mid-upload leaves its temporary
        file, which it then lists without the attributes it reads for each object, failing every listing of
        that folder with a 500 (seen in CI: the rerun after ``kill`` failed so)."""
        for path in (self.root / "data").rglob("*"):
            if path.is_file() and UNFINISHED_UPLOAD.fullmatch(path.name):
                path.unlink()

    def _answers(self) -> bool:
        """Whether the server answers a request without a server error: S3Proxy
        listens before its storage is ready, and answers 500 for a moment then."""
        try:
            urllib.request.urlopen(self.endpoint, timeout=2)
        except urllib.error.HTTPError as error:
            return error.code < 500  # 403 to an anonymous request: ready
        except OSError:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL the server (an outage, not a shutdown) and wait for it to go."""
        if self.service is not None:
            self.service.kill()

    def storage_options(self, **overrides: Any) -> dict[str, Any]:
        """What s3fs needs to reach this server (fsspec ``storage_options``)."""
        return {"key": ACCESS_KEY, "secret": SECRET_KEY, "client_kwargs": {"endpoint_url": self.endpoint},
                "config_kwargs": CHECKSUMS_WHEN_REQUIRED, **overrides}

    def environment(self) -> dict[str, str]:
        """The same credentials and endpoint the way boto reads them from the environment."""
        return {"AWS_ACCESS_KEY_ID": ACCESS_KEY, "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
                "AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ENDPOINT_URL": self.endpoint,
                "AWS_DEFAULT_REGION": "us-east-1",
                "AWS_REQUEST_CHECKSUM_CALCULATION": "when_required", "AWS_RESPONSE_CHECKSUM_VALIDATION": "when_required"}

    def filesystem(self) -> Any:
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options())

    def make_bucket(self, name: str) -> str:
        # Not ``mkdir``: it asks ``exists`` first, and S3Proxy answers GetBucketLocation for any name, so s3fs
        # takes every bucket to exist. Listing a missing bucket does fail (FileNotFoundError).
        try:
            self.filesystem().call_s3("create_bucket", Bucket=name)
        except FileExistsError:  # BucketAlreadyOwnedByYou: botocore retried a create that had gone through
            pass
        return f"s3://{name}"


# What S3 answers when it fails inside (HTTP 500), as botocore reads it.
INTERNAL_ERROR = (b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>InternalError</Code>'
                  b"<Message>We encountered an internal error. Please try again.</Message></Error>")


class FailingFront:
    """An HTTP endpoint in front of an ``S3Server`` that passes every request
    on to it, until a file named ``switch`` exists (created by a test, or by a
    stage on a worker): from then on it answers each request (or, if the file
    names HTTP methods, each request of those) as S3 does when it fails
    inside, HTTP 500 ``InternalError``. The store stays up; only its answers
    go bad, as in an overloaded or broken S3 service."""

    def __init__(self, server: S3Server, switch: Path) -> None:
        self.switch = switch
        self.requests_failed = 0
        front = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if front.fails(self.command):
                    front.requests_failed += 1
                    status, headers, payload = 500, [("Content-Type", "application/xml")], INTERNAL_ERROR
                else:
                    upstream = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
                    upstream.request(self.command, self.path, body=body, headers=dict(self.headers))
                    response = upstream.getresponse()
                    status, headers, payload = response.status, response.getheaders(), response.read()
                    upstream.close()
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in ("transfer-encoding", "connection", "date", "server") and (
                            name.lower() != "content-length" or self.command == "HEAD"):
                        self.send_header(name, value)
                if self.command != "HEAD" or status >= 500:  # a HEAD's length is the object's, its body none
                    self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(payload)

            do_GET = do_PUT = do_POST = do_HEAD = do_DELETE = _answer

            def log_message(self, *args: object) -> None:
                pass

        self._http = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self._http.server_port}"
        threading.Thread(target=self._http.serve_forever, daemon=True).start()

    def fails(self, method: str) -> bool:
        try:
            methods = self.switch.read_text().split()
        except FileNotFoundError:
            return False
        return not methods or method in methods

    def environment(self, server: S3Server) -> dict[str, str]:
        """``server``'s environment, with this front as the endpoint."""
        return {**server.environment(), "AWS_ENDPOINT_URL_S3": self.endpoint, "AWS_ENDPOINT_URL": self.endpoint}

    def close(self) -> None:
        self._http.shutdown()
        self._http.server_close()
