"""A Spark job for the standalone-cluster test, launched by ``spark-submit --py-files parka.zip``
as users launch one: ``read_stream`` a topic on the cluster's executors, land its records in a
Delta table (available-now) and print their ids as JSON.

Usage: spark-submit ... _cluster_read.py TOPIC BOOTSTRAP TABLE
"""

from __future__ import annotations

import json
import sys

from parka.spark_ext import read_stream, session


def main(topic: str, bootstrap: str, table: str) -> None:
    spark = session(app_name="parka read_stream on a cluster")  # the master spark-submit was given
    # schema from the first segment; a stream starts at the latest offsets unless told otherwise
    records = read_stream(spark, topic, bootstrap_servers=bootstrap, options={"startingOffsets": "earliest"})
    query = (
        records.writeStream.format("delta")
        .option("checkpointLocation", f"{table}_checkpoint")
        .trigger(availableNow=True)
        .start(table)
    )
    query.awaitTermination()
    ids = spark.read.format("delta").load(table).select("id").toArrow().column("id").to_pylist()
    print(json.dumps({"master": spark.sparkContext.master, "ids": sorted(ids)}))
    spark.stop()


if __name__ == "__main__":
    main(*sys.argv[1:4])
