"""What runs parka's daemons, between the lake and the command lines: each module is imported by
its public name, none of them by this package.

* :mod:`parka.ops.setting`: what a setting is (its flag, ``PARKA_*`` variable, help, default and
  check) and the parser built from them; :mod:`parka.ops.settings`: the settings the daemons
  share, their defaults taken from :mod:`parka.lake`'s constants.
* :mod:`parka.ops.cli_util`: the command-line helpers the daemons share (logging, the metrics
  server, one line for a failure) and the one place secrets are masked (:func:`~parka.ops.cli_util.redacted`).
* :mod:`parka.ops.health`: what the daemons tell an operator (exit codes, how a run ends, when a
  blocking cause is logged, backoff); pure, with an injected clock.
* :mod:`parka.ops.progress`: the terminal progress bar and its log-line twin.
* :mod:`parka.ops.preflight`: the probe before consuming (the table location, and a Kafka
  metadata request for the topic).
* :mod:`parka.ops.optimize_cli`: ``parka optimize``.
* :mod:`parka.ops.row_values`: ``--value-format``'s decoders of row records, a partition's run
  made segments, for both daemons.

The lake and the core never import this package; ``parka.consumer`` and ``parka.spark_ext`` do.
"""
