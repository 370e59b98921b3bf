"""Published set-ups and their tables: `--setup lemire-2023` runs the seed's own, and its table is set beside the run's.

D. Lemire's 2023 posts measured four servers × two clients "on a Linux machine with Python 3.9" and Node.js 20, with
the releases of the time. Hosts differ, so beside each rate stands its ratio to Node.js × Node.js, measured in the
same run: a shape that holds across hosts shows there, where the rates cannot agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

BESIDE_FORMAT_VERSION = 1


@dataclass(frozen=True)
class Setup:
    name: str
    source: str  # where the published table comes from, in words
    servers: str  # what --servers and --clients it runs, as they are given
    clients: str
    python: str  # --python
    python_packages: str  # --python-packages: the releases of the time
    node_packages: str  # --node-packages
    published: dict[tuple[str, str], float]  # (server, client) -> roundtrips/s as published
    reference: tuple[str, str]  # the cell every ratio is taken to

    def options(self) -> dict[str, str]:
        """The run options the set-up fills in where the command line left them out."""
        return {"servers": self.servers, "clients": self.clients, "pythons": self.python,
                "python_packages": self.python_packages, "node_packages": self.node_packages}


SETUPS = {
    "lemire-2023": Setup(
        name="lemire-2023",
        source="D. Lemire, 2023 (Linux, Python 3.9, Node.js 20), roundtrips/s",
        servers="sanic,blacksheep,aiohttp,node-ws", clients="websockets,node-ws", python="3.9",
        # the releases current in November 2023 (PyPI's and npm's upload dates); the rest of requirements.txt's
        # pins become ceilings on Python 3.9 (package_envs.pins_as_ceilings)
        python_packages="websockets==12.0 sanic==23.6.0 sanic-routing==23.6.0 blacksheep==2.0.0 "
                        "uvicorn==0.24.0.post1 aiohttp==3.9.1 uvloop==0.19.0 httptools==0.6.1",
        node_packages="ws@8.14.2",
        published={("sanic", "websockets"): 3700, ("sanic", "node-ws"): 5200,
                   ("blacksheep", "websockets"): 3000, ("blacksheep", "node-ws"): 200,
                   ("aiohttp", "websockets"): 3600, ("aiohttp", "node-ws"): 270,
                   ("node-ws", "websockets"): 6000, ("node-ws", "node-ws"): 19000},
        reference=("node-ws", "node-ws")),
}


def beside(setup: Setup, measured: dict[tuple[str, str], float | None]) -> dict[str, Any]:
    """Each published cell beside the run's median: rates, each one's ratio to the reference cell, and the run's
    ratio over the published one (a cell whose ratio moved is where the hosts' shapes differ); pure."""
    published_reference = setup.published[setup.reference]
    measured_reference = measured.get(setup.reference)
    rows = []
    for (server, client), published in setup.published.items():
        rate = measured.get((server, client))
        published_ratio = published / published_reference
        measured_ratio = rate / measured_reference if rate and measured_reference else None
        rows.append({"server": server, "client": client, "published": published, "measured": rate,
                     "published_ratio": round(published_ratio, 4),
                     "measured_ratio": None if measured_ratio is None else round(measured_ratio, 4),
                     "shape_moved": None if measured_ratio is None else round(measured_ratio / published_ratio, 3)})
    return {"format_version": BESIDE_FORMAT_VERSION, "setup": setup.name, "source": setup.source,
            "reference": list(setup.reference), "rows": rows}


def render_markdown(table: dict[str, Any], results_file: str) -> str:
    """The side-by-side table as Markdown, naming the run's results file; pure."""
    reference = " × ".join(table["reference"])
    lines = [f"# The published table beside this run ({table['setup']})", "",
             f"Published: {table['source']}. Measured: `{results_file}` (median over the rounds). Ratios are to "
             f"{reference} in the same table; the last column is the measured ratio over the published one (1.00: "
             f"the same shape on both hosts).", "",
             "| server × client | published | measured | published ÷ ref | measured ÷ ref | shape moved |",
             "|---|--:|--:|--:|--:|--:|"]
    for row in table["rows"]:
        measured = "–" if row["measured"] is None else f"{row['measured']:,.0f}"
        measured_ratio = "–" if row["measured_ratio"] is None else f"{row['measured_ratio']:.3f}"
        moved = "–" if row["shape_moved"] is None else f"{row['shape_moved']:.2f}×"
        lines.append(f"| {row['server']} × {row['client']} | {row['published']:,.0f} | {measured} | "
                     f"{row['published_ratio']:.3f} | {measured_ratio} | {moved} |")
    return "\n".join(lines) + "\n"
