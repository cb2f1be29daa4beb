"""What docs/gpu.md says, checked without a cluster or a GPU.

* A stage's ``resources`` reach Flink and Spark as Beam resource hints: the
  pipeline proto their runners submit gives the stage's transforms an
  environment of their own (a copy of the default one) carrying the
  accelerator and min-ram hints; stages without ``resources`` carry none.
* With Java and the Flink job server jar already built here, Beam's own
  fuser (from that jar) puts each hinted stage into an executable stage of
  its own.
* Every ``beam-curator`` command in the page's bash blocks parses with the
  real command-line parser (nothing runs).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import apache_beam as beam
import pytest
from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.runners.portability.flink_runner import FlinkRunner
from apache_beam.runners.portability.portable_runner import PortableRunner
from apache_beam.runners.portability.spark_runner import SparkRunner

from beam_curator.cli import main as cli
from beam_curator.runners import SETTINGS
from beam_curator.stages import ProcessingStage, Resources
from beam_curator.transforms import CuratorStages
from beam_curator.transforms.transform_stage import TransformStage

ACCELERATOR = "beam:resources:accelerator:v1"
MIN_RAM = "beam:resources:min_ram_bytes:v1"
DOC = Path(__file__).resolve().parents[1] / "docs" / "gpu.md"

GPU_HINTS = {ACCELERATOR: b"type:nvidia-h100-80gb;count:2;install-nvidia-driver", MIN_RAM: b"32000000000"}
# gpu_memory_gb asks for one whole accelerator of the default type; "1GiB" is binary.
SHARE_HINTS = {ACCELERATOR: b"type:nvidia-l4;count:1;install-nvidia-driver", MIN_RAM: b"1073741824"}
HINTED = {
    "CuratorStages/01-embed": GPU_HINTS,
    "CuratorStages/03-infer/Copy": SHARE_HINTS,  # every transform inside a hinted composite
    "CuratorStages/03-infer/Pair": SHARE_HINTS,
}


class PassThrough(ProcessingStage):
    def process(self, task):
        return task


class PairUp(beam.PTransform):
    """A composite of two ParDos, as RunInference is."""

    def expand(self, tasks):
        return tasks | "Copy" >> beam.Map(lambda task: task) | "Pair" >> beam.Map(lambda task: (task, task))


class Infer(TransformStage):
    name = "infer"

    def transform(self) -> beam.PTransform:
        return PairUp()


RUNNERS = {
    "flink": (FlinkRunner, ["--runner=FlinkRunner", "--flink_master=jobmanager.internal:8081"]),
    "spark": (SparkRunner, ["--runner=SparkRunner", "--spark_master_url=spark://spark-master.internal:7077"]),
}


def submitted_pipeline(runner: str):
    """The proto ``FlinkRunner`` / ``SparkRunner`` would send to the job server:
    built with the runner's default environment (PROCESS here), after the
    portable runner's client-side optimisation. Nothing is started."""
    runner_class, flags = RUNNERS[runner]
    options = PipelineOptions([*flags, "--environment_type=PROCESS",
                               '--environment_config={"command": "/opt/apache/beam/boot"}'])
    pipeline = beam.Pipeline(options=options)
    _ = pipeline | CuratorStages([
        PassThrough().with_(name="source"),
        PassThrough().with_(name="embed", resources=Resources(gpus=2, gpu_type="nvidia-h100-80gb", min_ram="32GB")),
        PassThrough().with_(name="cpu"),
        Infer().with_(resources=Resources(gpu_memory_gb=10, min_ram="1GiB")),
        PassThrough().with_(name="sink"),
    ])
    proto = pipeline.to_runner_api(default_environment=runner_class().default_environment(options))
    return PortableRunner._optimize_pipeline(proto, options)


def leaf_hints(proto) -> dict[str, dict[str, bytes]]:
    """Hints of every leaf transform that runs in an SDK environment, by name."""
    environments = proto.components.environments
    return {
        transform.unique_name: dict(environments[transform.environment_id].resource_hints)
        for transform in proto.components.transforms.values()
        if transform.environment_id and not transform.subtransforms
    }


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_stage_resources_reach_the_runner_as_hints_on_an_environment_of_their_own(runner: str) -> None:
    proto = submitted_pipeline(runner)
    hints = leaf_hints(proto)
    assert {name: hints.get(name) for name in HINTED} == HINTED
    unhinted = {name: value for name, value in hints.items() if name not in HINTED}
    assert {"CuratorStages/00-source", "CuratorStages/02-cpu", "CuratorStages/03-infer-Lineage",
            "CuratorStages/04-sink"} <= set(unhinted)
    assert all(value == {} for value in unhinted.values()), {k: v for k, v in unhinted.items() if v}

    # The hints live on copies of the default environment: the same worker command, other hints.
    transforms = {t.unique_name: t for t in proto.components.transforms.values()}
    environments = proto.components.environments
    default = environments[transforms["CuratorStages/02-cpu"].environment_id]
    assert default.urn == "beam:env:process:v1" and not default.resource_hints
    hinted_ids = {transforms[name].environment_id for name in HINTED}
    assert len(hinted_ids) == 2 and transforms["CuratorStages/02-cpu"].environment_id not in hinted_ids
    for environment_id in hinted_ids:
        copy = environments[environment_id]
        assert (copy.urn, copy.payload) == (default.urn, default.payload)


FUSE_JAVA = """
import java.nio.file.*;
import org.apache.beam.model.pipeline.v1.RunnerApi;
import org.apache.beam.sdk.util.construction.graph.*;

public class Fuse {
  public static void main(String[] args) throws Exception {
    RunnerApi.Pipeline pipeline = RunnerApi.Pipeline.parseFrom(Files.readAllBytes(Paths.get(args[0])));
    for (ExecutableStage stage : GreedyPipelineFuser.fuse(pipeline).getFusedStages()) {
      StringBuilder names = new StringBuilder();
      for (PipelineNode.PTransformNode t : stage.getTransforms()) {
        names.append(t.getTransform().getUniqueName()).append(';');
      }
      System.out.println("STAGE\\t" + !stage.getEnvironment().getResourceHintsMap().isEmpty() + "\\t" + names);
    }
  }
}
"""


def built_flink_job_server() -> str | None:
    """The Flink job-server jar if one is already here (never built by this test)."""
    try:
        from beam_curator.runners.job_server import JOB_SERVERS, cache_dir
    except ImportError:
        return None
    named = os.environ.get(JOB_SERVERS["flink"].variable)
    cached = cache_dir() / JOB_SERVERS["flink"].jar_name
    return named if named and os.path.isfile(named) else (str(cached) if cached.is_file() else None)


def test_beams_fuser_gives_each_hinted_stage_an_executable_stage_of_its_own(tmp_path: Path) -> None:
    jar = built_flink_job_server()
    if shutil.which("java") is None or jar is None:
        pytest.skip("needs java and a Flink job-server jar built already (beam-curator job-server flink)")
    (tmp_path / "pipeline.pb").write_bytes(submitted_pipeline("flink").SerializeToString())
    (tmp_path / "Fuse.java").write_text(FUSE_JAVA)
    done = subprocess.run(["java", "-cp", jar, str(tmp_path / "Fuse.java"), str(tmp_path / "pipeline.pb")],
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    stages = [line.split("\t")[1:] for line in done.stdout.splitlines() if line.startswith("STAGE\t")]
    stages = [(hinted == "true", set(filter(None, names.split(";")))) for hinted, names in stages]
    hinted = sorted(sorted(names) for is_hinted, names in stages if is_hinted)
    assert hinted == [["CuratorStages/01-embed"], ["CuratorStages/03-infer/Copy", "CuratorStages/03-infer/Pair"]]
    assert all(not (names & set(HINTED)) for is_hinted, names in stages if not is_hinted)


# Every beam-curator command in the page's bash blocks.

BASH_BLOCK = re.compile(r"^```bash\n(.*?)^```", re.MULTILINE | re.DOTALL)
ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=.*")


def doc_commands() -> list[list[str]]:
    """The arguments of each ``beam-curator`` command, continuation lines
    joined, ``VAR=value`` prefixes and a trailing ``&`` dropped."""
    commands = []
    for block in BASH_BLOCK.findall(DOC.read_text()):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and ASSIGNMENT.fullmatch(words[0]):
                words.pop(0)
            if words and words[-1] == "&":
                words.pop()
            if words and words[0] == "beam-curator":
                commands.append(words[1:])
    return commands


COMMANDS = doc_commands()


def test_the_page_has_the_commands_checked_below() -> None:
    commands = [" ".join(argv) for argv in COMMANDS]
    assert len(commands) >= 5, commands
    assert any("--runner flink" in c for c in commands) and any("--runner spark" in c for c in commands)
    assert any(c.startswith("job-server") for c in commands)


@pytest.mark.parametrize("argv", COMMANDS, ids=[f"{n}-{argv[0]}" for n, argv in enumerate(COMMANDS, start=1)])
def test_every_beam_curator_command_in_the_page_parses(argv: list[str], monkeypatch, capsys) -> None:
    """The real ``main``, whose commands only record what they were given."""
    build_parser = cli.build_parser
    given = []

    def parse_only() -> object:
        parser = build_parser()
        for sub in parser._subparsers._group_actions[0].choices.values():
            sub.set_defaults(handler=lambda args, beam_args: given.append((args, beam_args)) or 0)
        return parser

    monkeypatch.setattr(cli, "build_parser", parse_only)
    try:
        code = cli.main(list(argv))
    except SystemExit as exit_info:
        pytest.fail(f"beam-curator {shlex.join(argv)}\nexits {exit_info.code}: {capsys.readouterr().err}")
    assert code == 0 and len(given) == 1
    args, beam_args = given[0]
    runner = getattr(args, "runner", None)
    if runner is not None:  # runner settings belong to the runner chosen
        stray = [key for key in set().union(*SETTINGS.values()) if getattr(args, key, None) is not None
                 and key not in SETTINGS[runner]]
        assert not stray, f"{stray} do not apply to --runner {runner}"
    jar = getattr(args, "flink_job_server_jar", None)
    if jar:  # without --flink-version, Beam's default (its newest Flink) would not match the jar
        named = re.search(r"flink-(\d+\.\d+)-job-server", jar)
        assert named and args.flink_version == named.group(1), f"--flink-version {args.flink_version} for {jar}"
    # Raw flags after -- are Beam options (an unknown one would be dropped with a warning).
    known = PipelineOptions(beam_args).get_all_options(drop_default=True)
    for flag in beam_args:
        assert flag.startswith("--") and flag[2:].split("=", 1)[0] in known, f"{flag} is not a Beam option"
