"""Orders per minute: a count and a revenue per one-minute window, over a few dozen orders.

Orders arrive in six micro-batches (epochs), some out of order and a few so
late that the watermark (5 minutes behind the newest order) has passed them:
those are dropped and counted. Run it in the project's environment,
`.venv/bin/python examples/orders_per_minute.py` (`make example` makes it; add
`--runner spark` for the Spark runner).

It prints the windows, each transform's metrics, and where it wrote the
pipeline's picture (`--picture PATH`, SVG or PNG; by default
`orders_per_minute.svg` in a new temporary directory, never the current one): every
transform, the rows on every edge, the columns that carry a watermark there,
and the late orders. Without Graphviz it writes the picture's DOT source.
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
from datetime import datetime, timedelta

import sparkbeam as sb

START = datetime(2026, 4, 1, 10, 0)


def generate_orders(seed: int = 7) -> list[list[dict[str, object]]]:
    """Six epochs of orders: mostly in order, some a little out of order, a few very late."""
    rng = random.Random(seed)
    epochs: list[list[dict[str, object]]] = []
    order_number = 0
    for epoch in range(6):
        rows: list[dict[str, object]] = []
        for _ in range(8):
            order_number += 1
            seconds = epoch * 120 + rng.randrange(0, 120)
            if order_number % 9 == 0:
                seconds -= 60 * rng.randrange(1, 3)  # out of order, within the delay
            if epoch >= 4 and order_number % 7 == 0:
                seconds -= 60 * 7  # later than the 5-minute delay allows: dropped
            rows.append(
                {
                    "order_id": f"o{order_number}",
                    "amount": round(rng.uniform(5, 80), 2),
                    "event_time": START + timedelta(seconds=seconds),
                }
            )
        epochs.append(rows)
    return epochs


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runner", default="direct", choices=["direct", "spark"])
    parser.add_argument(
        "--picture",
        help="where to write the pipeline's picture (.svg or .png); by default into a new "
        "temporary directory",
    )
    args = parser.parse_args(argv)
    picture = args.picture or os.path.join(
        tempfile.mkdtemp(prefix="orders_per_minute-"), "orders_per_minute.svg"
    )

    stream = sb.TestStream()
    for rows in generate_orders():
        stream.add_epoch(rows)

    runner = sb.SparkRunner(progress=True) if args.runner == "spark" else args.runner
    with sb.Pipeline(runner=runner) as p:
        orders = p | "orders" >> stream
        watermarked = orders.with_watermark("event_time", delay=timedelta(minutes=5))
        late = watermarked.late_rows()
        per_minute = watermarked.tumble("event_time", size="1 minute").combine_per_key(
            ["window_start", "window_end"],
            order_count=sb.Count(),
            total_revenue=sb.Sum("amount"),
        )
    result = p.result

    rows = sorted(result.collect(per_minute), key=lambda row: row["window_start"])
    print(f"{'window_start':<20} {'window_end':<20} {'orders':>6} {'revenue':>9}")
    for row in rows:
        print(
            f"{row['window_start']:%Y-%m-%d %H:%M}     {row['window_end']:%Y-%m-%d %H:%M}     "
            f"{row['order_count']:>6} {row['total_revenue']:>9.2f}"
        )
    total = sum(len(epoch) for epoch in generate_orders())
    counted = sum(row["order_count"] for row in rows)
    print(
        f"\n{total} orders in, {counted} counted in windows, "
        f"{result.late_count(watermarked)} dropped as late "
        f"({', '.join(row['order_id'] for row in result.collect(late))})"
    )
    print()
    print(result.metrics())
    print(f"\nThe pipeline's picture: {write_picture(result.graph(), picture)}")


def write_picture(graph: sb.PipelineGraph, path: str) -> str:
    """Draw `graph` to `path`; without Graphviz, write its DOT source next to it instead."""
    try:
        return graph.render(path)
    except (ImportError, RuntimeError) as missing:
        dot_path = os.path.splitext(path)[0] + ".dot"
        with open(dot_path, "w") as out:
            out.write(graph.to_dot())
        return f"{dot_path} (DOT source: {missing})"


if __name__ == "__main__":
    main()
