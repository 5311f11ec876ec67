"""Revenue per minute from a directory of order files, as a production Spark job.

Reads JSON-lines order files as they arrive in `--input` (one micro-batch
per new file), drops orders more than 5 minutes late, and writes each closed
minute's order count and revenue as parquet under `--output`, exactly once,
with its checkpoint under `--checkpoint`: stopped (or killed) and submitted
again with the same paths, it goes on where it stopped.

    spark-submit --master spark://host:7077 examples/spark_submit_job.py \\
        --input /mnt/shared/orders --output /mnt/shared/revenue \\
        --checkpoint /mnt/shared/checkpoints/revenue

Paths are any URI Spark reads (`hdfs://`, `s3a://`, `abfss://`, `gs://`, with
the connector on Spark's classpath), or local paths every machine of the
cluster sees (a shared mount): the runner asks Spark's Hadoop file systems.

`spark-submit` brings the session (master, memory, packages); the job takes
it with `getOrCreate()` and hands it to the runner, which ships sparkbeam to
the executors itself. `--once` processes the files there now and stops (for
a scheduled batch-like run, and for trying the job out).
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from pyspark.sql import SparkSession

import sparkbeam as sb

ORDERS = {"order_id": str, "amount": float, "event_time": "datetime"}


def build(p: sb.Pipeline, source: str, target: str) -> sb.PCollection:
    orders = p | "orders" >> sb.ReadFiles(source, format="json", schema=ORDERS, streaming=True)
    per_minute = (
        orders.with_watermark("event_time", delay=timedelta(minutes=5))
        .tumble("event_time", size="1 minute")
        .combine_per_key(
            ["window_start", "window_end"],
            order_count=sb.Count(),
            total_revenue=sb.Sum("amount"),
        )
    )
    return per_minute.write_files(target, format="parquet")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--input", required=True, help="directory of JSON-lines order files")
    parser.add_argument("--output", required=True, help="directory for the parquet output")
    parser.add_argument("--checkpoint", required=True, help="checkpoint location")
    parser.add_argument("--once", action="store_true", help="process what is there, then stop")
    args = parser.parse_args()

    spark = SparkSession.builder.appName("revenue-per-minute").getOrCreate()
    runner = sb.SparkRunner(spark=spark, checkpoint_location=args.checkpoint, progress=True)
    p = sb.Pipeline(runner=runner)
    build(p, args.input, args.output)
    result = p.run()
    print(f"revenue-per-minute: writing to {args.output}, checkpoint {args.checkpoint}")
    if args.once:
        result.process_all_available()
        result.stop()
    else:
        result.await_termination()


if __name__ == "__main__":
    main()
