"""Beam's FlinkRunner with one job server per process and settings.

Beam's FlinkRunner starts a new job-server JVM for every pipeline it runs
and stops none of them before the process exits (each is stopped at exit):
a workflow whose phases are Beam pipelines of their own (the fuzzy
workflow's six, and one per star round) paid a JVM start-up per phase,
about 10 s here, and held one JVM per phase until the end. Beam's
SparkRunner already shares one job server among the pipelines of a process
with the same runner and job-server settings; :class:`SharedJobServerFlinkRunner`
does the same for Flink.
"""

from __future__ import annotations

from apache_beam.options import pipeline_options as beam_options
from apache_beam.runners.portability import job_server
from apache_beam.runners.portability.flink_runner import FlinkRunner

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
