"""What a ``collect`` files in the results store (:mod:`dlperf_slurm.store.database`): its cells as :class:`StoredCell`
records, under each campaign's identity (:mod:`dlperf_slurm.campaign.identity`), the system and partition they ran on;
and the one line that says so, naming the campaign when another of its name is stored too."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from dlperf_slurm.campaign.identity import CampaignId, of_collection
from dlperf_slurm.report.system import partition_of, system_section, versions_of
from dlperf_slurm.store.database import Store, StoredCell, describe, is_postgres, split_system
from dlperf_slurm.words import plural


def now_iso() -> str:
    """UTC, to the microsecond: campaigns collected in one second keep their order."""
    import datetime

    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def identities(result: Any) -> dict[str, CampaignId]:
    """Each campaign of a collect by its name (its runs' ``campaign``): its identity."""
    out: dict[str, CampaignId] = {}
    for col in result.collections:
        out.setdefault(col.name, of_collection(col))
    return out


def records(result: Any, *, system: str = "", partition: str = "", system_section: dict[str, Any] | None = None,
            when: str | None = None) -> list[StoredCell]:
    """A collect's cells as store records: one per cell with a status (a cell not yet run is left out); its OK
    values and statuses are the side ``compare`` reads from the same runs (:func:`compare.sides_from_runs`), its
    energy values the side ``compare --metric energy`` reads."""
    from dlperf_slurm.compare.rule import sides_from_runs

    when = when or now_iso()
    ids = identities(result)
    by_campaign: dict[str, list[Any]] = {}
    for r in result.runs:
        by_campaign.setdefault(r.campaign, []).append(r)
    sides = {name: sides_from_runs({"cell_id": r.cell_id, "status": r.status, "throughput": r.throughput}
                                   for r in runs) for name, runs in by_campaign.items()}
    energy = {name: sides_from_runs(({"cell_id": r.cell_id, "status": r.status, "throughput": r.throughput,
                                      "samples_per_joule": r.samples_per_joule} for r in runs), "energy")
              for name, runs in by_campaign.items()}
    versions = {name: versions_of(system_section, runs) for name, runs in by_campaign.items()}
    out = []
    for c in result.cells:
        side = sides.get(c.campaign, {}).get(c.cell_id)
        if side is None:
            continue
        cid = ids.get(c.campaign)
        out.append(StoredCell(system=system, partition=partition, campaign=c.campaign, cell_id=c.cell_id,
                              suite=c.suite, unit=c.unit, median=c.median, ci_low=c.ci_low, ci_high=c.ci_high,
                              n=c.n, n_ok=c.n_ok, status=str(c.status), ok_values=side.values,
                              ok_energy=energy[c.campaign][c.cell_id].values,
                              statuses=side.statuses, versions=versions.get(c.campaign, {}),
                              first_collected=when, collected_at=when,
                              campaign_key=cid.key if cid else "", matrix=cid.matrix if cid else "",
                              where=cid.where if cid else "", ran_at=(cid.ran_at if cid else "") or when))
    return out


def placement(result: Any, system: str | None) -> tuple[str, str, dict[str, Any] | None]:
    """Where a collect's cells go in the store: ``(system, partition, System object)``; the partition, when
    ``NAME[:PARTITION]`` names none, is the one the System object's runs ran in."""
    name, partition = split_system(system)
    section = system_section(result)
    return name, partition or partition_of(section), section


@dataclass
class Filed:
    """What :func:`record_collect` did: cells added and updated, and per campaign stored, the others of its name
    on its system (``(identity, folder, ran at)``)."""

    added: int
    updated: int
    campaigns: list[StoredCell] = field(default_factory=list)  # one cell of each campaign filed
    namesakes: dict[str, list[tuple[str, str, str]]] = field(default_factory=dict)

    def line(self, url: str) -> str:
        """``results store URL: N cells added, M updated``, and for a campaign whose name another stored campaign
        has too, which one this is and which the others are."""
        text = f"results store {describe(url)}: {plural(self.added, 'cell')} added, {self.updated} updated"
        for c in self.campaigns:
            others = self.namesakes.get(c.key)
            if others:
                on = f" on {c.system_label}" if c.system else ""
                text += (f" (campaign {c.campaign} of {c.where or '?'}, ran {_minute(c.when)}; the store holds "
                         f"{plural(len(others), 'other campaign')} named {c.campaign}{on}: "
                         + "; ".join(f"{w or k}, ran {_minute(t)}" for k, w, t in others) + ")")
        if is_postgres(url) and self.added and not self.updated:  # a campaign's first collect into a shared store
            text += (f"\nresults store {describe(url)} is shared (a center's PostgreSQL): whoever reads it sees these "
                     "campaigns' medians, versions and folders; --no-store keeps a campaign out")
        return text


def _minute(iso: str) -> str:
    return iso[:16].replace("T", " ")


def record_collect(result: Any, url: str, system: str | None = None) -> Filed:
    """Add a collect's cells to the store at ``url``."""
    name, partition, section = placement(result, system)
    rows = records(result, system=name, partition=partition, system_section=section)
    firsts = list({c.key: c for c in rows}.values())
    with Store(url) as st:
        added, updated = st.add(rows)
        return Filed(added, updated, firsts, {c.key: st.namesakes(c) for c in firsts})
