"""The rows every deduplication command's summary starts with, and the
summary the exact and fuzzy commands share."""

from __future__ import annotations

from typing import Any, Callable


def summary_start(title: str, metadata: dict[str, Any]) -> tuple[list[str], Callable[[str, object], None]]:
    """A summary's first rows (what this run did, documents in, bad records
    skipped) and the function adding the next."""
    lines = ["", title]

    def row(name: str, value: object) -> None:
        lines.append(f"  {name:<16} {value}")

    if "phases_run" in metadata:
        row("this run", f"ran {', '.join(metadata['phases_run'])}" if metadata["phases_run"] else
            "nothing to do: every phase was complete with its outputs in place (the results below are from then)")
    row("documents in", metadata.get("num_documents", "?"))
    if metadata.get("num_records_skipped"):
        row("skipped", f"{metadata['num_records_skipped']} bad record(s), not among the documents in "
                       "(--on-bad-record skip; each is logged as a warning naming its file and line)")
    return lines, row


def phase_times(metadata: dict[str, Any], phases: tuple[str, ...]) -> str:
    """Seconds per phase that took any, and the total."""
    times = [f"{phase} {metadata[f'{phase}_time']:.1f}" for phase in phases if metadata.get(f"{phase}_time")]
    return ", ".join([*times, f"total {metadata.get('total_time', 0.0):.1f}"])


def duplicates_summary(title: str, metadata: dict[str, Any], rule: str, phases: tuple[str, ...]) -> str:
    """Documents in, duplicates found (by ``rule``), removed and kept, time per phase, where the results are."""
    lines, row = summary_start(title, metadata)
    row("duplicates", f"{metadata.get('num_duplicates')} ({rule})")
    row("removed", metadata.get("num_duplicates_removed") if metadata.get("final_output_path") else "nothing (--no-removal)")
    if metadata.get("final_output_path"):
        row("kept", metadata.get("num_documents_kept"))
    row("time (s)", phase_times(metadata, phases))
    if metadata.get("final_output_path"):
        row("clean data", metadata["final_output_path"])
    row("duplicate ids", metadata.get("duplicates_path"))
    if metadata.get("id_generator_path"):
        row("id generator", metadata["id_generator_path"])
    return "\n".join(lines)
