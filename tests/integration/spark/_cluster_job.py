"""The Spark application of the standalone-cluster test, launched by ``spark-submit --py-files
parka.zip`` as users launch one. One application (a driver and its executors cost ~40 s to start
on two cores), two jobs:

1. ``parka spark-ingest TOPIC TABLE --end-at-latest`` through the CLI's own ``main``, which reuses
   the session spark-submit made: raw mode, its segments written on the cluster's executors;
2. ``read_stream`` of the same topic on the executors, its records landed in a Delta table
   (available-now), their ids printed as JSON.

Usage: spark-submit ... _cluster_job.py TOPIC BOOTSTRAP TABLE RECORDS_TABLE
"""

from __future__ import annotations

import json
import sys

from parka.spark_ext import read_stream, session


def main(topic: str, bootstrap: str, table: str, records_table: str) -> None:
    spark = session(app_name="parka on a cluster")  # the master spark-submit was given
    from parka.cli import main as parka_main

    status = parka_main(["spark-ingest", topic, table, "-k", bootstrap, "--end-at-latest", "-q"])
    if status != 0:
        sys.exit(status)
    # schema from the first segment; a stream starts at the latest offsets unless told otherwise
    records = read_stream(spark, topic, bootstrap_servers=bootstrap, options={"startingOffsets": "earliest"})
    query = (
        records.writeStream.format("delta")
        .option("checkpointLocation", f"{records_table}_checkpoint")
        .trigger(availableNow=True)
        .start(records_table)
    )
    query.awaitTermination()
    ids = spark.read.format("delta").load(records_table).select("id").toArrow().column("id").to_pylist()
    print(json.dumps({"master": spark.sparkContext.master, "ids": sorted(ids)}))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:5])
