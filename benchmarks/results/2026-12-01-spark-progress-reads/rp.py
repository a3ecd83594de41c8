"""What pyspark's ``StreamingQuery.recentProgress`` costs the driver's Python as a query's kept
reports grow (a rate source into the noop sink, a trigger every 100 ms): three calls once 40 are
kept, then ``lastProgress`` and the JVM's ``lastProgress().batchId()`` through py4j.

    python benchmarks/results/2026-12-01-spark-progress-reads/rp.py
"""

import time

from parka.spark_ext import session

spark = session(
    "local[2]",
    "rp",
    extra_conf={
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.extraJavaOptions": "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC",
    },
)
rate = spark.readStream.format("rate").option("rowsPerSecond", 10).load()
q = rate.writeStream.format("noop").trigger(processingTime="100 milliseconds").start()
while len(q._jsq.recentProgress()) < 40:
    time.sleep(1)
for _ in range(3):
    t0 = time.process_time()
    w0 = time.perf_counter()
    r = q.recentProgress
    cpu, wall = round(time.process_time() - t0, 3), round(time.perf_counter() - w0, 3)
    print(len(r), "reports: python CPU", cpu, "s, wall", wall, "s")
t0 = time.perf_counter()
lp = q.lastProgress
print("lastProgress wall", round(time.perf_counter() - t0, 4))
t0 = time.perf_counter()
j = q._jsq.lastProgress()
b = j.batchId()
print("java lastProgress batchId wall", round(time.perf_counter() - t0, 4))
q.stop()
spark.stop()
