"""Beam's FlinkRunner with one job server per process and settings.

Beam's FlinkRunner starts a new job-server JVM for every pipeline it runs
and stops none of them before the process exits (each is stopped at exit):
a workflow whose phases are Beam pipelines of their own (the fuzzy
workflow's six, and one per star round) paid a JVM start-up per phase,
about 10 s here, and held one JVM per phase until the end. Beam's
SparkRunner already shares one job server among the pipelines of a process
with the same runner and job-server settings; :class:`SharedJobServerFlinkRunner`
does the same for Flink.

Cancelling a run's job on a Flink cluster takes Flink's REST API: Beam's
cancel stops the job server's wait for the job, and the job itself ran on to
FINISHED, using the cluster after its user had stopped the run.
:class:`FlinkRunJobs` finds the jobs a run submitted (by the unique job name
each run gets, :func:`run_job_name`) and cancels them.
"""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
import uuid

from apache_beam.options import pipeline_options as beam_options
from apache_beam.runners.portability import job_server
from apache_beam.runners.portability.flink_runner import FlinkRunner

from beam_curator.runners.services import get_json

# Started job servers by the settings that configure them; each is stopped when the process exits.
_JOB_SERVERS: dict[str, job_server.JobServer] = {}


class SharedJobServerFlinkRunner(FlinkRunner):
    """FlinkRunner whose job server is started once for its settings and reused by later pipelines."""

    def default_job_server(self, options: beam_options.PipelineOptions) -> job_server.JobServer:
        flink = options.view_as(beam_options.FlinkRunnerOptions)
        if flink.flink_submit_uber_jar:  # a jar per job, submitted to the cluster: nothing to share
            return super().default_job_server(options)
        key = str(flink) + str(options.view_as(beam_options.JobServerOptions))
        if key not in _JOB_SERVERS:
            _JOB_SERVERS[key] = super().default_job_server(options)
        return _JOB_SERVERS[key]


# A job's states in which it no longer runs or is on its way to stopping.
_ENDED = ("FINISHED", "FAILED", "CANCELED", "CANCELLING", "SUSPENDED")


def run_job_name() -> str:
    """A job name no other run shares: how a run's jobs are told apart on a cluster others use too."""
    return f"beam-curator-{uuid.uuid4().hex[:12]}"


def rest_url(master: str) -> str:
    """The REST API's base URL for a ``flink_master`` (``host:port``, with or without a scheme)."""
    return f"http://{re.sub(r'^[a-z]+://', '', master).rstrip('/')}"


def cancel_job(master: str, job_id: str) -> None:
    """Cancel a job, as ``flink cancel`` does. A job that reached another end in
    the meantime (Flink answers 409 Conflict) is left as it is; one the cluster
    does not know is an error (404)."""
    request = urllib.request.Request(f"{rest_url(master)}/jobs/{job_id}?mode=cancel", method="PATCH")
    try:
        urllib.request.urlopen(request, timeout=10).close()
    except urllib.error.HTTPError as error:
        state = get_json(f"{rest_url(master)}/jobs/{job_id}").get("state") if error.code == 409 else None
        if state not in _ENDED:
            raise


class FlinkRunJobs:
    """The jobs named ``name`` on the cluster at ``master`` that were not there
    when this was made: those of one run."""

    def __init__(self, master: str, name: str) -> None:
        self.master, self.name = master, name
        self.before = {job["jid"] for job in self._named()}

    def _named(self) -> list[dict]:
        return [job for job in get_json(f"{rest_url(self.master)}/jobs/overview")["jobs"] if job["name"] == self.name]

    def cancel(self, timeout: float = 30.0, appear_within: float = 10.0) -> dict[str, str]:
        """Cancel the run's jobs that still run, and wait up to ``timeout`` for
        each to end; returns each job's last state. A job still being submitted
        (the job server translates and uploads it first) is waited for up to
        ``appear_within``."""
        started = time.monotonic()
        while True:
            jobs = [job for job in self._named() if job["jid"] not in self.before]
            for job in jobs:
                if job["state"] not in _ENDED:
                    cancel_job(self.master, job["jid"])
            states = {job["jid"]: job["state"] for job in jobs}
            waited = time.monotonic() - started
            if all(state in ("FINISHED", "FAILED", "CANCELED") for state in states.values()) and \
                    (states or waited > appear_within) or waited > timeout:
                return states
            time.sleep(0.5)


def flink_run_jobs(options: beam_options.PipelineOptions) -> FlinkRunJobs | None:
    """The run's jobs on the Flink cluster these options submit to (None for
    any other runner, and for Flink's embedded cluster, which ends with its
    job server)."""
    runner = str(options.view_as(beam_options.StandardOptions).runner or "")
    master = options.view_as(beam_options.FlinkRunnerOptions).flink_master
    if not runner.endswith(SharedJobServerFlinkRunner.__name__) or master in (None, "[local]", "[auto]"):
        return None
    return FlinkRunJobs(master, options.view_as(beam_options.GoogleCloudOptions).job_name)
