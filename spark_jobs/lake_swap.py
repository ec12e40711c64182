"""Putting an export's rows in place so that no reader ever sees a segment's partition half replaced.

The export writes a run's rows with Spark into a staging directory under the dataset,
``_staging/run-<run>/`` (the ``_`` prefix keeps Spark's and pyarrow's readers out of it), laid out like the
lake. Only then are they moved in, one *leaf* at a time: a leaf is one segment's rows for one UTC day,
``namespace=…/date=…/shard=…/segment_base=…``, and it holds one data file (each Spark task writes one
segment, one file per day it spans). Per leaf:

- new in this run: the staged file is renamed into the lake (the leaf appears at once);
- already in the lake (the segment was rewritten by compaction, or more of its records are dead): the staged
  file is renamed *over* the lake's file (:meth:`~spark_jobs.lake.LakeFileSystem.replace_file`, one
  ``rename(2)``), so a reader opens the old rows or the new ones, never both and never neither;
- no longer there (no record of that day survived): the lake's file is deleted (the leaf's rows go at once;
  the empty directory is removed after the catalog has forgotten the partition).

A record's leaf is fixed by its timestamp, so at every moment each record the new version keeps is in the
lake exactly once, whichever leaves have been swapped yet; a record the new version drops disappears when
its leaf is swapped. (A segment spanning two days has two leaves, swapped one after the other.)

A killed export leaves at most a staging directory (deleted by the next run, :func:`clear_staging`) and some
leaves swapped: the manifest is written after the swap, so the next run exports those segments again and
swaps the same rows in once more.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from spark_jobs.lake import LakeFileSystem

log = logging.getLogger(__name__)

STAGING_DIR = "_staging"
LEAF_DEPTH = 4  # namespace / date / shard / segment_base

# Called before each step with the step's name and its leaf (None for whole-run steps), so that tests can
# look at the lake between the steps of a swap (or stop the export there).
StepHook = Callable[[str, "str | None"], None]


def no_hook(step: str, leaf: str | None) -> None:
    """The default :data:`StepHook`: nothing."""


@dataclass
class SwapCounts:
    added: int = 0  # leaves new in the lake
    replaced: int = 0  # leaves whose file was swapped for the new one
    emptied: int = 0  # leaves whose rows all went


def staging_dir(run: int) -> str:
    return f"{STAGING_DIR}/run-{run:010d}"


def clear_staging(lake: LakeFileSystem) -> bool:
    """Delete what a killed export left in staging; True when there was something."""
    return lake.exists(STAGING_DIR) and lake.delete(STAGING_DIR)


def leaves_of(files: Iterable[tuple[str, int]]) -> dict[str, list[str]]:
    """Leaf directory → names of its data files, from :meth:`~spark_jobs.lake.LakeFileSystem.data_files`."""
    leaves: dict[str, list[str]] = defaultdict(list)
    for path, _size in files:
        parts = path.split("/")
        if len(parts) == LEAF_DEPTH + 1:
            leaves["/".join(parts[:LEAF_DEPTH])].append(parts[-1])
    return {leaf: sorted(names) for leaf, names in leaves.items()}


def swap_in(
    lake: LakeFileSystem,
    staged_root: str,
    current: dict[str, list[str]],
    hook: StepHook = no_hook,
) -> SwapCounts:
    """Move the leaves staged under ``staged_root`` into the lake, in place of ``current`` (leaf → data file
    names now in the lake, for the segments being replaced); see the module's description."""
    staged = leaves_of(lake.data_files(staged_root))
    counts = SwapCounts()
    for leaf in sorted(set(staged) | set(current)):
        hook("swap", leaf)
        new = [f"{staged_root}/{leaf}/{name}" for name in staged.get(leaf, [])]
        old = [f"{leaf}/{name}" for name in current.get(leaf, [])]
        if len(new) > 1 or len(old) > 1:
            # Not written by this job's layout (one file per leaf): correct in the end, not atomic on the way.
            log.warning("leaf %s: %d staged and %d present files; its swap is not atomic", leaf, len(new), len(old))
        if new and old:
            lake.replace_file(new[0], old[0])
            counts.replaced += 1
        elif new:
            lake.mkdirs(leaf)
            lake.rename(new[0], f"{leaf}/{new[0].rsplit('/', 1)[1]}")
            counts.added += 1
        else:
            counts.emptied += 1
        for path in old[1:] if new else old:
            lake.delete(path, recursive=False)
        for path in new[1:]:
            lake.rename(path, f"{leaf}/{path.rsplit('/', 1)[1]}")
    hook("swapped", None)
    return counts
